#include "exec/train/checkpoint.hpp"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "core/error.hpp"
#include "exec/runtime/loss_scaler.hpp"
#include "exec/runtime/stage.hpp"
#include "models/layered_model.hpp"

namespace pipetwin::exec {

namespace fs = std::filesystem;

namespace {

constexpr const char* kRankFormat = "pipetwin.checkpoint.rank";
constexpr const char* kManifestFormat = "pipetwin.checkpoint";

std::string hex64(uint64_t x) {
  return fmt::format("{:016x}", x);
}

uint64_t parse_hex64(const JsonView& v) {
  const std::string s = v.as_string();
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos) {
    v.fail(fmt::format("expected 16 lower-case hex digits, got \"{}\"", s));
  }
  return std::stoull(s, nullptr, 16);
}

Json shape_json(const at::Tensor& t) {
  Json a = Json::array();
  for (int64_t d = 0; d < t.dim(); ++d) a.push_back(t.size(d));
  return a;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Json stage_header(const StageState& st, std::vector<at::Tensor>& tensors) {
  Json j;
  j["replica"] = st.replica;
  j["stage"] = st.stage;
  j["layers"] = st.layers;
  j["optimizer_steps"] = st.optimizer_steps;
  if (st.loss_scale > 0) {
    j["loss_scaler"] = {{"scale", st.loss_scale}, {"growth_tracker", st.loss_scale_growth_tracker}};
  }
  Json list = Json::array();
  for (const auto& t : st.tensors) {
    list.push_back({{"name", t.name},
                    {"role", t.role},
                    {"shape", shape_json(t.value)},
                    {"dtype", std::string(c10::toString(t.value.scalar_type()))}});
    tensors.push_back(t.value.detach().contiguous());
  }
  j["tensors"] = std::move(list);
  return j;
}

// Checks a header tensor entry against the tensor stored at its index.
void check_entry(const JsonView& e, const at::Tensor& t) {
  std::vector<int64_t> shape;
  for (const auto& d : e.at("shape").items()) shape.push_back(d.as_int());
  if (!t.sizes().equals(shape)) {
    e.at("shape").fail(fmt::format("the stored tensor has shape {}", shape_of(t)));
  }
  const std::string dtype = e.string("dtype");
  if (dtype != c10::toString(t.scalar_type())) {
    e.at("dtype").fail(
        fmt::format("\"{}\", but the stored tensor is {}", dtype, c10::toString(t.scalar_type())));
  }
}

StageState read_stage(const JsonView& j, const std::vector<at::Tensor>& tensors, size_t& next) {
  StageState st;
  st.replica = j.int32("replica");
  st.stage = j.int32("stage");
  for (const auto& l : j.at("layers").items()) st.layers.push_back(l.as_int32());
  st.optimizer_steps = j.integer("optimizer_steps");
  if (const auto ls = j.find("loss_scaler")) {
    st.loss_scale = ls->positive("scale");
    st.loss_scale_growth_tracker = ls->int32("growth_tracker");
  }
  for (const auto& e : j.at("tensors").items()) {
    if (next >= tensors.size()) e.fail("more tensors listed than stored");
    NamedTensor t{e.string("name"), e.string("role"), tensors[next++]};
    static const std::vector<std::string> roles = {"parameter", "buffer", "momentum", "exp_avg",
                                                   "exp_avg_sq"};
    if (std::find(roles.begin(), roles.end(), t.role) == roles.end()) {
      e.at("role").fail(fmt::format("unknown role \"{}\"", t.role));
    }
    check_entry(e, t.value);
    st.tensors.push_back(std::move(t));
  }
  return st;
}

}  // namespace

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

std::string plan_fingerprint(const Plan& plan, const std::string& precision) {
  std::string s =
      fmt::format("{}|{}|b{}|M{}|dp{}|{}|{}|", plan.model, plan.schedule, plan.batch_size,
                  plan.chunks, plan.dp, checkpoint_name(plan.checkpoint), precision);
  for (const auto& st : plan.stages) {
    s += fmt::format("d{}:", st.device);
    for (int l : st.layers) s += fmt::format("{},", l);
    s += ";";
  }
  for (const auto& l : plan.profile.layers) s += l.name + ",";
  // Frozen layers (an elastic run's later plans) change what trains; 0 keeps older fingerprints.
  if (plan.frozen_layers > 0) s += fmt::format("|frozen{}", plan.frozen_layers);
  return hex64(fnv1a64(s));
}

std::string rank_file_name(int64_t step, int rank) {
  return fmt::format("step-{:08d}.rank{}.pt", step, rank);
}

StageState capture_stage(int replica, const StageRuntime& rt, const models::LayeredModel& model) {
  StageState st;
  st.replica = replica;
  st.stage = rt.spec().stage;
  st.layers = rt.spec().layers;
  const OptimizerState opt = rt.optimizer().export_state();
  st.optimizer_steps = opt.steps;
  if (const LossScaler* scaler = rt.loss_scaler()) {
    st.loss_scale = scaler->scale();
    st.loss_scale_growth_tracker = scaler->growth_tracker();
  }
  auto name = [&](const std::pair<int, std::string>& k) {
    return model.layers[static_cast<size_t>(k.first)].name + "." + k.second;
  };
  const auto pnames = rt.parameter_names();
  const auto params = rt.parameters();
  // A layer frozen before the optimizer's first step has no state yet: zeros stand for it (it
  // is never read again, layers do not thaw).
  auto state = [&](const std::vector<at::Tensor>& list, size_t i) {
    return list[i].defined() ? list[i] : at::zeros_like(params[i]);
  };
  for (size_t i = 0; i < params.size(); ++i) {
    st.tensors.push_back({name(pnames[i]), "parameter", params[i]});
    if (!opt.momentum.empty())
      st.tensors.push_back({name(pnames[i]), "momentum", state(opt.momentum, i)});
    if (!opt.exp_avg.empty()) {
      st.tensors.push_back({name(pnames[i]), "exp_avg", state(opt.exp_avg, i)});
      st.tensors.push_back({name(pnames[i]), "exp_avg_sq", state(opt.exp_avg_sq, i)});
    }
  }
  const auto bnames = rt.buffer_names();
  const auto buffers = rt.buffers();
  for (size_t i = 0; i < buffers.size(); ++i) {
    st.tensors.push_back({name(bnames[i]), "buffer", buffers[i]});
  }
  return st;
}

void restore_stage(const StageState& state, StageRuntime& rt, const models::LayeredModel& model,
                   const std::string& origin) {
  std::map<std::pair<std::string, std::string>, at::Tensor> by_name;
  for (const auto& t : state.tensors) by_name[{t.name, t.role}] = t.value;
  auto find = [&](const std::string& name, const char* role, const at::Tensor& like,
                  bool required) -> at::Tensor {
    auto it = by_name.find({name, role});
    if (it == by_name.end()) {
      if (!required) return {};
      throw InputError(fmt::format("{}: stage {}: no {} \"{}\"", origin, state.stage, role, name));
    }
    if (!it->second.sizes().equals(like.sizes()) ||
        it->second.scalar_type() != like.scalar_type()) {
      throw InputError(fmt::format("{}: stage {}: {} \"{}\" is {} {}, but the model has {} {}",
                                   origin, state.stage, role, name,
                                   c10::toString(it->second.scalar_type()), shape_of(it->second),
                                   c10::toString(like.scalar_type()), shape_of(like)));
    }
    return it->second;
  };
  auto layer_name = [&](const std::pair<int, std::string>& k) {
    return model.layers[static_cast<size_t>(k.first)].name + "." + k.second;
  };
  const auto params = rt.parameters();
  const auto pnames = rt.parameter_names();
  const auto buffers = rt.buffers();
  const auto bnames = rt.buffer_names();
  std::vector<at::Tensor> p, b;
  OptimizerState opt;
  opt.steps = state.optimizer_steps;
  const bool momentum = !params.empty() && by_name.count({layer_name(pnames[0]), "momentum"});
  const bool adam = !params.empty() && by_name.count({layer_name(pnames[0]), "exp_avg"});
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string n = layer_name(pnames[i]);
    p.push_back(find(n, "parameter", params[i], true));
    if (momentum) opt.momentum.push_back(find(n, "momentum", params[i], true));
    if (adam) {
      opt.exp_avg.push_back(find(n, "exp_avg", params[i], true));
      opt.exp_avg_sq.push_back(find(n, "exp_avg_sq", params[i], true));
    }
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    b.push_back(find(layer_name(bnames[i]), "buffer", buffers[i], true));
  }
  rt.load_state(p, b);
  rt.optimizer().import_state(opt, params.size());
  LossScaler* scaler = rt.loss_scaler();
  if ((scaler != nullptr) != (state.loss_scale > 0)) {
    throw InputError(fmt::format("{}: stage {}: {}", origin, state.stage,
                                 scaler ? "the run scales the loss (float16), the state has no "
                                          "loss scaler"
                                        : "the state has a loss scaler, the run scales no loss"));
  }
  if (scaler) scaler->restore(state.loss_scale, state.loss_scale_growth_tracker);
}

