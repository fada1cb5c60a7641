// Checkpointer: a training run's checkpoints and its resume (exec/train/trainer.hpp
// "Checkpoints", exec/train/checkpoint.hpp for the files).
//
// A checkpoint holds everything the next step depends on: every hosted stage's weights, buffers
// and optimizer state, and the run's progress (TrainProgress, the sampler's position, the
// learning-rate schedule, the elastic policy's state, the plan in use). Every rank writes its own
// file; the ranks agree over the control plane that all files are durable before rank 0 writes
// the manifest, and agree again that the manifest is written, so a failure on any rank ends the
// run on every rank and leaves the previous checkpoint as the one named. Resuming validates the
// manifest and this rank's file against the plan and the options, and the ranks agree that every
// rank loaded. An elastic run may resume on fewer ranks than wrote the checkpoint: every rank
// reads every rank file and the policy re-plans for the devices left (fewer_ranks.cpp).
//
// Thread-safety: the trainer's thread, between windows, on every rank in step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/json_io.hpp"
#include "core/plan.hpp"
#include "exec/train/checkpoint.hpp"

namespace pipetwin::exec {

struct TrainRun;
class AutoCache;

class Checkpointer {
 public:
  Checkpointer(TrainRun& run, AutoCache& cache) : run_(run), cache_(cache) {}

  // Whether a checkpoint falls on the current step.
  bool due(bool epoch_end) const;
  // Writes one (every rank).
  void write();
  // Continues from the checkpoint folder's manifest; returns its step.
  int64_t resume();

 private:
  RankState capture_state();  // this rank's part of a checkpoint
  Manifest gather_manifest(const ManifestFile& mine) const;
  std::optional<Plan> resumed_plan(const Manifest& m, const RankState& st,
                                   const std::string& origin) const;
  void restore_stages(const RankState& st, const std::string& origin);
  void restore_rng(const RankState& st);
  Json progress_json() const;
  void restore_progress(const JsonView& v);
  // Resuming an elastic run on fewer ranks than wrote the checkpoint (fewer_ranks.cpp).
  RankState read_every_rank(const Manifest& m, StageState& all) const;
  void continue_on_fewer_ranks(const Manifest& m, StageState& all, const std::string& origin);

  TrainRun& run_;
  AutoCache& cache_;
};

}  // namespace pipetwin::exec
