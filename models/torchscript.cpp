// The one translation unit of pipetwin that includes LibTorch's TorchScript headers (they cost
// ~20 s to compile): loading a module, checking it, and wrapping its children as layers.
#include "models/torchscript.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/serialization/import.h>

#include "core/error.hpp"
#include "core/json_io.hpp"
#include "models/torchscript_spec.hpp"

namespace pipetwin::models {

namespace {

// ---- layers: a child of the module as a torch::nn::Module -----------------------------------

// A forward of a child runs in TorchScript's interpreter with the graph executor's optimizer off
// (the setting is per thread): operator by operator, differentiated by autograd as an eager
// module is. With it on, the profiling executor re-specialises a graph for each new input shape
// and swaps in optimized, differentiable subgraphs after its first runs, so that a layer's time
// would depend on how often and with which micro-batch sizes it ran before: `pipetwin profile`
// (every micro-batch size in turn) would not time what `pipetwin run` (one size) runs.
c10::IValue run_forward(torch::jit::Module& m, std::vector<c10::IValue> inputs) {
  torch::jit::GraphOptimizerEnabledGuard interpreter(false);
  return m.forward(std::move(inputs));
}

// A TorchScript module's parameters, buffers and children mirrored as a torch::nn::Module: the
// same tensors (not copies), under the same names, so that optimizers, checkpoints and .to()
// reach the module's own weights.
class ScriptNode : public torch::nn::Module {
 public:
  explicit ScriptNode(const torch::jit::Module& m) {
    for (const auto& p : m.named_parameters(/*recurse=*/false))
      register_parameter(p.name, p.value, p.value.requires_grad());
    for (const auto& b : m.named_buffers(/*recurse=*/false)) register_buffer(b.name, b.value);
    for (const auto& c : m.named_children())
      register_module(c.name, std::make_shared<ScriptNode>(c.value));
  }
};

// A layer: a child whose forward maps one tensor to one tensor.
class ScriptLayerImpl : public ScriptNode {
 public:
  explicit ScriptLayerImpl(torch::jit::Module m) : ScriptNode(m), module_(std::move(m)) {}
  torch::Tensor forward(const torch::Tensor& x) { return run_forward(module_, {x}).toTensor(); }
  void train(bool on) override {
    ScriptNode::train(on);
    module_.train(on);
  }

 private:
  torch::jit::Module module_;
};

// A layer that also reads an earlier layer's output (Layer::skip_from).
class ScriptSkipLayerImpl : public ScriptNode {
 public:
  explicit ScriptSkipLayerImpl(torch::jit::Module m) : ScriptNode(m), module_(std::move(m)) {}
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip) {
    return run_forward(module_, {x, skip}).toTensor();
  }
  void train(bool on) override {
    ScriptNode::train(on);
    module_.train(on);
  }

 private:
  torch::jit::Module module_;
};

// ---- loading --------------------------------------------------------------------------------

// One line of an error message: the first, or for an error raised in the TorchScript interpreter
// (whose first line only says so, followed by tracebacks) the last, which names the error.
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.rfind("The following operation failed in the TorchScript interpreter", 0) == 0) {
    const size_t end = text.find_last_not_of("\n ");
    const size_t begin = text.rfind('\n', end);
    if (end != std::string::npos && begin != std::string::npos)
      line = text.substr(begin + 1, end - begin);
  }
  return line.size() > 240 ? line.substr(0, 240) + "..." : line;
}

std::string error_text(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e))
    return first_line(c->what_without_backtrace());
  return first_line(e.what());
}

std::mutex g_mutex;  // guards the caches below

// The file's identity for the caches: path, size and modification time.
std::string file_stamp(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const auto time = std::filesystem::last_write_time(path, ec).time_since_epoch().count();
  return fmt::format("{}|{}|{}", path, size, time);
}

torch::jit::Module load_module(const std::string& path) {
  static std::map<std::string, std::string> bytes;  // by file_stamp
  std::string data;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const std::string key = file_stamp(path);
    auto it = bytes.find(key);
    if (it == bytes.end()) it = bytes.emplace(key, read_file_bytes(path)).first;
    data = it->second;
  }
  std::istringstream in(data);
  try {
    return torch::jit::load(in, c10::Device(c10::kCPU));
  } catch (const std::exception& e) {
    throw InputError(
        fmt::format("{}: not a TorchScript module (save one with torch.jit.script and "
                    "torch.jit.save): {}",
                    path, error_text(e)));
  }
}

