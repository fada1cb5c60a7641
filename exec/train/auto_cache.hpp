// AutoCache: the trainer's side of PipeTransformer's AutoCache (Section 3.4) — the machine's
// ActivationStore (exec/runtime/activation_store.hpp) opened at the start of a run on a finite
// data set (the machine's first process creates the files, the others open them once it has; a
// model whose F_frozen output per sample differs between boundaries gets none), handed to the
// workers through the training data, its boundary and use set at every transition (--autocache
// auto: the elastic policy's cost-model decision; on: whenever layers are frozen; off: never),
// its per-epoch counts taken for the log, and its files removed at the end after a barrier
// (exec/train/trainer.hpp "AutoCache").
//
// Thread-safety: the trainer's thread.
#pragma once

#include <memory>
#include <vector>

#include "exec/runtime/activation_store.hpp"
#include "exec/train/elastic_policy.hpp"

namespace pipetwin::exec {

struct TrainRun;

class AutoCache {
 public:
  explicit AutoCache(TrainRun& run) : run_(run) {}
  ~AutoCache();

  // Opens (or creates) the machine's store where the options and the data call for one.
  void open();
  // Uses the cache (or not) at the current plan's boundary.
  void set(bool on);
  // Whether the cache should be on after transition `t`.
  bool wanted(const Transition& t) const;
  // This epoch's counts (hits, stale, misses, shared reads, bytes read and written per tier),
  // zeros without a store.
  std::vector<double> take_counts();
  // Every rank done with the files, the first process removes them.
  void close();

  ActivationStore* store() const { return store_.get(); }

 private:
  std::vector<int64_t> slot_shape() const;

  TrainRun& run_;
  std::unique_ptr<ActivationStore> store_;
  bool owner_ = false;  // this process created the files and removes them
};

}  // namespace pipetwin::exec
