// Profile check: micro-batch sizes whose measured timings look disturbed, so a profiler can
// measure them again (`pipetwin profile`).
//
// A cloud VM's vCPUs change speed, and another tenant can stall one for a fraction of a second;
// the profiler takes the median of its repeats, but a stall longer than half of them moves the
// median. One such point wrecks the per-layer fit t(b) = a + c b the cost model draws through
// the sizes (seen here: bert:tiny's embedding backward measured 49 ms at b = 2 between 1.4 ms at
// b = 1 and 1.8 ms at b = 4, so the fit predicted 15 ms per micro-batch where the executor took
// 3.5 ms for the whole stage). Two physical facts give a test that needs no model of the layer:
//   - more samples never take less time: a smaller micro-batch that takes more than `factor`
//     times a larger one is disturbed;
//   - batching never makes a sample much dearer: a larger micro-batch whose time per sample is
//     more than `factor` times the smaller one's is disturbed.
// Both for forward and backward, on every layer, between neighbouring sizes, and only where the
// excess is above `min_excess_s` (microsecond layers jitter by whole factors).
//
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "core/profile.hpp"

namespace pipetwin {

struct DisturbedTiming {
  int micro_batch = 0;
  int layer = 0;
  const char* pass = "";  // "forward" or "backward"
  double seconds = 0;     // the suspicious measurement
  double expected_s = 0;  // what the neighbour says it should at most be
};

// Every disturbed measurement of `profile` (layers with timings at two sizes or more).
std::vector<DisturbedTiming> disturbed_timings(const Profile& profile, double factor = 2.0,
                                               double min_excess_s = 2e-4);
// The sizes to measure again: the distinct micro_batch values of disturbed_timings, ascending.
std::vector<int> disturbed_sizes(const Profile& profile, double factor = 2.0,
                                 double min_excess_s = 2e-4);

}  // namespace pipetwin
