#include "core/schedule/schedule.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

const char* checkpoint_name(Checkpoint c) {
  switch (c) {
    case Checkpoint::kNone: return "none";
    case Checkpoint::kExceptLast: return "except_last";
    case Checkpoint::kAlways: return "always";
  }
  return "?";
}

bool parse_checkpoint(const std::string& s, Checkpoint& out) {
  for (Checkpoint c : {Checkpoint::kNone, Checkpoint::kExceptLast, Checkpoint::kAlways}) {
    if (s == checkpoint_name(c)) {
      out = c;
      return true;
    }
  }
  return false;
}

Checkpoint parse_checkpoint_mode(const std::string& text, std::string_view flag) {
  Checkpoint c = Checkpoint::kNone;
  if (!parse_checkpoint(text, c)) {
    throw InputError(
        fmt::format("{}: expected none, except_last or always, got \"{}\"", flag, text));
  }
  return c;
}

void PipelineShape::normalize(const std::string& origin) {
  auto bad = [&](const std::string& what) { throw InputError(fmt::format("{}: {}", origin, what)); };
  if (num_stages < 1) bad(fmt::format("stages must be positive ({} given)", num_stages));
  if (micro_batches < 1) bad(fmt::format("chunks M must be positive ({} given)", micro_batches));
  if (iterations < 1) bad(fmt::format("iterations must be positive ({} given)", iterations));
  if (replicas < 1) bad(fmt::format("data-parallel width must be positive ({} given)", replicas));
  if (stage_device.empty()) {
    for (int s = 0; s < num_stages; ++s) stage_device.push_back(s);
  }
  if (static_cast<int>(stage_device.size()) != num_stages) {
    bad(fmt::format("{} stages but {} stage devices", num_stages, stage_device.size()));
  }
  if (*std::min_element(stage_device.begin(), stage_device.end()) < 0) {
    bad("stage device must not be negative");
  }
  check_stage_replicas(bad);
  int max_dev = 0;
  for (int s = 0; s < num_stages; ++s)
    max_dev = std::max(max_dev, device_of(s) + replicas_of(s) - 1);
  if (devices_per_replica == 0) devices_per_replica = max_dev + 1;
  if (max_dev >= devices_per_replica) {
    bad(fmt::format("stage on device {} but only {} devices per replica", max_dev,
                    devices_per_replica));
  }
  if (edges.empty()) {
    for (int s = 0; s + 1 < num_stages; ++s) edges.push_back({s, s + 1, 0});
  }
  for (const auto& e : edges) {
    if (e.from < 0 || e.to < 0 || e.from >= num_stages || e.to >= num_stages || e.from >= e.to) {
      bad(fmt::format("stage edge {}->{} must go forward between existing stages", e.from, e.to));
    }
  }
  if (!buckets.empty() && static_cast<int>(buckets.size()) != num_stages) {
    bad(fmt::format("{} stages but buckets for {}", num_stages, buckets.size()));
  }
}

template <class Bad>
void PipelineShape::check_stage_replicas(const Bad& bad) const {
  if (stage_replicas.empty()) return;
  if (static_cast<int>(stage_replicas.size()) != num_stages) {
    bad(fmt::format("{} stages but {} stage replica counts", num_stages, stage_replicas.size()));
  }
  for (int s = 0; s < num_stages; ++s) {
    const int r = replicas_of(s);
    if (r < 1) bad(fmt::format("stage {} replicas must be positive ({} given)", s, r));
    if (micro_batches % r != 0) {
      bad(
          fmt::format("micro-batches M = {} must be a multiple of stage {}'s {} replicas, so that "
                      "each replica takes M / {} of every mini-batch",
                      micro_batches, s, r, r));
    }
  }
  if (const auto pair = stages_sharing_a_replicated_device(stage_device, stage_replicas)) {
    bad(
        fmt::format("stages {} and {} share a device, but a replicated stage needs its devices "
                    "to itself",
                    pair->first, pair->second));
  }
}

std::optional<std::pair<int, int>> stages_sharing_a_replicated_device(
    const std::vector<int>& first_device, const std::vector<int>& replicas) {
  const auto n = std::min(first_device.size(), replicas.size());
  for (size_t s = 0; s < n; ++s) {
    for (size_t t = s + 1; t < n; ++t) {
      if (replicas[s] == 1 && replicas[t] == 1) continue;
      if (first_device[s] < first_device[t] + replicas[t] &&
          first_device[t] < first_device[s] + replicas[s]) {
        return std::make_pair(static_cast<int>(s), static_cast<int>(t));
      }
    }
  }
  return std::nullopt;
}

