// Checkpointer: resuming an elastic run on fewer ranks than wrote its checkpoint — "continue with
// fewer replicas" after a rank is lost (`pipetwin train --on-rank-loss continue`,
// exec/train/trainer.hpp "Fewer ranks").
//
// The lost rank's file is in the checkpoint (every rank wrote one before the manifest named
// them), so nothing is missing: every surviving rank reads every rank file, takes each layer's
// state from replica 0's copy (replicas hold equal copies after the all-reduce), and checks that
// every stage agrees on the optimizer's step count — the same single StageState a transition
// gathers over the network (exec/train/state_exchange.hpp). The elastic policy then re-plans for
// the devices left (ElasticPolicy::fewer_devices: K the largest divisor of the devices not above K,
// dp = devices / K, the per-replica batch kept as AutoDP keeps it) and the new plan's stages are
// restored by layer name. The sampler's cursor is per machine, not per replica, so the epoch
// goes on with every sample still seen once.
#include <cstdio>

#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/runtime/session.hpp"
#include "exec/train/checkpointer.hpp"
#include "exec/train/elastic_policy.hpp"
#include "exec/train/train_run.hpp"

namespace pipetwin::exec {

RankState Checkpointer::read_every_rank(const Manifest& m, StageState& all) const {
  const std::string& dir = run_.options.checkpoint_dir;
  all = StageState{};
  all.stage = -1;
  bool steps_known = false;
  RankState mine;
  for (int r = 0; r < m.world; ++r) {
    RankState st = read_rank_file(dir, m, r);
    const std::string origin = dir + "/" + m.files[static_cast<size_t>(r)].file;
    for (auto& x : st.stages) {
      if (x.replica != 0) continue;
      if (steps_known && x.optimizer_steps != all.optimizer_steps) {
        throw InputError(fmt::format(
            "{}: stages: stage {} took {} optimizer steps, but an earlier stage took {}", origin,
            x.stage, x.optimizer_steps, all.optimizer_steps));
      }
      steps_known = true;
      all.optimizer_steps = x.optimizer_steps;
      all.layers.insert(all.layers.end(), x.layers.begin(), x.layers.end());
      for (auto& t : x.tensors) all.tensors.push_back(std::move(t));
    }
    if (r == run_.session->rank()) {
      st.stages.clear();  // its tensors are in `all`
      mine = std::move(st);
    }
  }
  return mine;
}

void Checkpointer::continue_on_fewer_ranks(const Manifest& m, StageState& all,
                                           const std::string& origin) {
  // The devices per rank stay as they were (one per rank as the launcher starts them).
  const int before = run_.elastic_policy->devices();
  const int per_rank = before % m.world == 0 ? before / m.world : 1;
  const int devices = per_rank * run_.session->world();
  const int K = run_.plan.num_stages(), dp = run_.plan.dp;
  const Transition t = run_.elastic_policy->fewer_devices(devices);
  run_.replace_session(t.plan);
  for (const auto& [d, stages] : run_.session->hosted()) {
    for (const auto& [s, rt] : stages) {
      all.stage = s;
      restore_stage(all, *rt, run_.session->model(), origin);
    }
  }
  if (run_.options.verbose && run_.session->rank() == 0) {
    std::printf("continuing on %d of %d ranks: %d devices, K %d -> %d, dp %d -> %d, M %d\n",
                run_.session->world(), m.world, devices, K, t.plan.num_stages(), dp, t.plan.dp,
                t.plan.chunks);
  }
}

}  // namespace pipetwin::exec
