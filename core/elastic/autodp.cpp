#include "core/elastic/autodp.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

std::vector<int> DataParallelLayout::training_group() const {
  std::vector<int> out;
  for (int p = 0; p < processes(); ++p) {
    if (active(p)) out.push_back(p);
  }
  return out;
}

int DataParallelLayout::device(int process, int stage) const {
  const int node = process / devices_per_node, j = process % devices_per_node;
  return node * devices_per_node + j * K + stage;
}

DataParallelLayout dp_layout(int nodes, int devices_per_node, int K) {
  if (nodes < 1 || devices_per_node < 1) {
    throw InputError(fmt::format("autodp: cluster must have nodes and devices ({} x {} given)",
                                 nodes, devices_per_node));
  }
  if (K < 1 || K > devices_per_node) {
    throw InputError(
        fmt::format("autodp: pipeline length must be in 1..{} (devices per node), "
                    "{} given",
                    devices_per_node, K));
  }
  return {nodes, devices_per_node, K};
}

std::vector<int> newly_active(const DataParallelLayout& before, const DataParallelLayout& after) {
  std::vector<int> out;
  for (int p : after.training_group()) {
    if (p >= before.processes() || !before.active(p)) out.push_back(p);
  }
  return out;
}

std::vector<StateItem> state_transfer(const Profile& profile, int frozen) {
  double frozen_params = 0, active_params = 0, optimizer = 0;
  for (int l = 0; l < profile.num_layers(); ++l) {
    const auto& layer = profile.layers[static_cast<size_t>(l)];
    if (l < frozen) {
      frozen_params += layer.param_bytes;
    } else {
      active_params += layer.param_bytes;
      optimizer += layer.optimizer_bytes;
    }
  }
  // Control records: a few integers each; the learning-rate schedule's state is its step count,
  // base rates and warm-up/decay parameters.
  return {{"weights of the active layers (F_pipe)", active_params, true},
          {"weights of the frozen layers (F_frozen)", frozen_params, true},
          {"optimizer state of the active layers", optimizer, true},
          {"epoch and step", 16, false},
          {"learning-rate schedule state", 64, false},
          {"frozen-layer boundary", 8, false},
          {"pipeline device range", 16, false}};
}

double total_bytes(const std::vector<StateItem>& items) {
  double sum = 0;
  for (const auto& i : items) sum += i.bytes;
  return sum;
}

double state_transfer_s(const CostModel& cost, const std::vector<StateItem>& items,
                        const DataParallelLayout& before, const DataParallelLayout& after) {
  std::map<int, double> per_node;  // node -> time its sender needs
  for (int p : newly_active(before, after)) {
    const int node = p / after.devices_per_node;
    const int src = after.device(node * after.devices_per_node, 0);
    const int dst = after.device(p, 0);
    double t = 0;
    for (const auto& item : items) t += cost.transfer_s(item.bytes, src, dst);
    per_node[node] += t;
  }
  double worst = 0;
  for (const auto& [node, t] : per_node) worst = std::max(worst, t);
  return worst;
}

}  // namespace pipetwin::elastic
