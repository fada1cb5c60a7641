// Timeline: what happened (or is predicted to happen) when a schedule ran.
//
// One event per action with its device, stream, start and end, and the action's micro-batch,
// stage, step and weight version. The simulator produces a predicted timeline, the executor a
// measured one, in this same type, so metrics and comparisons treat them alike. Written as Chrome
// trace event JSON (opens in Perfetto and chrome://tracing): one process per device, one thread
// per stream (compute, send, recv, collective), one complete ("X") event per action with its
// fields in `args`, and a memory counter track per device.
//
// Thread-safety: plain value types.
#pragma once

#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "core/schedule/action.hpp"

namespace pipetwin {

struct TimelineEvent {
  int32_t device = 0;
  Action action;
  double start_s = 0;
  double end_s = 0;
  double duration() const { return end_s - start_s; }
};

struct MemorySample {
  double time_s = 0;
  double bytes = 0;
};

struct Timeline {
  std::string source = "simulated";  // "simulated" or "measured"
  std::string schedule;
  std::vector<std::string> device_names;        // one per schedule device
  std::vector<TimelineEvent> events;            // any order
  std::vector<std::vector<MemorySample>> memory;  // per device, optional
  std::vector<double> peak_memory_bytes;         // per device, optional

  int num_devices() const { return static_cast<int>(device_names.size()); }
};

Json timeline_to_chrome_trace(const Timeline& t);
Timeline timeline_from_chrome_trace(const JsonView& doc);
void save_timeline(const Timeline& t, const std::string& path);
Timeline load_timeline(const std::string& path);

}  // namespace pipetwin
