// Freeze trace: when each transformer layer froze during a training run (docs/design.md
// "Elastic training"): the executor writes one (when each layer froze); the simulator replays
// it, or the alpha bound alone.
//
// A trace is a list of events "from this point on, n layers are frozen". A point is an epoch
// and the number of that epoch's samples already trained (0: the epoch's start), because
// samples, unlike optimizer steps, do not depend on the data-parallel width: a trace recorded
// on one cluster replays on another. The global optimizer step is kept too, for reading.
//
// File format "pipetwin.freeze_trace" version 1 (JSON):
//   {"format": "pipetwin.freeze_trace", "version": 1, "model": "vit:base", "layers": 12,
//    "alpha": 0.333, "source": "executor",
//    "events": [{"epoch": 1, "sample": 0, "step": 3203, "frozen_layers": 4}, ...]}
// `alpha`, `source`, `sample` and `step` are optional. Events must be in time order, at
// distinct points, with frozen_layers never decreasing (layers do not thaw) and within
// 0..layers; every violation is an InputError naming the file and the field.
//
// Thread-safety: plain value types.
#pragma once

#include <string>
#include <vector>

#include "core/json_io.hpp"

namespace pipetwin::elastic {

struct FreezeEvent {
  int epoch = 0;
  long sample = 0;  // samples of `epoch` trained before the change
  long step = -1;   // global optimizer steps before the change; -1: not recorded
  int frozen_layers = 0;
};

struct FreezeTrace {
  std::string model;
  int layers = 0;                   // L, transformer layers
  double alpha = 0;                 // 0: not recorded
  std::string source = "executor";  // "executor", "simulator" or "alpha-bound"
  std::vector<FreezeEvent> events;

  // Frozen layers in effect when `sample` samples of `epoch` have been trained.
  int frozen_at(int epoch, long sample) const;
  // Checks the rules above; throws InputError prefixed by `origin`.
  void validate(const std::string& origin) const;
};

// The alpha bound alone (Equation 3) frozen at the start of every `interval`-th epoch, over
// `epochs` epochs: an event at each epoch where the count changes.
FreezeTrace bound_trace(int layers, double alpha, int epochs, int interval);
// The alpha bound with freeze step T (T = 1 .. steps - 1) after the fraction T / steps of the
// whole run (`epochs` epochs of `samples` samples): a cadence that does not depend on the epoch
// count. With steps = epochs it is bound_trace(..., 1). Throws InputError on bad arguments.
FreezeTrace bound_trace_over_run(int layers, double alpha, int epochs, long samples, int steps);

FreezeTrace freeze_trace_from_json(const JsonView& doc);
Json freeze_trace_to_json(const FreezeTrace& trace);
FreezeTrace load_freeze_trace(const std::string& path);
void save_freeze_trace(const FreezeTrace& trace, const std::string& path);

}  // namespace pipetwin::elastic
