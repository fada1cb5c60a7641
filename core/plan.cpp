#include "core/plan.hpp"

#include <algorithm>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

int Plan::devices_per_replica() const {
  int max_dev = 0;
  for (const auto& s : stages) max_dev = std::max(max_dev, s.device + std::max(s.replicas, 1) - 1);
  return max_dev + 1;
}

bool Plan::replicates_stages() const {
  return std::any_of(stages.begin(), stages.end(),
                     [](const StagePlan& s) { return s.replicas > 1; });
}

namespace {

// A replicated stage has its devices to itself (PipelineShape::stage_replicas).
template <class Bad>
void check_replicated_stages(const Plan& p, const Bad& bad) {
  std::vector<int> device, replicas;
  for (const auto& st : p.stages) {
    device.push_back(st.device);
    replicas.push_back(st.replicas);
  }
  const auto pair = stages_sharing_a_replicated_device(device, replicas);
  if (!pair) return;
  const auto [s, t] = *pair;
  const StagePlan& r = p.stages[static_cast<size_t>(replicas[static_cast<size_t>(s)] > 1 ? s : t)];
  bad(fmt::format("stages[{}].device", t),
      fmt::format("stage {} shares a device with stage {}, whose {} replicas need devices {}..{} "
                  "to themselves",
                  t, s, r.replicas, r.device, r.device + r.replicas - 1));
}

}  // namespace

template <class Bad>
void Plan::validate_placement(const Bad& bad) const {
  const int t = tp();
  const int groups = dp * devices_per_replica();
  if (placement.empty()) {
    if (groups * t > cluster.num_devices()) {
      bad(t > 1 ? "tensor_parallel" : "dp",
          fmt::format("the plan needs {} devices ({} replicas x {}{}), cluster \"{}\" has {}",
                      groups * t, dp, devices_per_replica(),
                      t > 1 ? fmt::format(" x tp {}", t) : "", cluster.name,
                      cluster.num_devices()));
    }
  } else if (static_cast<int>(placement.size()) != groups) {
    bad("placement", fmt::format("{} entries for dp x devices = {}", placement.size(), groups));
  }
  if (t > 1 && cluster.device.core_sharing >= 2) {
    bad("tensor_parallel",
        fmt::format("the devices of cluster \"{}\" are stream sets, {} to a GPU: a tensor-parallel "
                    "group needs t GPUs of its own",
                    cluster.name, cluster.device.core_sharing));
  }
  std::set<int> used;
  for (int g = 0; g < groups; ++g) {
    const int first = placement.empty() ? g * t : placement[static_cast<size_t>(g)];
    for (int p = first; p < first + t; ++p) {
      if (p < 0 || p >= cluster.num_devices()) {
        bad("placement", fmt::format("device {} not in cluster \"{}\" (0..{})", p, cluster.name,
                                     cluster.num_devices() - 1));
      }
      if (!used.insert(p).second) bad("placement", fmt::format("device {} used twice", p));
    }
    if (t > 1 && !tp_across_nodes && cluster.node_of(first) != cluster.node_of(first + t - 1)) {
      bad("tensor_parallel",
          fmt::format("the group of devices {}..{} spans nodes {} and {} (a node has {} devices); "
                      "tensor parallelism stays inside a node unless tp_across_nodes is set",
                      first, first + t - 1, cluster.node_of(first), cluster.node_of(first + t - 1),
                      cluster.devices_per_node));
    }
  }
}

