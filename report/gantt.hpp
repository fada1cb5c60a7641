// A Gantt chart of a timeline, as the report draws it: one row per device resource (stream),
// one bar per action, plus the shading of idle time (bubbles) and of communication that overlaps
// computation.
//
// Rows come from a pipetwin timeline (core/timeline.hpp: one row per device and stream that has
// events — compute, send, recv, collective) or from any Chrome trace (one row per pid/tid pair
// with complete "X" events). The shading follows the quantities of core/metrics.hpp, over the
// whole run shown rather than its steady window:
//   bubble   on each compute row, every interval in [0, end] where the device computes nothing;
//            PipeTransformer's Figure 6 and its appendix "Understanding Bubble in Pipeline":
//            "In both the forward and backward pass, each device idles for (K-1) time blocks",
//            so for GPipe the shaded share of the compute rows is (K-1)/(M+K-1)
//   overlap  on each communication row, the parts of its transfers during which the same device
//            computes (torchgpipe Section 3.2.3: copy streams let transfers hide behind compute)
// For a foreign Chrome trace, a thread whose name contains "compute" is a compute row and one
// whose name says send, recv, copy, comm, nccl or collective a communication row; when no thread
// says either, every row counts as a compute row of its own (idle gaps shaded, no overlap).
//
// Large runs are cut to fit `max_events`: whole optimizer steps from the first (pipetwin
// timelines) or the earliest events (foreign traces); `total_events` and the step counts tell
// the page what was left out.
//
// Thread-safety: plain value types and pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "core/timeline.hpp"

namespace pipetwin::report {

enum class RowRole { kCompute, kComm, kOther };

struct GanttRow {
  std::string label;   // "dev 0 compute"
  std::string device;  // the device's full name
  int group = 0;       // device index: shading pairs rows of one group
  RowRole role = RowRole::kOther;
};

struct GanttEvent {
  int row = 0;
  double start_s = 0, end_s = 0;
  std::string kind;      // "forward", "send", ... (the colour)
  int micro_batch = -1;  // drawn in the bar; -1 for none
  int step = -1;
  std::string label;  // "F s1 mb3 v0"
};

struct GanttInterval {
  int row = 0;
  double start_s = 0, end_s = 0;
};

struct Gantt {
  std::string source;    // "simulated", "measured", or "trace"
  std::string schedule;  // may be empty
  std::vector<GanttRow> rows;
  std::vector<GanttEvent> events;
  std::vector<GanttInterval> bubbles;    // idle compute time
  std::vector<GanttInterval> overlaps;   // communication hidden behind compute
  double end_s = 0;                      // last event end shown
  size_t total_events = 0;               // in the file, before the cut
  int shown_steps = 0, total_steps = 0;  // pipetwin timelines; 0 for foreign traces
  double idle_fraction = 0;              // bubble time / (compute rows x end_s)
  double overlap_fraction = 0;           // overlap time / communication time (0 when none)
};

Gantt gantt_from_timeline(const Timeline& t, size_t max_events);
// Any Chrome trace: {"traceEvents": [...]} or a bare array of events. InputError when it has no
// complete ("X") event.
Gantt gantt_from_chrome_trace(const JsonView& doc, size_t max_events);

// Fills bubbles, overlaps, idle_fraction and overlap_fraction from rows and events.
void shade(Gantt& g);

// The chart's data for the page's script: rows, events as compact arrays, shading. Times in
// microseconds; `scale_end_s` is the right edge of the time axis (shared by a side-by-side pair).
Json gantt_to_json(const Gantt& g, double scale_end_s);

}  // namespace pipetwin::report
