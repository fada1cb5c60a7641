#include "exec/stage.hpp"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "models/layers.hpp"

namespace pipetwin::exec {

std::string shape_of(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

struct StageRuntime::Slot {
  int version = 0;
  std::vector<torch::nn::AnyModule> layers;
  std::vector<at::Tensor> params;
  int refs = 0;  // micro-batches whose autograd graph uses these weights
};

struct StageRuntime::MicroBatch {
  at::Tensor input, target;
  at::Tensor received;             // the input as it arrived (its shape is the input gradient's)
  bool past_frozen = false;        // `input` is the frozen prefix's output already
  at::Tensor leaf;                 // the input as autograd leaf, for the input gradient
  std::vector<at::Tensor> xs, ys;  // per layer, when back-propagating layer by layer
  at::Tensor out;                  // stage output (with graph), or the loss on the last stage
  int graph_version = -1;          // weights the graph was built on; -1: no graph
};

StageRuntime::StageRuntime(StageSpec spec, LayerFactory factory, OptimizerConfig optimizer,
                           LossFn loss)
    : spec_(std::move(spec)),
      factory_(std::move(factory)),
      optimizer_(std::move(optimizer)),
      loss_(std::move(loss)) {
  auto first = std::make_shared<Slot>();
  first->layers = factory_();
  if (first->layers.size() != spec_.layers.size()) {
    throw std::logic_error(fmt::format("stage {}: factory built {} layers, expected {}",
                                       spec_.stage, first->layers.size(), spec_.layers.size()));
  }
  at::NoGradGuard no_grad;
  size_t frozen_params = 0;
  for (size_t l = 0; l < first->layers.size(); ++l) {
    const bool frozen = spec_.layers[l] < spec_.frozen_layers;
    if (frozen) ++frozen_;
    for (auto& p : first->layers[l].ptr()->parameters()) {
      first->params.push_back(p);
      param_layer_.push_back(spec_.layers[l]);
      param_index_.push_back(static_cast<int>(l));
      grads_.push_back(at::zeros_like(p));
      if (frozen) ++frozen_params;
    }
  }
  optimizer_.freeze_prefix(frozen_params);
  for (size_t i = 0; i < first->params.size(); ++i) first->params[i].mutable_grad() = grads_[i];
  slots_[0] = std::move(first);
}

StageRuntime::~StageRuntime() = default;

std::shared_ptr<StageRuntime::Slot> StageRuntime::new_slot() {
  std::shared_ptr<Slot> s;
  if (!pool_.empty()) {
    s = pool_.back();
    pool_.pop_back();
    return s;
  }
  s = std::make_shared<Slot>();
  s->layers = factory_();
  for (auto& l : s->layers) {
    for (auto& p : l.ptr()->parameters()) s->params.push_back(p);
  }
  for (size_t i = 0; i < s->params.size(); ++i) s->params[i].mutable_grad() = grads_[i];
  return s;
}

StageRuntime::Slot& StageRuntime::slot_of(int version, const char* who, int mb) {
  auto it = slots_.find(version);
  if (it == slots_.end()) {
    throw std::runtime_error(
        fmt::format("stage {}: {} of micro-batch {} reads weight version {}, "
                    "which the stage no longer holds (current {})",
                    spec_.stage, who, mb, version, current_));
  }
  return *it->second;
}

at::Tensor StageRuntime::run(Slot& slot, MicroBatch& m, bool with_graph) {
  auto finish = [&](const at::Tensor& y) {
    if (!spec_.last) return y;
    const at::Tensor per_sample = loss_(y, m.target);
    if (!with_graph) loss_sum_ += per_sample.sum().item<double>();
    return per_sample.sum() * spec_.loss_scale;
  };
  const size_t f = static_cast<size_t>(frozen_), n = slot.layers.size();
  if (f > 0 && !m.past_frozen) {
    // Keep the frozen prefix's output: a recompute starts from it (frozen layers run once).
    m.input = run_frozen(slot, m.input);
    m.past_frozen = true;
  }
  if (!with_graph || f == n) {
    at::NoGradGuard no_grad;
    at::Tensor x = m.input;
    for (size_t l = f; l < n; ++l) x = slot.layers[l].forward(x);
    return finish(x);
  }
  const bool needs_input_grad = !spec_.first && f == 0 && m.input.is_floating_point();
  m.leaf = needs_input_grad ? m.input.detach().requires_grad_(true) : m.input;
  m.xs.clear();
  m.ys.clear();
  at::Tensor x = m.leaf;
  for (size_t l = f; l < n; ++l) {
    if (spec_.per_layer_backward && l > f) x = x.detach().requires_grad_(true);
    if (spec_.per_layer_backward) m.xs.push_back(x);
    x = slot.layers[l].forward(x);
    if (spec_.per_layer_backward) m.ys.push_back(x);
  }
  at::Tensor out = finish(x);
  if (spec_.last && spec_.per_layer_backward) m.ys.back() = out;
  return out;
}

at::Tensor StageRuntime::forward(int mb, int version, const at::Tensor& input, bool keep_graph,
                                 const at::Tensor& target, bool past_frozen) {
  if (version != current_) {
    throw std::runtime_error(
        fmt::format("stage {}: forward of micro-batch {} asks for weight "
                    "version {} but the current version is {}",
                    spec_.stage, mb, version, current_));
  }
  Slot& slot = slot_of(version, "forward", mb);
  last_used_ = slot.version;
  auto m = std::make_unique<MicroBatch>();
  m->input = input;
  m->received = input;
  m->past_frozen = past_frozen;
  m->target = target;
  const models::DropoutKey key(models::micro_batch_dropout_key(
      spec_.dropout_seed, spec_.replica, static_cast<int>(micro_batch_offset_ + mb)));
  at::Tensor out = run(slot, *m, keep_graph);
  if (keep_graph) {
    if (spec_.last) loss_sum_ += (out / spec_.loss_scale).item<double>();
    m->out = out;
    m->graph_version = version;
    ++slot.refs;
  }
  in_flight_[mb] = std::move(m);
  return out.detach();
}

void StageRuntime::recompute(int mb, int version) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end()) {
    throw std::runtime_error(
        fmt::format("stage {}: recompute of micro-batch {} before its forward", spec_.stage, mb));
  }
  MicroBatch& m = *it->second;
  if (m.graph_version >= 0) release(m.graph_version);
  Slot& slot = slot_of(version, "recompute", mb);
  last_used_ = slot.version;
  const models::DropoutKey key(models::micro_batch_dropout_key(
      spec_.dropout_seed, spec_.replica, static_cast<int>(micro_batch_offset_ + mb)));
  m.out = run(slot, m, true);
  m.graph_version = version;
  ++slot.refs;
}