void Plan::validate(const std::string& origin) const {
  auto bad = [&](const std::string& field, const std::string& what) {
    throw InputError(fmt::format("{}: {}: {}", origin, field, what));
  };
  try {
    schedule_info(schedule);
  } catch (const InputError& e) {
    bad("schedule", e.what());
  }
  if (!(compute_scale > 0)) bad("compute_scale", fmt::format("must be positive ({} given)", compute_scale));
  if (lambda_frozen < 0 || lambda_frozen > 1) {
    bad("lambda_frozen", fmt::format("must be in [0, 1] ({} given)", lambda_frozen));
  }
  if (!(bucket_cap_bytes > 0) || !(first_bucket_bytes > 0)) bad("ddp", "bucket sizes must be positive");
  if (batch_size < 1) bad("batch_size", fmt::format("must be positive ({} given)", batch_size));
  if (chunks < 1) bad("chunks", fmt::format("must be positive ({} given)", chunks));
  if (dp < 1) bad("dp", fmt::format("must be positive ({} given)", dp));
  if (batch_size % (dp * chunks) != 0) {
    bad("batch_size", fmt::format("{} is not divisible by dp x chunks = {} x {}", batch_size, dp,
                                  chunks));
  }
  if (stages.empty()) bad("stages", "a plan needs at least one stage");
  const int L = profile.num_layers();
  std::vector<int> owner(static_cast<size_t>(L), -1);
  for (size_t s = 0; s < stages.size(); ++s) {
    const std::string field = fmt::format("stages[{}]", s);
    if (stages[s].layers.empty()) bad(field + ".layers", "a stage needs at least one layer");
    if (stages[s].device < 0) bad(field + ".device", "must not be negative");
    if (stages[s].replicas < 1) {
      bad(field + ".replicas", fmt::format("must be positive ({} given)", stages[s].replicas));
    }
    if (chunks % stages[s].replicas != 0) {
      bad(field + ".replicas",
          fmt::format("{} replicas do not divide chunks M = {}: each replica takes M / replicas "
                      "micro-batches of a mini-batch",
                      stages[s].replicas, chunks));
    }
    for (int l : stages[s].layers) {
      if (l < 0 || l >= L) bad(field + ".layers", fmt::format("layer {} out of range 0..{}", l, L - 1));
      if (owner[static_cast<size_t>(l)] >= 0) {
        bad(field + ".layers", fmt::format("layer {} already in stage {}", l, owner[static_cast<size_t>(l)]));
      }
      owner[static_cast<size_t>(l)] = static_cast<int>(s);
    }
  }
  for (int l = 0; l < L; ++l) {
    if (owner[static_cast<size_t>(l)] < 0) {
      bad("stages", fmt::format("layer {} (\"{}\") is in no stage", l,
                                profile.layers[static_cast<size_t>(l)].name));
    }
  }
  if (replicates_stages()) check_replicated_stages(*this, bad);
  if (const std::string why = tensor_parallel_refusal(tensor_parallel); !why.empty()) {
    bad("tensor_parallel", why);
  }
  if (profile.tensor_parallel != tensor_parallel) {
    bad("tensor_parallel",
        fmt::format("the plan's ({}) is not its profile's ({}): a tensor-parallel plan runs the "
                    "profile of one shard",
                    describe(tensor_parallel), describe(profile.tensor_parallel)));
  }
  validate_placement(bad);
  if (frozen_layers < 0 || frozen_layers > L) {
    bad("frozen_layers", fmt::format("must be in 0..{} ({} given)", L, frozen_layers));
  }
  if (iterations < 0) bad("iterations", "must not be negative");
}

Json plan_to_json(const Plan& p) {
  Json doc = json_document("pipetwin.plan", 1);
  doc["model"] = p.model;
  doc["schedule"] = p.schedule;
  doc["partitioner"] = p.partitioner;
  doc["batch_size"] = p.batch_size;
  doc["chunks"] = p.chunks;
  doc["micro_batch_size"] = p.micro_batch_size();
  doc["dp"] = p.dp;
  doc["checkpoint"] = checkpoint_name(p.checkpoint);
  Json stages = Json::array();
  for (const auto& s : p.stages) {
    Json stage = {{"layers", s.layers}, {"device", s.device}};
    if (s.replicas != 1) stage["replicas"] = s.replicas;
    stages.push_back(stage);
  }
  doc["stages"] = stages;
  if (!p.placement.empty()) doc["placement"] = p.placement;
  if (p.tensor_parallel != TensorParallel{}) {
    doc["tensor_parallel"] = tensor_parallel_to_json(p.tensor_parallel);
  }
  if (p.tp_across_nodes) doc["tp_across_nodes"] = true;
  if (p.distributed_optimizer) doc["distributed_optimizer"] = true;
  if (p.iterations > 0) doc["iterations"] = p.iterations;
  doc["compute_scale"] = p.compute_scale;
  doc["ddp"] = {{"bucket_cap_bytes", p.bucket_cap_bytes}, {"first_bucket_bytes", p.first_bucket_bytes}};
  doc["frozen_layers"] = p.frozen_layers;
  doc["lambda_frozen"] = p.lambda_frozen;
  doc["cache"] = p.cache;
  if (!p.framework.identity()) {
    Framework terms = p.framework;
    terms.fit = Json();  // the fit's report stays in the framework's own file
    doc["framework"] = framework_to_json(terms);
  }
  doc["cluster"] = cluster_to_json(p.cluster);
  doc["profile"] = profile_to_json(p.profile);
  return doc;
}

