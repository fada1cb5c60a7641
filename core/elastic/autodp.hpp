// AutoDP: more pipeline replicas as pipelines get shorter (PipeTransformer Section 3.3,
// Figure 7).
//
// The cluster has N nodes of I devices; a pipeline of length K stays inside one node ("We assume
// all GPU devices in a pipeline belong to the same machine"), so a node holds I / K pipelines and
// the data-parallel width is N * (I / K). Processes are numbered as in Figure 7: process
// p = node * I + j (j = 0..I-1) drives the pipeline on devices [j K, (j+1) K) of its node and is
// active when j < I / K. "In T0, only process 0 and 8 are active. During the transition to T1,
// process 0 activates processes 1 and 9 (newly added pipeline replicas) and synchronizes
// necessary information ... using the message group. The four active processes then form a new
// training group." The message group is every process; the training group the active ones.
//
// What a newly active process must receive ("newly activated processes must be consistent with
// existing pipelines in the training progress (e.g., epoch number and learning rate), weights
// and optimizer states, the boundary of frozen layers, and pipeline GPU range") is listed with
// sizes, so the cost model can time it. Tensors travel over the training group, the small
// progress records over the message group. Each node's process j = 0 is active in every layout
// and serves the new processes of its node one after another over the intra-node link (nodes in
// parallel); the paper does not say who sends, and that is the cheapest sender.
//
// Thread-safety: pure functions and value types.
#pragma once

#include <string>
#include <vector>

#include "core/cost_model.hpp"
#include "core/profile.hpp"

namespace pipetwin::elastic {

struct DataParallelLayout {
  int nodes = 1;
  int devices_per_node = 1;  // I
  int K = 1;
  int replicas_per_node() const { return devices_per_node / K; }
  int replicas() const { return nodes * replicas_per_node(); }  // DP width
  int processes() const { return nodes * devices_per_node; }    // message group size
  std::vector<int> training_group() const;                      // active processes
  bool active(int process) const { return process % devices_per_node < replicas_per_node(); }
  // Cluster device of stage s of process p's pipeline.
  int device(int process, int stage) const;
};

// Throws InputError unless 1 <= K <= I (a pipeline fits a node).
DataParallelLayout dp_layout(int nodes, int devices_per_node, int K);

// Processes active in `after` but not in `before`, in order.
std::vector<int> newly_active(const DataParallelLayout& before, const DataParallelLayout& after);

struct StateItem {
  std::string name;
  double bytes = 0;
  bool tensor = true;  // training group (tensor) or message group (control record)
};

// What one newly active process receives, with `frozen_profile_layers` frozen.
std::vector<StateItem> state_transfer(const Profile& profile, int frozen_profile_layers);
double total_bytes(const std::vector<StateItem>& items);

// Time to bring every newly active process of a transition up to date (see above).
double state_transfer_s(const CostModel& cost, const std::vector<StateItem>& items,
                        const DataParallelLayout& before, const DataParallelLayout& after);

}  // namespace pipetwin::elastic
