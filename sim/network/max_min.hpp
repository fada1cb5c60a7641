// Max-min fair rates: how concurrent flows share links (a flow-level network model).
//
// Links are resources with a capacity (bytes/s); a flow crosses a set of links (its path). An
// allocation is max-min fair when no flow's rate can grow without shrinking the rate of a flow
// whose rate is no larger (Bertsekas & Gallager, Data Networks, 2nd ed., 1992, Section 6.5.2).
// Progressive filling computes it: every unfrozen flow's rate grows at the same pace until some
// link is full; the flows crossing that link (their bottleneck) are frozen at their rate; the
// rest go on growing until every flow is frozen. A flow's rate is thus set by its bottleneck
// link, the full link on its path where its rate is the largest of the rates crossing it.
//
// Thread-safety: stateless functions over caller-owned data; MaxMinSolver keeps scratch space
// and is not thread-safe (one per thread).
#pragma once

#include <cstdint>
#include <vector>

namespace pipetwin::sim::network {

// The flows to share out: flow f crosses links path_links[path_begin[f] .. path_begin[f + 1]).
struct FlowPaths {
  std::vector<int32_t> path_begin{0};
  std::vector<int32_t> path_links;
  int num_flows() const { return static_cast<int>(path_begin.size()) - 1; }
  void add(const std::vector<int32_t>& links);
};

class MaxMinSolver {
 public:
  // Max-min fair rates of `flows` over links of `capacity` (bytes/s, > 0) by progressive
  // filling, into `rate` (resized to the flow count). A flow with an empty path is not limited
  // by any link: its rate is infinity. `active` (optional, one flag per flow) leaves out the
  // flows whose flag is 0: their rate is 0.
  void solve(const std::vector<double>& capacity, const FlowPaths& flows, std::vector<double>& rate,
             const std::vector<uint8_t>* active = nullptr);

 private:
  std::vector<double> residual_;
  std::vector<int32_t> crossing_;  // per link: unfrozen flows crossing it
  std::vector<uint8_t> frozen_, full_;
};

// One-shot convenience over MaxMinSolver.
std::vector<double> max_min_rates(const std::vector<double>& capacity, const FlowPaths& flows);

}  // namespace pipetwin::sim::network