Plan plan_from_json(const JsonView& doc) {
  doc.check_format("pipetwin.plan", 1);
  doc.allow_only({"format", "version", "model", "schedule", "partitioner", "batch_size", "chunks",
                  "micro_batch_size", "dp", "checkpoint", "stages", "placement", "iterations",
                  "compute_scale", "ddp", "frozen_layers", "lambda_frozen", "cache", "framework",
                  "cluster", "profile", "tensor_parallel", "tp_across_nodes",
                  "distributed_optimizer"});
  Plan p;
  p.model = doc.string("model");
  p.schedule = doc.string("schedule");
  try {
    schedule_info(p.schedule);
  } catch (const InputError& e) {
    doc.at("schedule").fail(e.what());
  }
  p.partitioner = doc.string_or("partitioner", "manual");
  p.batch_size = doc.int32("batch_size");
  p.chunks = doc.int32("chunks");
  p.dp = doc.int32_or("dp", 1);
  const std::string ck = doc.string_or("checkpoint", "none");
  if (!parse_checkpoint(ck, p.checkpoint)) {
    doc.at("checkpoint").fail(fmt::format("expected none, except_last or always, got \"{}\"", ck));
  }
  for (const auto& s : doc.at("stages").items()) {
    s.allow_only({"layers", "device", "replicas"});
    StagePlan sp;
    for (const auto& l : s.at("layers").items()) sp.layers.push_back(l.as_int32());
    sp.device = s.int32("device");
    sp.replicas = s.int32_or("replicas", 1);
    p.stages.push_back(std::move(sp));
  }
  if (auto pl = doc.find("placement")) {
    for (const auto& v : pl->items()) p.placement.push_back(v.as_int32());
  }
  if (auto tp = doc.find("tensor_parallel")) p.tensor_parallel = tensor_parallel_from_json(*tp);
  p.tp_across_nodes = doc.bool_or("tp_across_nodes", false);
  p.distributed_optimizer = doc.bool_or("distributed_optimizer", false);
  p.iterations = doc.int32_or("iterations", 0);
  p.compute_scale = doc.positive_or("compute_scale", 1.0);
  if (auto ddp = doc.find("ddp")) {
    ddp->allow_only({"bucket_cap_bytes", "first_bucket_bytes"});
    p.bucket_cap_bytes = ddp->positive_or("bucket_cap_bytes", p.bucket_cap_bytes);
    p.first_bucket_bytes = ddp->positive_or("first_bucket_bytes", p.first_bucket_bytes);
  }
  p.frozen_layers = doc.int32_or("frozen_layers", 0);
  p.lambda_frozen = doc.nonneg_or("lambda_frozen", p.lambda_frozen);
  p.cache = doc.bool_or("cache", false);
  if (auto fw = doc.find("framework")) p.framework = framework_from_json(*fw);
  p.cluster = cluster_from_json(doc.at("cluster"), Catalog());
  p.profile = profile_from_json(doc.at("profile"));
  if (doc.has("micro_batch_size") && p.dp * p.chunks > 0 && p.batch_size % (p.dp * p.chunks) == 0 &&
      doc.integer("micro_batch_size") != p.micro_batch_size()) {
    doc.at("micro_batch_size").fail(fmt::format("{} disagrees with batch_size / (dp x chunks) = {}",
                                                doc.integer("micro_batch_size"), p.micro_batch_size()));
  }
  p.validate(doc.origin());
  return p;
}

Plan load_plan(const std::string& path) {
  return load_json_as(path, plan_from_json);
}

void save_plan(const Plan& plan, const std::string& path) {
  save_json_file(path, plan_to_json(plan));
}

int schedule_default_iterations(const std::string& schedule, int num_stages) {
  // Synchronous schedules reach steady state in the second mini-batch; asynchronous ones need
  // K warm-up and K drain steps around a measured window.
  return schedule_info(schedule).asynchronous ? 4 * num_stages + 4 : 3;
}

namespace {

CostOptions cost_options(const Plan& p) {
  CostOptions o;
  o.compute_scale = p.compute_scale;
  o.bucket_cap_bytes = p.bucket_cap_bytes;
  o.first_bucket_bytes = p.first_bucket_bytes;
  o.frozen_layers = p.frozen_layers;
  o.lambda_frozen = p.lambda_frozen;
  o.framework = p.framework;
  o.optimizer_shards = p.distributed_optimizer ? p.dp : 1;
  if (p.tp() > 1) {
    o.tp_group.resize(static_cast<size_t>(p.tp()));
    std::iota(o.tp_group.begin(), o.tp_group.end(), p.placement.empty() ? 0 : p.placement[0]);
  }
  return o;
}

}  // namespace