struct Child {
  std::string name;
  torch::jit::Module module;
};

// The layers: the top-level children in order, a child without a forward (a ModuleList) standing
// for its elements. Throws when a container holds parameters of its own.
std::vector<Child> children_of(const torch::jit::Module& top, const std::string& path) {
  auto own_state = [&](const torch::jit::Module& m, const std::string& who) {
    std::vector<std::string> names;
    for (const auto& p : m.named_parameters(false)) names.push_back(p.name);
    for (const auto& b : m.named_buffers(false)) names.push_back(b.name);
    if (!names.empty()) {
      throw InputError(fmt::format(
          "{}: {} holds {} outside its children: pipetwin trains the children, move them into "
          "one",
          path, who, fmt::join(names, ", ")));
    }
  };
  own_state(top, "the module");
  std::vector<Child> out;
  for (const auto& c : top.named_children()) {
    if (c.value.find_method("forward")) {
      out.push_back({c.name, c.value});
      continue;
    }
    own_state(c.value, fmt::format("child \"{}\"", c.name));
    size_t inner = 0;
    for (const auto& e : c.value.named_children()) {
      if (!e.value.find_method("forward")) {
        throw InputError(
            fmt::format("{}: child \"{}.{}\" has no forward method", path, c.name, e.name));
      }
      out.push_back({c.name + "." + e.name, e.value});
      ++inner;
    }
    if (inner == 0)
      throw InputError(
          fmt::format("{}: child \"{}\" has no forward and no children", path, c.name));
  }
  if (out.empty()) {
    throw InputError(fmt::format(
        "{}: the module has no children: pipetwin cuts a module into its top-level children "
        "(an nn.Sequential, or a module that calls a `layers` ModuleList in order)",
        path));
  }
  return out;
}

// The names of the tensor inputs a child's forward requires (optional ones left out); throws for
// an input or an output that is not a tensor.
std::vector<std::string> tensor_inputs(const Child& c, size_t i, const std::string& path) {
  const c10::FunctionSchema& schema = c.module.get_method("forward").function().getSchema();
  const std::string who = fmt::format("{}: child {} (\"{}\")", path, i, c.name);
  std::vector<std::string> names;
  for (size_t a = 1; a < schema.arguments().size(); ++a) {  // argument 0 is self
    const c10::Argument& arg = schema.arguments()[a];
    if (arg.default_value()) continue;
    if (arg.type()->kind() != c10::TypeKind::TensorType) {
      throw InputError(fmt::format("{} takes {}: {}; pipetwin passes tensors between layers", who,
                                   arg.name(), arg.type()->str()));
    }
    names.push_back(arg.name());
  }
  if (schema.returns().size() != 1 ||
      schema.returns()[0].type()->kind() != c10::TypeKind::TensorType) {
    std::vector<std::string> types;
    for (const auto& r : schema.returns()) types.push_back(r.type()->str());
    throw InputError(fmt::format("{} returns {}; pipetwin needs one tensor from each layer", who,
                                 fmt::join(types, ", ")));
  }
  return names;
}

// Layer i's skip source from the metadata (-1: none); checks the names against the children.
std::vector<int> skip_sources(const std::vector<Child>& children, const TorchScriptSpec& ts) {
  std::vector<int> skip(children.size(), -1);
  if (ts.layers.empty()) return skip;
  std::vector<std::string> have, listed;
  for (const auto& c : children) have.push_back(c.name);
  for (const auto& l : ts.layers) listed.push_back(l.name);
  if (have != listed) {
    throw InputError(
        fmt::format("{}: layers: lists [{}], but {} has the children [{}]: save both again with "
                    "save_for_pipetwin",
                    ts.metadata_path, fmt::join(listed, ", "), ts.path, fmt::join(have, ", ")));
  }
  for (size_t i = 0; i < ts.layers.size(); ++i) {
    const std::string& from = ts.layers[i].skip_from;
    if (from.empty()) continue;
    const auto at = std::find(listed.begin(), listed.end(), from);
    if (at == listed.end() || at - listed.begin() >= static_cast<long>(i)) {
      throw InputError(
          fmt::format("{}: layers[{}].skip_from: \"{}\" is not an earlier layer of \"{}\"",
                      ts.metadata_path, i, from, ts.layers[i].name));
    }
    skip[i] = static_cast<int>(at - listed.begin());
  }
  return skip;
}