at::Tensor StageRuntime::backward(int mb, int version, const at::Tensor& grad_output,
                                  const std::function<void(int)>& on_layer_done) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end() || it->second->graph_version < 0) {
    throw std::runtime_error(
        fmt::format("stage {}: backward of micro-batch {} without a forward "
                    "graph (missing forward or recompute)",
                    spec_.stage, mb));
  }
  MicroBatch& m = *it->second;
  if (m.graph_version != version) {
    throw std::runtime_error(
        fmt::format("stage {}: backward of micro-batch {} asks for weight "
                    "version {} but its graph was built on version {}",
                    spec_.stage, mb, version, m.graph_version));
  }
  last_used_ = slots_.at(m.graph_version)->version;
  const size_t f = static_cast<size_t>(frozen_);
  if (!m.out.requires_grad()) {
    // Every layer of the stage is frozen: nothing to back-propagate.
  } else if (spec_.per_layer_backward) {
    at::Tensor g = spec_.last ? at::Tensor() : grad_output;
    for (size_t l = m.ys.size(); l-- > 0;) {
      if (g.defined()) {
        m.ys[l].backward(g);
      } else {
        m.ys[l].backward();
      }
      g = m.xs[l].requires_grad() ? m.xs[l].grad() : at::Tensor();
      if (on_layer_done) on_layer_done(spec_.layers[f + l]);
    }
  } else {
    if (spec_.last) {
      m.out.backward();
    } else {
      m.out.backward(grad_output);
    }
    if (on_layer_done) {
      for (size_t l = spec_.layers.size(); l-- > f;) on_layer_done(spec_.layers[l]);
    }
  }
  if (on_layer_done) {
    for (size_t l = f; l-- > 0;) on_layer_done(spec_.layers[l]);  // frozen: no gradient to wait for
  }
  at::Tensor input_grad = m.leaf.defined() && m.leaf.requires_grad() ? m.leaf.grad() : at::Tensor();
  // Below a frozen prefix nothing trains: the upstream stage's schedule still receives a gradient.
  if (f > 0 && !spec_.first) input_grad = at::zeros_like(m.received);
  release(m.graph_version);
  in_flight_.erase(it);
  return input_grad;
}

