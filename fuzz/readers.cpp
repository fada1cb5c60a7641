#include "fuzz/readers.hpp"

#include <algorithm>
#include <utility>

#include "core/cluster.hpp"
#include "core/cost_model.hpp"
#include "core/json_io.hpp"
#include "core/metrics.hpp"
#include "core/model_spec.hpp"
#include "core/plan.hpp"
#include "core/profile.hpp"
#include "core/schedule/schedule.hpp"
#include "core/synthetic.hpp"
#include "core/timeline.hpp"

namespace pipetwin::fuzz {

namespace {

void read_profile(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.profile.json");
  const Profile p = profile_from_json(JsonView(doc, "fuzz.profile.json"));
  Cluster c;
  c.device.name = p.device;
  c.device.memory_bytes = 1e12;
  c.intra_node = c.inter_node = {"link", "", 1e9, 1e-6};
  const CostModel cost(p, c);
  (void)cost.graph().topological_order();
}

void read_cluster(std::string_view bytes) {
  static const Catalog catalog = Catalog::load(Catalog::default_dir());
  const Json doc = parse_json_text(bytes, "fuzz.cluster.json");
  const Cluster c = cluster_from_json(JsonView(doc, "fuzz.cluster.json"), catalog);
  for (int d = 0; d < std::min(c.num_devices(), 64); ++d) (void)c.sharing_group(d);
}

// Simulation is left out: its size is the plan's to choose, and refusing enormous runs is the
// resource-limit check's job.
void read_plan(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.plan.json");
  const Plan plan = plan_from_json(JsonView(doc, "fuzz.plan.json"));
  plan.validate("fuzz.plan.json");
  const PlanContext ctx(plan, 1);
  (void)ctx.stages.size();
}

// As `pipetwin compare` reads a measured timeline.
void read_timeline(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.timeline.json");
  const Timeline t = timeline_from_chrome_trace(JsonView(doc, "fuzz.timeline.json"));
  for (bool async : {false, true}) (void)compute_metrics(t, std::max(1, t.num_devices()), async, 1.0);
}

void read_metrics(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.metrics.json");
  (void)metrics_to_json(metrics_from_json(JsonView(doc, "fuzz.metrics.json")));
}

void read_schedule(std::string_view bytes) {
  const Json doc = parse_json_text(bytes, "fuzz.schedule.json");
  (void)schedule_from_json(JsonView(doc, "fuzz.schedule.json"));
}

void read_model_spec(std::string_view bytes) {
  const ModelSpec spec = ModelSpec::parse(std::string(bytes), "--model");
  if (is_synthetic_model(spec)) (void)synthetic_profile(spec);
}

const std::pair<const char*, Reader> kReaders[] = {
    {"profile", read_profile},   {"cluster", read_cluster},   {"plan", read_plan},
    {"timeline", read_timeline}, {"metrics", read_metrics},   {"schedule", read_schedule},
    {"model_spec", read_model_spec},
};

}  // namespace

Reader find_reader(std::string_view format) {
  for (const auto& [name, reader] : kReaders) {
    if (format == name) return reader;
  }
  return nullptr;
}

std::vector<std::string> reader_names() {
  std::vector<std::string> out;
  for (const auto& r : kReaders) out.emplace_back(r.first);
  return out;
}

}  // namespace pipetwin::fuzz
