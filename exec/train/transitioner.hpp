// Transitioner: the elastic parts of a training run (PipeTransformer; exec/train/trainer.hpp
// "Elastic training") — each window's per-layer gradient norms summed over the ranks for the
// freeze algorithm, the elastic policy's decisions at its freeze steps (the ranks agree on rank
// 0's frozen count), and transitions: after checking that every rank stands at the same position
// and builds the same plan, every layer's state moves to every rank
// (exec/train/state_exchange.hpp), a new session is built for the new plan and its stages restored
// by name, and AutoCache is set at the new boundary.
//
// Thread-safety: the trainer's thread, between windows, on every rank in step.
#pragma once

#include <cstdint>
#include <optional>

#include "core/plan.hpp"
#include "exec/train/elastic_policy.hpp"

namespace pipetwin::exec {

struct TrainRun;
class AutoCache;

class Transitioner {
 public:
  Transitioner(TrainRun& run, AutoCache& cache) : run_(run), cache_(cache) {}

  // Feeds the elastic policy the last `steps` steps' gradient norms.
  void collect_gradient_norms(int64_t steps);
  // The elastic policy's transition at this point, if any.
  std::optional<Transition> elastic_decision(bool epoch_end);
  // Checks `t` (the model kept, layers never thawing) and carries it out.
  void apply(const Transition& t);

 private:
  void carry_out(const Transition& t);
  void agree_on_position(const Plan& next) const;

  TrainRun& run_;
  AutoCache& cache_;
};

}  // namespace pipetwin::exec