void StageRuntime::release(int version) {
  auto it = slots_.find(version);
  if (it == slots_.end()) return;
  if (--it->second->refs == 0 && version != current_) {
    pool_.push_back(it->second);
    slots_.erase(it);
  }
}

void StageRuntime::optimizer_step(int new_version) {
  if (new_version != current_ + 1) {
    throw std::runtime_error(
        fmt::format("stage {}: optimizer step to version {} but the stage is at "
                    "version {}",
                    spec_.stage, new_version, current_));
  }
  if (spec_.track_gradient_norms) record_gradient_norms();
  auto cur = slots_.at(current_);
  if (cur->refs == 0) {
    optimizer_.step(cur->params, grads_, cur->params);  // nothing else reads them: in place
    slots_.erase(current_);
    cur->version = new_version;
    slots_[new_version] = cur;
  } else {
    auto next = new_slot();  // the old weights stay for the micro-batches still using them
    optimizer_.step(cur->params, grads_, next->params);
    next->version = new_version;
    slots_[new_version] = next;
  }
  {
    at::NoGradGuard no_grad;
    for (auto& g : grads_) g.zero_();
  }
  current_ = new_version;
}

void StageRuntime::warm_up(const at::Tensor& input, const at::Tensor& target, int graphs) {
  // Hold `graphs` graphs at once, as the run will: the allocator grows to the run's peak here
  // rather than during the first timed iterations (page faults on fresh memory). The warm-up
  // leaves no trace: BatchNorm statistics are put back, gradients and the loss zeroed.
  std::vector<at::Tensor> saved_buffers;
  for (const auto& b : buffers()) saved_buffers.push_back(b.detach().clone());
  std::vector<MicroBatch> ms(static_cast<size_t>(std::max(1, graphs)));
  std::vector<at::Tensor> outs;
  for (auto& m : ms) {
    m.input = input;
    m.target = target;
    outs.push_back(run(*slots_.at(current_), m, true));
  }
  for (size_t i = ms.size(); i-- > 0;) {
    MicroBatch& m = ms[i];
    if (!outs[i].requires_grad()) continue;  // every layer frozen
    if (spec_.last) {
      outs[i].backward();
    } else if (spec_.per_layer_backward) {
      at::Tensor g = at::ones_like(m.ys.back());
      for (size_t l = m.ys.size(); l-- > 0;) {
        m.ys[l].backward(g);
        g = m.xs[l].requires_grad() ? m.xs[l].grad() : at::Tensor();
        if (!g.defined()) break;
      }
    } else {
      outs[i].backward(at::ones_like(outs[i]));
    }
  }
  at::NoGradGuard no_grad;
  for (auto& g : grads_) g.zero_();
  const auto live = buffers();
  for (size_t i = 0; i < live.size(); ++i) live[i].copy_(saved_buffers[i]);
  loss_sum_ = 0;
}

void StageRuntime::begin_window(int64_t first_micro_batch) {
  if (!in_flight_.empty() || slots_.size() != 1 || slots_.begin()->first != current_) {
    throw std::logic_error(fmt::format(
        "stage {}: begin_window with {} micro-batches in flight and {} weight versions alive",
        spec_.stage, in_flight_.size(), slots_.size()));
  }
  auto slot = slots_.begin()->second;
  slots_.clear();
  slot->version = 0;
  slots_[0] = std::move(slot);
  current_ = 0;
  last_used_ = 0;
  micro_batch_offset_ = first_micro_batch;
}

at::Tensor StageRuntime::infer(const at::Tensor& input) {
  Slot& slot = *slots_.at(current_);
  at::NoGradGuard no_grad;
  for (auto& l : slot.layers) l.ptr()->eval();
  at::Tensor x = input;
  try {
    for (auto& l : slot.layers) x = l.forward(x);
  } catch (...) {
    for (auto& l : slot.layers) l.ptr()->train();
    throw;
  }
  for (auto& l : slot.layers) l.ptr()->train();
  return x;
}

