// StageMemory: what one pipeline stage holds at its peak under the schedule being planned, in a
// form a partitioner can price for every candidate stage (docs/partition-memory.md).
//
// core/memory.hpp walks a compiled schedule with the liveness rule of core/schedule/liveness.hpp
// and adds bytes: static + the inputs and saved activations of the micro-batches in flight + the
// extra weight versions alive + the tensors received ahead of their use + the running pass's
// working memory. For a stage alone on its device the counts in that sum — how many inputs, graphs,
// stashed versions and received tensors are alive, and which pass runs — depend on the schedule,
// M, the checkpoint mode, the stage's position k and the pipeline length K, never on the stage's
// layers; only the byte factors do. So a schedule is walked once per pipeline length, by
// memory.hpp's walk itself counting instead of adding bytes, and every point the walk observes is
// kept as a vector of counts (the Pareto-maximal ones: all factors are non-negative, so a
// dominated point can never be the peak). A candidate stage's peak is then
//
//   static + max over kept points of (inputs * input + graphs * saved + stashed * parameters
//            + received activations * in-edge bytes + received gradients * out-edge bytes
//            + the running pass's working bytes),
//
// which equals walk_memory()'s peak for the device of a chain pipeline, one stage per device
// (tests/partition_memory_test.cpp checks that for every schedule and checkpoint mode). Where a
// stage receives from several stages (skip connections), its inputs are counted as one tensor from
// its neighbour (the walk holds each from its own arrival, possibly earlier); where a device hosts
// several stages (mixed-pipe, metis), each stage is priced at the worst position of a chain of as
// many stages as devices. Both are estimates; the planner checks the finished plan with the walk.
//
// Virtual stages (Options::virtual_stages = v > 1, core/schedule/virtual_stages.hpp): S stages on
// S / v devices, placed as the schedule's layout (interleaved, or the V of zbv and dualpipev). The
// walk is per device, as memory.hpp's; each observation point keeps the counts of every stage the
// device hosts. held(k, S) is stage k's own share of those points (its counts, its pass): a bound
// on what stage k adds to its device, so the device needs at most the sum of its stages' held()
// peaks. device_bytes() prices the device's stages together at each point: walk_memory()'s device
// peak exactly (tests/plan_virtual_stages_test.cpp).
//
// The walk is memory.hpp's own (core/memory_walk.hpp, templated over what it counts): here it
// counts, there it adds bytes; the equality test checks that the prices agree.
//
// Thread-safety: every const member may be called concurrently. The walk of a pipeline length is
// made once, under a mutex, on first use, and then published, immutable, in a list whose readers
// take no lock (the partitioners price stages through held() millions of times).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/cost_model.hpp"
#include "core/memory_walk.hpp"
#include "core/schedule/schedule.hpp"

namespace pipetwin {

// The byte factors of one stage, per micro-batch (StageCost's fields of the same names).
struct StageBytes {
  double static_bytes = 0;  // parameters, gradients, optimizer state, frozen layers
  double input = 0;         // stage input kept for backward (received, or the model input)
  double saved = 0;         // activations saved for backward
  double param = 0;         // one weight version (what a stash copies)
  double forward_ws = 0;    // StageCost::forward_bytes
  double forward_nograd_ws = 0;
  double backward_ws = 0;
  double received_in = 0;   // an activation tensor received from the previous stage
  double received_out = 0;  // a gradient tensor received from the next stage
};

// What one observation point of the walk holds.
struct HeldCounts {
  using Pass = WalkPass;
  using enum WalkPass;
  int32_t inputs = 0, graphs = 0, stashed = 0, received_in = 0, received_out = 0;
  Pass pass = kIdle;  // the pass running (its working memory counts)
  // At least o's bytes for any factors (inline: the walk asks it for every point it keeps).
  bool covers(const HeldCounts& o) const {
    return (pass == o.pass || o.pass == kIdle) && inputs >= o.inputs && graphs >= o.graphs &&
           stashed >= o.stashed && received_in >= o.received_in && received_out >= o.received_out;
  }
  // Without static bytes; the running pass's working memory is `working`.
  double bytes(const StageBytes& b, double working) const {
    return inputs * b.input + graphs * b.saved + stashed * b.param + received_in * b.received_in +
           received_out * b.received_out + working;
  }
  double bytes(const StageBytes& b) const;  // without static bytes
};

// A stage's byte factors with each pass's working memory looked up (by WalkPass) and whether
// every factor is >= 0 (not NaN), which HeldSet's bounds need: priced once, asked at many
// positions.
struct PricedBytes {
  explicit PricedBytes(const StageBytes& b = {});
  StageBytes bytes;
  std::array<double, 4> working{};
  bool nonnegative = true;
};

// Pareto-maximal observation points.
class HeldSet {
 public:
  // Keeps c unless a kept point covers it; drops the points c covers.
  void add(const HeldCounts& c);
  void merge(const HeldSet& other);
  bool empty() const { return points_.empty(); }
  const std::vector<HeldCounts>& points() const { return points_; }
  // static + the largest point; +inf for an empty set (no position allowed).
  double bytes(const StageBytes& b) const;
  // !(bytes(b) > limit), answered without pricing every point where a bound decides it: every
  // count at its most over the points (with the largest working memory of their passes) bounds the
  // largest point from above, the point with the most graphs from below. Both take bytes()'s
  // steps with larger (or one point's) counts, so the rounding keeps them bounds.
  bool within(const StageBytes& b, double limit) const { return within(PricedBytes(b), limit); }
  bool within(const PricedBytes& b, double limit) const;
  // Those bounds on bytes(b): upper >= bytes(b) >= lower; NaN (no bound) for an empty set or a
  // negative factor.
  double upper(const PricedBytes& b) const;
  double lower(const PricedBytes& b) const;
  // The point with the most graphs given (a lower bound's point).
  const HeldCounts& fullest() const { return fullest_; }
  int most_inputs() const;

