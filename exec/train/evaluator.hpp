// Evaluator: the held-out split through the current plan's replica 0 — its stages in data
// order, the tensors that cross ranks over the session's transport, one bundle per stage edge
// (exec/runtime/stage_io.hpp), dropout off — summed into the epoch's eval loss and accuracy
// (exec/train/trainer.hpp).
//
// Thread-safety: the trainer's thread, between windows, on every rank in step.
#pragma once

namespace pipetwin::exec {

struct TrainRun;

class Evaluator {
 public:
  explicit Evaluator(TrainRun& run) : run_(run) {}

  // Adds this rank's loss sum, correct predictions, predictions and samples to `sums`.
  void evaluate(double sums[4]);

 private:
  TrainRun& run_;
};

}  // namespace pipetwin::exec