bool PipelineShape::replicates_stages() const {
  return std::any_of(stage_replicas.begin(), stage_replicas.end(), [](int r) { return r > 1; });
}

std::vector<int> PipelineShape::gradient_copy_devices(int stage) const {
  std::vector<int> out;
  for (int r = 0; r < replicas; ++r) {
    for (int k = 0; k < replicas_of(stage); ++k)
      out.push_back(r * devices_per_replica + device_of(stage) + k);
  }
  return out;
}

std::vector<int> PipelineShape::stages_on(int device) const {
  std::vector<int> out;
  for (int s = 0; s < num_stages; ++s) {
    if (hosts(device, s)) out.push_back(s);
  }
  return out;
}

bool PipelineShape::one_stage_per_device() const {
  // Also asked of shapes not yet normalized (no stage devices: one stage per device).
  std::vector<int> count;
  for (size_t s = 0; s < stage_device.size(); ++s) {
    const int r = s < stage_replicas.size() ? stage_replicas[s] : 1;
    for (int k = 0; k < r; ++k) {
      const auto d = static_cast<size_t>(stage_device[s] + k);
      if (d >= count.size()) count.resize(d + 1, 0);
      if (++count[d] > 1) return false;
    }
  }
  return true;
}

size_t Schedule::num_actions() const {
  size_t n = 0;
  for (const auto& d : devices) n += d.size();
  return n;
}

namespace {

Json action_to_json(const Action& a) {
  Json j;
  j["op"] = op_name(a.op);
  if (a.payload != Payload::kNone) j["payload"] = payload_name(a.payload);
  j["stage"] = a.stage;
  if (a.micro_batch >= 0) j["mb"] = a.micro_batch;
  if (a.peer_stage >= 0) j["peer_stage"] = a.peer_stage;
  if (a.bucket >= 0) j["bucket"] = a.bucket;
  j["step"] = a.step;
  if (a.version >= 0) j["version"] = a.version;
  return j;
}

Action action_from_json(const JsonView& j) {
  j.allow_only({"op", "payload", "stage", "mb", "peer_stage", "bucket", "step", "version"});
  Action a;
  const std::string op = j.string("op");
  if (!parse_op(op, a.op) || a.op == Op::kTensorParallel) {
    j.at("op").fail(fmt::format("unknown op \"{}\" (forward, backward, recompute, send, recv, "
                                "allreduce, optimizer_step, backward_input, backward_weight)",
                                op));
  }
  const std::string payload = j.string_or("payload", "none");
  if (!parse_payload(payload, a.payload)) {
    j.at("payload").fail(fmt::format("expected activation or gradient, got \"{}\"", payload));
  }
  if ((a.op == Op::kSend || a.op == Op::kRecv) != (a.payload != Payload::kNone)) {
    j.fail("send and recv need a payload (activation or gradient); other ops take none");
  }
  a.stage = j.int32("stage");
  a.micro_batch = j.int32_or("mb", -1);
  a.peer_stage = j.int32_or("peer_stage", -1);
  a.bucket = j.int32_or("bucket", -1);
  a.step = j.int32("step");
  a.version = j.int32_or("version", -1);
  return a;
}

}  // namespace

Json schedule_to_json(const Schedule& s) {
  Json doc = json_document("pipetwin.schedule", 1);
  doc["kind"] = s.kind;
  const auto& sh = s.shape;
  Json shape;
  shape["num_stages"] = sh.num_stages;
  shape["stage_device"] = sh.stage_device;
  if (sh.replicates_stages()) shape["stage_replicas"] = sh.stage_replicas;
  shape["devices_per_replica"] = sh.devices_per_replica;
  shape["replicas"] = sh.replicas;
  shape["micro_batches"] = sh.micro_batches;
  shape["iterations"] = sh.iterations;
  shape["checkpoint"] = checkpoint_name(sh.checkpoint);
  Json edges = Json::array();
  for (const auto& e : sh.edges) {
    edges.push_back({{"from", e.from}, {"to", e.to}, {"bytes_per_sample", e.bytes_per_sample}});
  }
  shape["edges"] = edges;
  Json buckets = Json::array();
  for (const auto& stage : sh.buckets) {
    Json list = Json::array();
    for (const auto& b : stage) {
      list.push_back({{"first_layer", b.first_layer}, {"last_layer", b.last_layer}, {"bytes", b.bytes}});
    }
    buckets.push_back(list);
  }
  shape["buckets"] = buckets;
  doc["shape"] = shape;
  doc["stashes_weights"] = s.stashes_weights;
  Json devices = Json::array();
  for (const auto& d : s.devices) {
    Json list = Json::array();
    for (const auto& a : d) list.push_back(action_to_json(a));
    devices.push_back(list);
  }
  doc["devices"] = devices;
  Json control = Json::array();
  for (const auto& c : s.control) {
    control.push_back({{"before", {c.before.device, c.before.index}},
                       {"after", {c.after.device, c.after.index}}});
  }
  doc["control"] = control;
  return doc;
}

