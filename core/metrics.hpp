// Metrics of a timeline: the numbers users compare between prediction and measurement.
//
// Computed from the timeline alone (events carry their weight versions), so the simulator's and
// the executor's timelines are summarised by the same code:
//   iteration_time_s   mean time between the ends of consecutive optimizer steps over a steady
//                      window: every step for synchronous schedules; for asynchronous ones the
//                      first and last K steps (pipeline fill and drain) are left out. With one
//                      step, the whole run.
//   iteration_time_median_s  the median of those step times: what a measurement should be
//                      judged by, as one stalled step (a page-fault storm, the host taking the
//                      vCPU away) moves the mean but not the median; equal to the mean in a
//                      simulated steady state of a synchronous schedule
//   throughput         samples per step / iteration_time_s
//   bubble_fraction    1 - compute-busy time / (devices x window length), over the same window
//   utilization        per device, compute-busy time / window length
//   comm_overlap       share of communication time (send, recv, all-reduce) during which the
//                      same device computes
//   staleness          per stage, how many optimizer steps the stage took between the forward of
//                      a micro-batch and the update its gradient enters (the loss's weight delay);
//                      gradient staleness likewise for the weights the backward read
//   peak memory        per device, from the timeline's memory data
// Metrics JSON ("pipetwin.metrics" v1) uses the key names above.
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/json_io.hpp"
#include "core/timeline.hpp"

namespace pipetwin {

struct DeviceMetrics {
  std::string name;
  double busy_s = 0;
  double utilization = 0;
  double comm_s = 0;
  double peak_memory_bytes = 0;
};

struct StageStaleness {
  int max = 0;
  double mean = 0;
  int gradient_max = 0;     // delay of the weights the backward read
  int weight_versions = 1;  // distinct versions read by micro-batches in flight at once (max)
};

struct Metrics {
  std::string source;
  std::string schedule;
  int num_stages = 0;
  int steps = 0;
  bool steady_state = false;  // the window excludes fill and drain
  double samples_per_step = 0;
  double makespan_s = 0;
  double window_start_s = 0;
  double window_end_s = 0;
  double iteration_time_s = 0;
  double iteration_time_median_s = 0;
  double throughput_samples_per_s = 0;
  double bubble_fraction = 0;
  double comm_time_s = 0;
  double comm_overlap_fraction = 0;
  // The tensor-parallel groups' collectives inside the passes (timeline events on the tensor
  // stream, core/schedule/action.hpp), summed over devices; not in comm_time_s: they run inside
  // the compute passes, which include them.
  double tensor_parallel_s = 0;
  std::vector<double> step_end_s;  // when each optimizer step completed (all stages)
  std::vector<DeviceMetrics> devices;
  std::vector<StageStaleness> staleness;
  std::map<int, long> staleness_histogram;        // delay -> number of backward passes
  std::map<std::string, double> compute_s_by_op;  // total time per action kind
};

// The median of `v` (the mean of the middle two for an even count); 0 for none.
double median(std::vector<double> v);

// `async` selects the steady window (see above); `num_stages` is K.
Metrics compute_metrics(const Timeline& t, int num_stages, bool async, double samples_per_step);

Json metrics_to_json(const Metrics& m);
Metrics metrics_from_json(const JsonView& doc);
void save_metrics(const Metrics& m, const std::string& path);
Metrics load_metrics(const std::string& path);

}  // namespace pipetwin
