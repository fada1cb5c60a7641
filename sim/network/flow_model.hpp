// FlowModel: transfers as flows over shared links, in time (a flow-level network model).
//
// A link is a resource with a bandwidth (bytes/s) and a latency (s); a flow moves a number of
// bytes over a path of links. While flows are in progress they share the links max-min fairly
// (max_min.hpp: progressive filling, Bertsekas & Gallager, Data Networks, 6.5): each runs at the
// rate its bottleneck link leaves it. Rates are recomputed whenever a flow starts or ends, so a
// flow that ends early hands its share to the ones still running. A flow's bytes are sent when
// its remaining bytes reach zero; they arrive the sum of its path's latencies later
// (completion_times), the propagation that does not occupy the links.
//
// Max-min fair rates decompose over the connected components of the flows-and-links graph (flows
// that share no link, directly or through other flows, do not affect each other's rates), so a
// flow that starts or ends re-solves only its component: the flows reachable from its links.
// Pipeline transfers between different stage pairs cross different links and stay apart; what
// crosses a node's NIC is one component. A flow's progress is kept lazily (its bytes left at the
// time its rate was last set), so an event does not walk the flows it leaves alone. On
// bench/sim_bench's topology case (GPipe K = 8, M = 32, dp = 4, one NIC per node) this took the
// engine from 7.4 to 8.1 M actions/s (11.1 M with the event queue's precomputed keys,
// sim/event_queue.hpp).
//
// Thread-safety: a FlowModel is not thread-safe; use one per simulation.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/network/max_min.hpp"

namespace pipetwin::sim::network {

struct Link {
  double bandwidth = 0;  // bytes/s
  double latency = 0;    // s
};

class FlowModel {
 public:
  FlowModel() = default;
  explicit FlowModel(std::vector<Link> links);

  const std::vector<Link>& links() const { return links_; }
  // Drops every flow and goes back to time 0 (the links stay).
  void reset();
  // Starts a flow of `bytes` over links path[0 .. len) at `now` (not before the last time given)
  // and recomputes the rates. Returns the flow's id (0, 1, ... in start order since reset).
  int32_t start(double bytes, const int32_t* path, int32_t len, double now);
  int32_t start(double bytes, const std::vector<int32_t>& path, double now) {
    return start(bytes, path.data(), static_cast<int32_t>(path.size()), now);
  }
  // The same for several flows that start together: add each, then settle() once (the rates are
  // stale in between).
  int32_t add(double bytes, const int32_t* path, int32_t len, double now);
  void settle() { reallocate(); }
  // When the first flow in progress has sent its bytes, at today's rates (infinity: none).
  double next_finish() const;
  // Advances to `now`, ends the flows whose bytes are sent by then (their ids appended to
  // `done`, in id order) and recomputes the rates if any ended.
  void finish_due(double now, std::vector<int32_t>& done);
  // The current rate of a flow in progress (bytes/s); 0 once it has ended.
  double rate(int32_t flow) const { return rate_[static_cast<size_t>(flow)]; }
  int active() const { return static_cast<int>(active_.size()); }
  // Sum of the latencies of a path's links.
  double latency(const int32_t* path, int32_t len) const;

 private:
  void advance(double now);
  void reallocate();
  // The flows whose rates a change can move: those reachable from the new flows and from the
  // links of the ended ones, into component_.
  void collect_component();
  // A flow's bytes left at now_ (its bytes left when its rate was set, less what it sent since).
  double left_now(size_t flow) const {
    return std::max(0.0, left_[flow] - rate_[flow] * (now_ - since_[flow]));
  }

  std::vector<Link> links_;
  std::vector<double> capacity_;
  double now_ = 0;
  // Per flow since reset: its path (CSR), bytes left at `since_`, rate, the time it will have
  // sent them.
  std::vector<int32_t> path_begin_{0}, path_links_;
  std::vector<double> left_, since_, rate_, finish_;
  std::vector<int32_t> active_;                   // flows in progress, in id order
  std::vector<std::vector<int32_t>> link_flows_;  // per link, the flows in progress crossing it
  // What changed since the rates were last set: flows added, links that flows left.
  std::vector<int32_t> new_flows_, freed_links_;
  std::vector<int32_t> component_;
  std::vector<uint32_t> flow_mark_, link_mark_;
  uint32_t mark_ = 0;
  MaxMinSolver solver_;
  FlowPaths scratch_paths_;
  std::vector<double> scratch_rates_, scratch_capacity_;
  std::vector<int32_t> local_of_, used_;  // per link its index among the links in use, or -1
};

// What FlowModel computes for flows known in advance: flow f starts at start_s[f], moves
// bytes[f] over paths[f]; the result is when each one's last byte arrives (sent + path latency).
struct FlowSpec {
  double start_s = 0;
  double bytes = 0;
  std::vector<int32_t> path;
};
std::vector<double> completion_times(const std::vector<Link>& links,
                                     const std::vector<FlowSpec>& flows);

}  // namespace pipetwin::sim::network