namespace {

PipelineShape shape_from_json(const JsonView& j) {
  j.allow_only({"num_stages", "stage_device", "stage_replicas", "devices_per_replica", "replicas",
                "micro_batches", "iterations", "checkpoint", "edges", "buckets"});
  PipelineShape sh;
  sh.num_stages = j.int32("num_stages");
  if (auto sd = j.find("stage_device")) {
    for (const auto& v : sd->items()) sh.stage_device.push_back(v.as_int32());
  }
  if (auto sr = j.find("stage_replicas")) {
    for (const auto& v : sr->items()) sh.stage_replicas.push_back(v.as_int32());
  }
  sh.devices_per_replica = j.int32_or("devices_per_replica", 0);
  sh.replicas = j.int32_or("replicas", 1);
  sh.micro_batches = j.int32("micro_batches");
  sh.iterations = j.int32_or("iterations", 1);
  const std::string ck = j.string_or("checkpoint", "none");
  if (!parse_checkpoint(ck, sh.checkpoint)) {
    j.at("checkpoint").fail(fmt::format("expected none, except_last or always, got \"{}\"", ck));
  }
  if (auto edges = j.find("edges")) {
    for (const auto& e : edges->items()) {
      sh.edges.push_back({e.int32("from"), e.int32("to"),
                          e.nonneg_or("bytes_per_sample", 0)});
    }
  }
  if (auto buckets = j.find("buckets")) {
    for (const auto& stage : buckets->items()) {
      std::vector<Bucket> list;
      for (const auto& b : stage.items()) {
        list.push_back({b.int32("first_layer"),
                        b.int32("last_layer"), b.nonneg("bytes")});
      }
      sh.buckets.push_back(std::move(list));
    }
  }
  sh.normalize(j.origin() + ": " + j.path());
  return sh;
}

ActionRef ref_from_json(const JsonView& j, const Schedule& s) {
  if (j.size() != 2) j.fail("expected [device, index]");
  const int64_t d = j.at(0).as_int(), i = j.at(1).as_int();
  if (d < 0 || d >= s.num_devices()) j.at(0).fail(fmt::format("no device {}", d));
  if (i < 0 || i >= static_cast<int64_t>(s.devices[static_cast<size_t>(d)].size())) {
    j.at(1).fail(fmt::format("device {} has no action {}", d, i));
  }
  return {static_cast<int32_t>(d), static_cast<int32_t>(i)};
}

}  // namespace

Schedule schedule_from_json(const JsonView& doc) {
  doc.check_format("pipetwin.schedule", 1);
  doc.allow_only({"format", "version", "kind", "shape", "stashes_weights", "devices", "control"});
  Schedule s;
  s.kind = doc.string_or("kind", "custom");
  s.shape = shape_from_json(doc.at("shape"));
  s.stashes_weights = doc.bool_or("stashes_weights", true);
  const JsonView devices = doc.at("devices");
  const size_t expected = static_cast<size_t>(s.shape.devices_per_replica * s.shape.replicas);
  if (devices.size() != expected) {
    devices.fail(fmt::format("expected {} device lists ({} per replica x {} replicas), got {}",
                             expected, s.shape.devices_per_replica, s.shape.replicas,
                             devices.size()));
  }
  for (const auto& d : devices.items()) {
    std::vector<Action> list;
    for (const auto& a : d.items()) list.push_back(action_from_json(a));
    s.devices.push_back(std::move(list));
  }
  if (auto control = doc.find("control")) {
    for (const auto& c : control->items()) {
      ControlDep dep{ref_from_json(c.at("before"), s), ref_from_json(c.at("after"), s)};
      if (dep.before.device != dep.after.device) c.fail("control dependencies must stay on one device");
      s.control.push_back(dep);
    }
  }
  return s;
}

}  // namespace pipetwin