 private:
  std::vector<HeldCounts> points_;
  // Every count's most over the points given (a point dropped is covered by one kept, so this is
  // the kept points' most), the passes seen (bit per WalkPass) and the point with the most graphs
  // given (kept, or covered by a kept one).
  HeldCounts most_;
  uint8_t passes_ = 0;
  HeldCounts fullest_;
  // The last point add() was given. Every point given stays covered by a kept one (a kept point
  // leaves only for one that covers it), so a point the last one covers is skipped at once: the
  // walk observes mostly what it observed a moment before.
  HeldCounts last_;
  bool has_last_ = false;
};

// What one device hosting several stages holds at an observation point: the counts of each of its
// stages (ascending stage order), the running pass on at most one of them.
using DeviceCounts = std::vector<HeldCounts>;

// Pareto-maximal observation points of one device hosting several stages.
class DeviceHeldSet {
 public:
  void add(const DeviceCounts& c);
  const std::vector<DeviceCounts>& points() const { return points_; }
  // The static bytes of every stage + the largest point, `stages` in the device's stage order;
  // +inf for an empty set.
  double bytes(const std::vector<StageBytes>& stages) const;

 private:
  std::vector<DeviceCounts> points_;
  DeviceCounts last_;  // the last point add() was given, as HeldSet's
};

class StageMemory {
 public:
  struct Options {
    std::string schedule = "gpipe";
    int micro_batches = 1;
    Checkpoint checkpoint = Checkpoint::kNone;
    int iterations = 0;  // 0: schedule_default_iterations(schedule, K), as PlanContext
    // Stages per device, placed as the schedule's layout (virtual_stage_layout); 1: a chain, one
    // stage per device.
    int virtual_stages = 1;
  };

  explicit StageMemory(Options options);

  const Options& options() const { return options_; }
  // Stage k of K stages: a chain, one per device; with virtual stages, stage k's own share of its
  // device's points (see above).
  const HeldSet& held(int k, int K) const;
  double bytes(const StageBytes& b, int k, int K) const { return held(k, K).bytes(b); }
  // Every position of a chain of K stages: a stage whose position is not known.
  const HeldSet& any_position(int K) const;
  // A lower bound on bytes(b, k, K) for every k: the fewest of each count among the stages'
  // fullest points, idle (HeldSet::lower's point); NaN where HeldSet::lower has none.
  double lower_everywhere(const PricedBytes& b, int K) const;
  // That bound's point for K stages; null where it has none (a stage without points).
  const HeldCounts* floor(int K) const;
  // The most micro-batches whose inputs one stage of a K-stage chain keeps at once.
  int most_in_flight(int K) const;
  // Per stage k of K, the most graphs (micro-batches of saved activations) it holds at once: the
  // most `graphs` among held(k, K)'s points. Read off the devices' compute order alone (a Forward
  // that no Recompute follows and a Recompute keep one, a Backward or BackwardWeight frees one, as
  // the walk counts them), without the transfers, compiling and liveness a walk needs; made once
  // per K (tests/partition_memory_bounds_test.cpp checks it against the walk).
  const std::vector<int>& most_graphs(int K) const;
  // The stages device `device` hosts among K stages, ascending.
  const std::vector<int>& device_stages(int device, int K) const;
  // The peak of device `device` among K stages, its stages priced together; `stages` holds the
  // byte factors of device_stages(device, K), in that order.
  double device_bytes(const std::vector<StageBytes>& stages, int device, int K) const;

 private:
  struct Walked {
    int length = 0;                               // K
    std::vector<HeldSet> stages;                  // per stage
    HeldSet any;                                  // every stage's points
    HeldCounts floor;                             // the fewest counts of the stages' fullest
    std::vector<std::vector<int>> device_stages;  // per device, ascending
    std::vector<DeviceHeldSet> devices;           // per device, when virtual_stages > 1
    const Walked* next = nullptr;                 // the walk published before this one
  };
  const Walked& walk(int K) const;
  Walked make_walk(int K) const;
  PipelineShape shape_of(int K) const;  // the chain of K stages the walk schedules
  std::vector<int> count_graphs(int K) const;

  Options options_;
  // The walks made so far, one per pipeline length: `walked_` is the last published, each links
  // to the one before. A walk is complete and never changes once published (release store,
  // acquire load), so readers follow the list without a lock; `mutex_` serialises the making and
  // guards `owned_`, which owns the walks until the StageMemory dies.
  mutable std::atomic<const Walked*> walked_{nullptr};
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Walked>> owned_;
  // most_graphs() per K, under its own mutex (a walk being made holds `mutex_` long).
  mutable std::mutex graphs_mutex_;
  mutable std::map<int, std::vector<int>> graphs_;
};

// The factors of a stage from its cost and the bytes it receives per micro-batch.
StageBytes stage_bytes(const StageCost& c, double received_in, double received_out);

}  // namespace pipetwin