std::vector<at::Tensor> StageRuntime::buffers() const {
  std::vector<at::Tensor> out;
  for (const auto& l : slots_.at(current_)->layers) {
    for (const auto& b : l.ptr()->buffers()) out.push_back(b);
  }
  return out;
}

std::vector<std::pair<int, std::string>> StageRuntime::parameter_names() const {
  std::vector<std::pair<int, std::string>> out;
  const auto& layers = slots_.at(current_)->layers;
  for (size_t l = 0; l < layers.size(); ++l) {
    for (const auto& item : layers[l].ptr()->named_parameters()) {
      out.emplace_back(spec_.layers[l], item.key());
    }
  }
  return out;
}

std::vector<std::pair<int, std::string>> StageRuntime::buffer_names() const {
  std::vector<std::pair<int, std::string>> out;
  const auto& layers = slots_.at(current_)->layers;
  for (size_t l = 0; l < layers.size(); ++l) {
    for (const auto& item : layers[l].ptr()->named_buffers()) {
      out.emplace_back(spec_.layers[l], item.key());
    }
  }
  return out;
}

void StageRuntime::load_state(const std::vector<at::Tensor>& params,
                              const std::vector<at::Tensor>& buffers) {
  const auto own_params = parameters();
  const auto own_buffers = this->buffers();
  auto copy = [this](const std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from,
                     const char* what) {
    if (to.size() != from.size()) {
      throw std::invalid_argument(fmt::format("stage {}: {} {} given, the stage has {}",
                                              spec_.stage, from.size(), what, to.size()));
    }
    for (size_t i = 0; i < to.size(); ++i) {
      if (!to[i].sizes().equals(from[i].sizes())) {
        throw std::invalid_argument(fmt::format("stage {}: {} {} has shape {}, expected {}",
                                                spec_.stage, what, i, shape_of(from[i]),
                                                shape_of(to[i])));
      }
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < to.size(); ++i) {
      at::Tensor dst = to[i];
      dst.copy_(from[i]);
    }
  };
  copy(own_params, params, "parameters");
  copy(own_buffers, buffers, "buffers");
}

std::vector<at::Tensor> StageRuntime::gradients(int first_layer, int last_layer) const {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (param_layer_[i] >= std::max(first_layer, spec_.frozen_layers) &&
        param_layer_[i] <= last_layer) {
      out.push_back(grads_[i]);
    }
  }
  return out;
}

std::vector<at::Tensor> StageRuntime::parameters() const {
  return slots_.at(current_)->params;
}

double StageRuntime::take_loss_sum() {
  const double s = loss_sum_;
  loss_sum_ = 0;
  return s;
}

int StageRuntime::live_versions() const {
  return static_cast<int>(slots_.size());
}

at::Tensor StageRuntime::run_frozen(Slot& slot, at::Tensor x, int from, int to) {
  if (to < 0) to = frozen_;
  if (from < 0 || from > to || to > frozen_) {
    throw std::logic_error(fmt::format("stage {}: frozen layers [{}, {}) of the {} frozen",
                                       spec_.stage, from, to, frozen_));
  }
  at::NoGradGuard no_grad;
  frozen_passes_.resize(static_cast<size_t>(frozen_), 0);
  for (int l = from; l < to; ++l) {
    auto& layer = slot.layers[static_cast<size_t>(l)];
    layer.ptr()->eval();  // infer() puts every layer back in training mode
    frozen_passes_[static_cast<size_t>(l)] += x.size(0);
    x = layer.forward(x);
  }
  return x;
}

at::Tensor StageRuntime::frozen_forward(const at::Tensor& input, int from, int to) {
  return run_frozen(*slots_.at(current_), input, from, to);
}

void StageRuntime::record_gradient_norms() {
  std::vector<double> sq(spec_.layers.size(), 0.0);
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (param_layer_[i] < spec_.frozen_layers) continue;
    const double n = grads_[i].norm().item<double>();
    sq[static_cast<size_t>(param_index_[i])] += n * n;
  }
  norms_.push_back(std::move(sq));
}

std::vector<std::vector<double>> StageRuntime::take_gradient_norms() {
  return std::exchange(norms_, {});
}

}  // namespace pipetwin::exec