ManifestFile write_rank_file(const std::string& dir, const RankState& state) {
  std::vector<at::Tensor> tensors;
  Json h = json_document(kRankFormat, kCheckpointVersion);
  h["rank"] = state.rank;
  h["world"] = state.world;
  h["step"] = state.step;
  h["plan"] = state.plan;
  h["progress"] = state.progress;
  Json stages = Json::array();
  for (const auto& st : state.stages) stages.push_back(stage_header(st, tensors));
  h["stages"] = std::move(stages);
  h["rng_state"] = tensors.size();
  tensors.push_back(state.rng_state.contiguous());
  h["data_order"] = state.data_order.defined() ? static_cast<int64_t>(tensors.size()) : -1;
  if (state.data_order.defined()) tensors.push_back(state.data_order.contiguous());
  c10::List<at::Tensor> list;
  for (const auto& t : tensors) list.push_back(t);
  const std::vector<char> bytes = torch::jit::pickle_save(c10::ivalue::Tuple::create(
      {c10::IValue(std::string(kRankFormat)), c10::IValue(h.dump()), c10::IValue(list)}));
  ManifestFile f;
  f.rank = state.rank;
  f.file = rank_file_name(state.step, state.rank);
  const std::string_view view(bytes.data(), bytes.size());
  f.bytes = bytes.size();
  f.fnv1a64 = fnv1a64(view);
  try {
    write_file_atomic((fs::path(dir) / f.file).string(), view);
  } catch (const InputError& e) {
    throw RunFailure(e.what());
  }
  return f;
}