void check_inputs(const std::vector<Child>& children, const std::vector<int>& skip,
                  const TorchScriptSpec& ts) {
  for (size_t i = 0; i < children.size(); ++i) {
    const std::vector<std::string> in = tensor_inputs(children[i], i, ts.path);
    const size_t want = skip[i] >= 0 ? 2 : 1;
    if (in.size() == want) continue;
    const std::string who = fmt::format("{}: child {} (\"{}\")", ts.path, i, children[i].name);
    if (in.size() == 2) {
      throw InputError(fmt::format(
          "{} takes two tensors ({}) and no skip edge feeds the second: declare it with "
          "save_for_pipetwin (the metadata's layers[{}].skip_from)",
          who, fmt::join(in, ", "), i));
    }
    throw InputError(fmt::format("{} takes {} tensor input(s) ({}); a layer takes {}", who,
                                 in.size(), fmt::join(in, ", "), want));
  }
}

// No tensor belongs to two layers (each stage trains its own copy).
void check_unshared(const std::vector<Child>& children, const std::string& path) {
  std::map<const void*, std::string> owner;
  for (const auto& c : children) {
    for (const auto& p : c.module.named_parameters(true)) {
      const auto [it, fresh] = owner.emplace(p.value.unsafeGetTensorImpl(), c.name + "." + p.name);
      if (!fresh) {
        throw InputError(fmt::format(
            "{}: children share a parameter ({} is {}): pipetwin needs each parameter in one "
            "layer",
            path, c.name + "." + p.name, it->second));
      }
    }
  }
}

// The class of a child, lower case ("linear", "transformerencoderlayer"); a Sequential is its
// first element's.
std::string kind_of(const torch::jit::Module& m) {
  std::string kind = m.type()->name() ? m.type()->name()->name() : "module";
  std::transform(kind.begin(), kind.end(), kind.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (kind == "sequential") {
    for (const auto& c : m.named_children()) return kind_of(c.value);
  }
  return kind;
}

void convert_dtype(const torch::jit::Module& m, torch::Dtype dtype) {
  at::NoGradGuard no_grad;
  for (at::Tensor t : m.parameters(true)) {
    if (t.is_floating_point() && t.scalar_type() != dtype) t.set_data(t.to(dtype));
  }
  for (at::Tensor t : m.buffers(true)) {
    if (t.is_floating_point() && t.scalar_type() != dtype) t.set_data(t.to(dtype));
  }
}

std::string shape_text(at::IntArrayRef s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

// ---- the check on a synthetic batch ---------------------------------------------------------

// The task and sample of the model, found by running the module once (below).
struct Derived {
  Task task = Task::kClassification;
  SampleSpec sample;
};

// The sample as far as the spec gives it (the input); the target comes from the output.
SampleSpec input_sample(const TorchScriptSpec& ts) {
  if (!ts.has_input_shape) {
    throw InputError(fmt::format(
        "{}: no input shape: pass --input-shape D1,D2,... (one sample) or save the module with "
        "save_for_pipetwin (python/pipetwin_save.py), which writes {}.json",
        ts.path, ts.path));
  }
  if (ts.token_input && ts.vocab < 1) {
    throw InputError(fmt::format(
        "{}: int64 inputs are token ids: give the vocabulary size (--vocab N)", ts.path));
  }
  SampleSpec s;
  s.input_shape = ts.input_shape;
  s.token_input = ts.token_input;
  s.vocab = ts.vocab;
  return s;
}

// The chain's output on `x` (eval mode, no gradients), naming the child that fails.
at::Tensor run_chain(LayeredModel& m, const at::Tensor& x, const std::string& path) {
  std::map<int, at::Tensor> values{{LayeredModel::kModelInput, x}};
  for (size_t i = 0; i < m.layers.size(); ++i) {
    try {
      m.forward_layers({static_cast<int>(i)}, values);
    } catch (const std::exception& e) {
      throw InputError(fmt::format(
          "{}: child {} (\"{}\") fails on its input {} ({}): its forward must be its children in "
          "order",
          path, i, m.layers[i].name, shape_text(values.at(static_cast<int>(i) - 1).sizes()),
          error_text(e)));
    }
  }
  return values.at(static_cast<int>(m.layers.size()) - 1);
}

// The target's shape and the loss's task from the output, checked against the spec.
Derived from_output(const TorchScriptSpec& ts, SampleSpec sample, const at::Tensor& y) {
  Derived d;
  const std::vector<int64_t> out(y.sizes().begin() + 1, y.sizes().end());
  if (out.empty()) {
    throw InputError(
        fmt::format("{}: the output {} has one value per sample; loss {} needs at "
                    "least [batch, N]",
                    ts.path, shape_text(y.sizes()), ts.loss));
  }
  std::vector<int64_t> target = out;
  if (ts.loss == "cross_entropy") {
    d.task = Task::kClassification;
    sample.classes = out.back();
    target.pop_back();
    if (ts.classes != 0 && ts.classes != sample.classes) {
      throw InputError(fmt::format("{}: classes {}, but the output {} has {} in its last dimension",
                                   ts.path, ts.classes, shape_text(y.sizes()), sample.classes));
    }
  } else {
    d.task = Task::kRegression;
  }
  if (ts.target_shape && *ts.target_shape != target) {
    throw InputError(fmt::format("{}: target_shape [{}], but loss {} on the output {} needs [{}]",
                                 ts.path, fmt::join(*ts.target_shape, ", "), ts.loss,
                                 shape_text(y.sizes()), fmt::join(target, ", ")));
  }
  sample.target_shape = target;
  d.sample = sample;
  return d;
}

// Runs the module and its layers on a synthetic batch of two and derives the target.
Derived check_and_derive(const TorchScriptSpec& ts, LayeredModel& m,
                         const torch::jit::Module& top) {
  m.sample = input_sample(ts);
  const at::Tensor x = m.synthetic_input(2, 0x7057c417ULL);
  at::NoGradGuard no_grad;
  torch::jit::Module whole = top;
  whole.train(false);
  at::Tensor expected;
  try {
    const c10::IValue out = run_forward(whole, {x});
    if (!out.isTensor())
      throw InputError(fmt::format("{}: the module's forward returns {}, not one tensor", ts.path,
                                   out.tagKind()));
    expected = out.toTensor();
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: the module's forward fails on a {} {} input: {}", ts.path,
                                 shape_text(x.sizes()), c10::toString(x.scalar_type()),
                                 error_text(e)));
  }
  const at::Tensor got = run_chain(m, x, ts.path);
  const double scale = std::max(1.0, expected.abs().max().item<double>());
  if (!got.sizes().equals(expected.sizes()) ||
      (got - expected).abs().max().item<double>() > 1e-5 * scale) {
    throw InputError(fmt::format(
        "{}: its children applied in order give {} where the module's forward gives {}{}: its "
        "forward must be its children in order (declare skip edges with save_for_pipetwin)",
        ts.path, shape_text(got.sizes()), shape_text(expected.sizes()),
        got.sizes().equals(expected.sizes()) ? " with other values" : ""));
  }
  whole.train(true);
  return from_output(ts, m.sample, expected);
}

}  // namespace

