// Grid: the what-if space of `pipetwin sweep` (docs/design.md "Simulator"), parsed from a spec such as
//
//   stages=1,2,4,8;chunks=auto,4:32:4;schedule=gpipe,1f1b;partitioner=uniform,balance-time
//   stages=4,8;schedule=1f1b,interleaved-1f1b,zbv;virtual_stages=1,2,4   (or v=1,2,4)
//
// Fields are separated by ';', values by ','; a numeric value may be a range start:stop:step
// (inclusive; start:stop means step 1 for integer fields). The grid is the Cartesian product of
// the fields, ordered like nested loops written in spec order: the first field varies slowest,
// the last fastest. Point i of the grid is therefore a pure function of the spec, which is what
// makes sweeps deterministic, resumable and shardable.
//
// `virtual_stages` (alias `v`) is the model chunks per device (sim/planner.hpp): v x K stages in
// the schedule's layout; auto (the default) is the schedule's own (2 for zbv and dualpipev, else
// 1). A point whose schedule cannot run its v or M (schedule_refusal) is a row with the reason.
//
// Every field is one entry of a knob table (grid.cpp): its name, value type, domain and how it
// sets a PointConfig; a new knob is one more entry there (and a PointConfig field). The freeze
// rate `alpha` is such an entry; what it changes in a point's evaluation is sweep.cpp's business.
// Values outside a knob's domain, unknown fields, repeated fields or values, malformed or empty
// ranges and empty grids are InputErrors of the form
//   --grid: chunks: bad range "32:4:4" (stop 4 is below start 32)
//
// Choices the issue leaves open, made here: values are kept in the order written (a range
// expands in ascending order); repeated values are an error (they would only duplicate rows);
// a grid of more than 100 million points is refused (a typo such as 1:1000000 more likely than a
// wish); values of a field cannot contain ',' or ';' (so a synthetic model spec with options is
// a --model, not a grid value).
//
// Thread-safety: a Grid is immutable after parse(); concurrent reads are safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/schedule/schedule.hpp"

namespace pipetwin::sim {

// Everything one sweep point asks for: the fixed inputs of the sweep (CLI flags) overridden by
// the grid's values for the point. Planning turns it into a Plan.
struct PointConfig {
  std::string model;
  std::string cluster = "local-cpu-2";
  int stages = 2;  // K
  int chunks = 0;  // M; 0: auto (the planner's fastest fitting M)
  std::string schedule = "gpipe";
  int virtual_stages = 0;  // model chunks per device; 0: auto (the schedule's default)
  std::string partitioner = "uniform";
  int batch = 8;        // global batch size (samples per optimizer step)
  int micro_batch = 0;  // samples per micro-batch; > 0: batch = micro_batch x chunks x dp
  int dp = 1;           // data-parallel width
  Checkpoint checkpoint = Checkpoint::kNone;
  int frozen = 0;  // leading frozen layers
  // Training precision and optimizer (core/precision.hpp); empty: what the profile has.
  std::string dtype, optimizer;
  // PipeTransformer's freeze rate (Equation 1). Set (>= 0), the point is also a whole elastic
  // training run (sim/elastic_sim.hpp); 0 there means no freezing: the Pipe + DDP baseline.
  double alpha = -1;
  // What-ifs on the cluster's topology (core/topology.hpp): NICs per node (0: the cluster's) and
  // peer-to-peer copies ("yes", "no"; empty: the cluster's). A cluster without a topology gets
  // the default one (one NIC per node, no switch level, peer-to-peer) with the field set.
  int nics_per_node = 0;
  std::string p2p;
  // Tensor parallelism and the distributed optimizer (core/plan.hpp, core/tensor_parallel.hpp).
  int tp = 1;
  bool sequence_parallel = false;
  bool selective_recompute = false;
  bool distributed_optimizer = false;

  // The global batch this point runs: micro_batch x chunks x dp when micro_batch is set.
  int resolved_batch() const { return micro_batch > 0 ? micro_batch * chunks * dp : batch; }
};

enum class KnobType { kInt, kReal, kWord };

// One field of the grid. `apply` sets the field of a PointConfig from a value.
struct Knob {
  const char* name;
  KnobType type;
  const char* help;
  double min = 0;  // numeric domain, inclusive
  double max = 0;
  bool allow_auto = false;                        // the word "auto" is a value
  std::vector<std::string> (*words)() = nullptr;  // known words (kWord); null: any word
  void (*apply)(PointConfig& config, const std::string& text, double number) = nullptr;
  // The value of this field in `config`, as the CSV writes it.
  std::string (*show)(const PointConfig& config) = nullptr;
  // Whether a sweep whose fixed point is `config` lists the field when the grid does not vary it;
  // null: always (the fields added later appear only when set, so older sweeps keep their CSV).
  bool (*listed)(const PointConfig& config) = nullptr;
};

// The knob table, in the order the CSV lists fixed fields.
const std::vector<Knob>& knobs();
// By name or alias ("v": virtual_stages).
const Knob* find_knob(std::string_view name);
std::string knob_names();  // "batch, checkpoint, ..." for error messages

struct Axis {
  const Knob* knob = nullptr;
  std::vector<std::string> values;  // normalised text ("0.3", "auto", "gpipe")
  std::vector<double> numbers;      // numeric value of each (0 for words and auto)
};

class Grid {
 public:
  // Parses a spec; throws InputError naming the field and the bad value.
  static Grid parse(std::string_view spec);

  const std::vector<Axis>& axes() const { return axes_; }
  const Axis* axis(std::string_view field) const;
  int64_t size() const { return size_; }
  // Index of each axis's value at grid point `index` (the last axis varies fastest).
  std::vector<int> coordinates(int64_t index) const;
  // Sets the fields of the grid's axes in `config` to their values at point `index`.
  void apply(int64_t index, PointConfig& config) const;
  // The spec in normalised form (ranges expanded).
  std::string to_string() const;

 private:
  std::vector<Axis> axes_;
  int64_t size_ = 0;
};

// Expands one field's value list ("1,2,4:16:4,auto") for `knob`; `field` names it in errors.
Axis parse_axis(const Knob& knob, std::string_view values);

}  // namespace pipetwin::sim