void write_manifest(const std::string& dir, const Manifest& m) {
  Json j = json_document(kManifestFormat, kCheckpointVersion);
  j["step"] = m.step;
  j["world"] = m.world;
  j["plan"] = m.plan;
  Json files = Json::array();
  for (const auto& f : m.files) {
    files.push_back(
        {{"rank", f.rank}, {"file", f.file}, {"bytes", f.bytes}, {"fnv1a64", hex64(f.fnv1a64)}});
  }
  j["files"] = std::move(files);
  try {
    write_file_atomic((fs::path(dir) / kManifestName).string(), dump_json(j));
  } catch (const InputError& e) {
    throw RunFailure(e.what());
  }
}

std::optional<Manifest> read_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kManifestName).string();
  if (!fs::exists(path)) return std::nullopt;
  const Json doc = load_json_file(path);
  const JsonView v(doc, path);
  v.check_format(kManifestFormat, kCheckpointVersion);
  v.allow_only({"format", "version", "step", "world", "plan", "files"});
  Manifest m;
  m.step = v.integer("step");
  if (m.step < 0) v.at("step").fail(fmt::format("must not be negative ({} given)", m.step));
  m.world = v.int32("world");
  if (m.world < 1) v.at("world").fail(fmt::format("must be positive ({} given)", m.world));
  m.plan = v.string("plan");
  const JsonView files = v.at("files");
  if (files.size() != static_cast<size_t>(m.world)) {
    files.fail(fmt::format("{} files for a world of {} ranks", files.size(), m.world));
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const JsonView f = files.at(i);
    ManifestFile mf;
    mf.rank = f.int32("rank");
    if (mf.rank != static_cast<int>(i)) f.at("rank").fail(fmt::format("expected {}", i));
    mf.file = f.string("file");
    if (mf.file.empty() || mf.file.find('/') != std::string::npos || mf.file[0] == '.') {
      f.at("file").fail(fmt::format("\"{}\" is not a file name in the folder", mf.file));
    }
    const int64_t bytes = f.integer("bytes");
    if (bytes <= 0) f.at("bytes").fail(fmt::format("must be positive ({} given)", bytes));
    mf.bytes = static_cast<uint64_t>(bytes);
    mf.fnv1a64 = parse_hex64(f.at("fnv1a64"));
    m.files.push_back(mf);
  }
  return m;
}