LayeredModel build_torchscript_model(const ModelSpec& spec, torch::Dtype dtype, uint64_t seed) {
  const TorchScriptSpec ts = torchscript_spec(spec);
  const torch::jit::Module top = load_module(ts.path);
  const std::vector<Child> children = children_of(top, ts.path);
  const std::vector<int> skip = skip_sources(children, ts);
  check_inputs(children, skip, ts);
  check_unshared(children, ts.path);
  convert_dtype(top, dtype);
  LayeredModel m;
  m.name = ts.name;
  m.dtype = dtype;
  m.seed = seed;
  for (size_t i = 0; i < children.size(); ++i) {
    const Child& c = children[i];
    const std::string kind =
        ts.layers.empty() || ts.layers[i].kind.empty() ? kind_of(c.module) : ts.layers[i].kind;
    torch::nn::AnyModule module =
        skip[i] >= 0 ? torch::nn::AnyModule(std::make_shared<ScriptSkipLayerImpl>(c.module))
                     : torch::nn::AnyModule(std::make_shared<ScriptLayerImpl>(c.module));
    m.layers.push_back({c.name, kind, std::move(module), skip[i]});
  }
  // The checks run once per file, name and dtype in a process; later builds reuse what they found.
  static std::map<std::string, Derived> derived;
  const std::string key =
      fmt::format("{}|{}|{}", ts.name, c10::toString(dtype), file_stamp(ts.path));
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    const auto it = derived.find(key);
    if (it != derived.end()) {
      m.task = it->second.task;
      m.sample = it->second.sample;
      return m;
    }
  }
  const Derived d = check_and_derive(ts, m, top);
  m.task = d.task;
  m.sample = d.sample;
  std::lock_guard<std::mutex> lock(g_mutex);
  derived.emplace(key, d);
  return m;
}

}  // namespace pipetwin::models