namespace {

const Plan& validated(const Plan& p) {
  p.validate("plan");
  return p;
}

}  // namespace

PlanContext::PlanContext(const Plan& p, int iterations)
    : plan(validated(p)), cost(p.profile, p.cluster, cost_options(p)) {
  const int S = plan.num_stages();
  std::vector<int> stage_of(static_cast<size_t>(plan.profile.num_layers()), 0);
  for (int s = 0; s < S; ++s) {
    for (int l : plan.stages[static_cast<size_t>(s)].layers) stage_of[static_cast<size_t>(l)] = s;
  }
  shape.num_stages = S;
  for (const auto& st : plan.stages) shape.stage_device.push_back(st.device);
  if (plan.replicates_stages()) {
    for (const auto& st : plan.stages) shape.stage_replicas.push_back(st.replicas);
  }
  shape.devices_per_replica = plan.devices_per_replica();
  shape.replicas = plan.dp;
  shape.micro_batches = plan.chunks;
  shape.iterations = iterations > 0 ? iterations
                                    : (plan.iterations > 0 ? plan.iterations
                                                           : schedule_default_iterations(plan.schedule, S));
  shape.checkpoint = plan.checkpoint;
  shape.edges = cost.stage_edges(stage_of);
  const double b = plan.micro_batch_size();
  for (const auto& st : plan.stages) {
    std::vector<int> layers(st.layers);
    std::sort(layers.begin(), layers.end());
    stages.push_back(cost.stage_cost(layers, b));
    shape.buckets.push_back(stages.back().buckets);
  }
  shape.normalize("plan");
  placement = plan.placement;
  if (placement.empty()) {
    placement.resize(static_cast<size_t>(plan.dp * shape.devices_per_replica));
    std::iota(placement.begin(), placement.end(), 0);
    for (int& p : placement) p *= plan.tp();
  }
  if (plan.distributed_optimizer && plan.dp > 1) add_parameter_gather();
  if (plan.framework.transfer_host_s > 0) add_transfer_host();
}

void PlanContext::add_transfer_host() {
  // The framework's transfer_host_s (core/framework.hpp) at both ends of every hand-off between
  // stages on two devices: the sender's and the receiver's forward for the activation, their
  // backwards for the gradient (a stage with no backward pass, frozen, sends and receives none).
  const double h = plan.framework.transfer_host_s;
  auto charge = [this, h](int stage, bool backward) {
    StageCost& c = stages[static_cast<size_t>(stage)];
    if (backward) {
      c.backward_s += h;
      c.backward_shared_s += h;
    } else {
      c.forward_s += h;
      c.forward_shared_s += h;
    }
  };
  for (const StageEdge& e : shape.edges) {
    if (shape.stage_device[static_cast<size_t>(e.from)] ==
        shape.stage_device[static_cast<size_t>(e.to)])
      continue;
    charge(e.from, false);
    charge(e.to, false);
    if (stages[static_cast<size_t>(e.from)].backward_s > 0) {
      charge(e.from, true);
      charge(e.to, true);
    }
  }
}

void PlanContext::add_parameter_gather() {
  gradient_reduce_share = 0.5;
  for (int s = 0; s < shape.num_stages; ++s) {
    std::vector<int> ring;
    for (int d : shape.gradient_copy_devices(s)) ring.push_back(placement[static_cast<size_t>(d)]);
    StageCost& st = stages[static_cast<size_t>(s)];
    st.parameter_gather_s = cost.allreduce_s(st.param_bytes, ring) / 2;
    for (double StageCost::*step :
         {&StageCost::optimizer_s, &StageCost::optimizer_new_version_s,
          &StageCost::optimizer_shared_s, &StageCost::optimizer_new_version_shared_s}) {
      st.*step += st.parameter_gather_s;
    }
  }
}

std::vector<int> tp_group(const PlanContext& context, int device) {
  std::vector<int> group(static_cast<size_t>(context.plan.tp()));
  std::iota(group.begin(), group.end(), context.placement[static_cast<size_t>(device)]);
  return group;
}

}  // namespace pipetwin