namespace {

// The file's bytes, checked against the manifest, unpickled: (header JSON text, tensors).
std::pair<std::string, std::vector<at::Tensor>> unpickle_rank_file(const std::string& path,
                                                                   const std::string& manifest,
                                                                   const ManifestFile& mf) {
  const std::string bytes = read_bytes(path);
  if (bytes.size() != mf.bytes) {
    throw InputError(fmt::format("{}: {} bytes, but {} files[{}].bytes says {}", path, bytes.size(),
                                 manifest, mf.rank, mf.bytes));
  }
  if (fnv1a64(bytes) != mf.fnv1a64) {
    throw InputError(
        fmt::format("{}: contents changed: FNV-1a hash {}, but {} files[{}].fnv1a64 "
                    "says {}",
                    path, hex64(fnv1a64(bytes)), manifest, mf.rank, hex64(mf.fnv1a64)));
  }
  c10::IValue v;
  try {
    v = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const std::exception&) {
    throw InputError(fmt::format("{}: not a pickled pipetwin checkpoint", path));
  }
  if (!v.isTuple() || v.toTupleRef().elements().size() != 3 ||
      !v.toTupleRef().elements()[0].isString() ||
      v.toTupleRef().elements()[0].toStringRef() != kRankFormat ||
      !v.toTupleRef().elements()[1].isString() || !v.toTupleRef().elements()[2].isList()) {
    throw InputError(fmt::format("{}: not a pipetwin checkpoint rank file", path));
  }
  const auto& el = v.toTupleRef().elements();
  std::vector<at::Tensor> tensors;
  for (const c10::IValue& t : el[2].toListRef()) {
    if (!t.isTensor()) throw InputError(fmt::format("{}: a stored item is not a tensor", path));
    tensors.push_back(t.toTensor());
  }
  return {el[1].toStringRef(), std::move(tensors)};
}

// "<what>, but <manifest> says <expected>" unless equal.
template <typename T>
void expect_field(const JsonView& h, const char* key, const T& got, const T& expected,
                  const std::string& manifest) {
  if (got != expected) {
    h.at(key).fail(
        fmt::format("{}, but {} says {}", Json(got).dump(), manifest, Json(expected).dump()));
  }
}

}  // namespace

RankState read_rank_file(const std::string& dir, const Manifest& m, int rank) {
  const ManifestFile& mf = m.files.at(static_cast<size_t>(rank));
  const std::string path = (fs::path(dir) / mf.file).string();
  const std::string manifest = (fs::path(dir) / kManifestName).string();
  const auto unpickled = unpickle_rank_file(path, manifest, mf);
  const std::vector<at::Tensor>& tensors = unpickled.second;
  const Json doc = parse_json_text(unpickled.first, path);
  const JsonView h(doc, path);
  h.check_format(kRankFormat, kCheckpointVersion);
  RankState s;
  s.rank = h.int32("rank");
  expect_field(h, "rank", s.rank, rank, manifest);
  s.world = h.int32("world");
  expect_field(h, "world", s.world, m.world, manifest);
  s.step = h.integer("step");
  expect_field(h, "step", s.step, m.step, manifest);
  s.plan = h.string("plan");
  expect_field(h, "plan", s.plan, m.plan, manifest);
  s.progress = h.at("progress").raw();
  size_t next = 0;
  for (const auto& st : h.at("stages").items()) s.stages.push_back(read_stage(st, tensors, next));
  auto extra = [&](const char* key, bool optional) {
    const int64_t i = h.integer(key);
    if (optional && i == -1) return at::Tensor();
    if (i != static_cast<int64_t>(next) || next >= tensors.size()) {
      h.at(key).fail(fmt::format("tensor {} is not stored (expected {})", i, next));
    }
    return tensors[next++];
  };
  s.rng_state = extra("rng_state", false);
  s.data_order = extra("data_order", true);
  if (next != tensors.size()) {
    h.fail(fmt::format("{} tensors stored, {} listed", tensors.size(), next));
  }
  return s;
}

void remove_unreferenced(const std::string& dir, const Manifest& m) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // A crash mid-write leaves write_file_atomic's ".step-....pt.tmp.XXXXXX".
    if (name.rfind(".step-", 0) == 0 && name.find(".tmp.") != std::string::npos) {
      fs::remove(entry.path(), ec);
      continue;
    }
    if (name.rfind("step-", 0) != 0 || entry.path().extension() != ".pt") continue;
    bool named = false;
    for (const auto& f : m.files) named = named || f.file == name;
    if (!named) fs::remove(entry.path(), ec);
  }
}

}  // namespace pipetwin::exec
