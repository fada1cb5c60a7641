// Shared fixtures of the schedule and simulator tests: synthetic plans on an ideal cluster.
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>

#include "profiles/model_spec.hpp"
#include "core/plan.hpp"
#include "core/schedule/virtual_stages.hpp"
#include "profiles/synthetic.hpp"
#include "sim/pipeline_sim.hpp"

namespace pipetwin::testing {

// A cluster of `devices` identical devices with ample memory; links of the given bandwidth and
// latency (transfers of 0 bytes cost nothing regardless).
inline Cluster ideal_cluster(int devices, double bandwidth = 1e12, double latency = 0,
                             int nodes = 1) {
  Cluster c;
  c.name = "ideal";
  c.device.name = "ideal-device";
  c.device.memory_bytes = 1e15;
  c.device.memory_bandwidth = 1e12;
  c.device.peak_flops["float32"] = 1e15;
  c.nodes = nodes;
  c.devices_per_node = devices / nodes;
  c.intra_node = {"ideal-link", "", bandwidth, latency};
  c.inter_node = c.intra_node;
  return c;
}

// L layers split evenly into K contiguous stages (the first L mod K get one more), stage k on
// device k.
inline std::vector<StagePlan> contiguous_stages(int L, int K) {
  std::vector<StagePlan> stages;
  int next = 0;
  for (int k = 0; k < K; ++k) {
    StagePlan st;
    st.device = k;
    for (int i = 0; i < L / K + (k < L % K ? 1 : 0); ++i) st.layers.push_back(next++);
    stages.push_back(st);
  }
  return stages;
}

struct PlanSpec {
  std::string model = "uniform:layers=4,fwd_ms=1,bwd_ms=2";
  std::string schedule = "gpipe";
  int stages = 4;
  int chunks = 4;
  int micro_batch = 1;
  int dp = 1;
  Checkpoint checkpoint = Checkpoint::kNone;
  Cluster cluster = ideal_cluster(64);
  // Stages placed as the schedule needs (two per device in a V for zbv and dualpipev,
  // core/schedule/virtual_stages.hpp); false: stage s on device s.
  bool lay_out = true;
};

// Layers split evenly into contiguous stages, stage s on device s.
inline Plan synthetic_plan(const PlanSpec& s) {
  Plan p;
  p.model = s.model;
  p.profile = synthetic_profile(ModelSpec::parse(s.model, "test"));
  p.cluster = s.cluster;
  p.schedule = s.schedule;
  p.chunks = s.chunks;
  p.dp = s.dp;
  p.batch_size = s.micro_batch * s.chunks * s.dp;
  p.checkpoint = s.checkpoint;
  p.stages = contiguous_stages(p.profile.num_layers(), s.stages);
  const int v = default_virtual_stages(s.schedule);
  if (s.lay_out && v > 1 && s.stages % v == 0) {
    const auto dev = virtual_stage_layout(stage_layout_of(s.schedule), s.stages / v, v, s.schedule);
    for (size_t i = 0; i < p.stages.size(); ++i) p.stages[i].device = dev[i];
  }
  return p;
}

inline sim::SimResult simulate(const PlanSpec& s, int iterations) {
  const PlanContext ctx(synthetic_plan(s), iterations);
  return sim::simulate_plan(ctx);
}

// "uniform:layers=K,fwd_ms=f,bwd_ms=b" plus extra options.
inline std::string uniform(int layers, double f, double b, const std::string& extra = "") {
  return fmt::format("uniform:layers={},fwd_ms={},bwd_ms={}{}", layers, f, b,
                     extra.empty() ? "" : "," + extra);
}

}  // namespace pipetwin::testing
