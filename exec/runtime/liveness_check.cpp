#include "exec/runtime/liveness_check.hpp"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

namespace pipetwin::exec {

namespace {

std::string version_name(int v) {
  return v < 0 ? std::string("none") : fmt::format("v{}", v);
}

std::string describe(const HeldMicroBatch& m) {
  return fmt::format(
      "mb {} ({}, pins {})", m.micro_batch,
      m.graph_version < 0 ? std::string("no graph") : fmt::format("graph v{}", m.graph_version),
      version_name(m.pinned_version));
}

std::string describe(const HeldVersion& v) {
  return fmt::format("v{} ({}, {} pin{})", v.version, v.current ? "current" : "stashed", v.pins,
                     v.pins == 1 ? "" : "s");
}

// The items of `a` that `b` lacks, listed.
template <typename T>
std::string only_in(std::vector<T> a, std::vector<T> b) {
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  std::vector<T> diff;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(diff));
  std::string out;
  for (const T& x : diff) out += (out.empty() ? "" : ", ") + describe(x);
  return out;
}

// What differs between two holdings of one stage ("" if nothing).
std::string stage_difference(const StageHolding& expected, const StageHolding& held) {
  std::string walk = only_in(expected.micro_batches, held.micro_batches);
  std::string stage = only_in(held.micro_batches, expected.micro_batches);
  const std::string walk_v = only_in(expected.versions, held.versions);
  const std::string stage_v = only_in(held.versions, expected.versions);
  if (!walk_v.empty()) walk += (walk.empty() ? "" : ", ") + walk_v;
  if (!stage_v.empty()) stage += (stage.empty() ? "" : ", ") + stage_v;
  if (walk.empty() && stage.empty()) return "";
  return fmt::format("the walk only: {}; the stage only: {}", walk.empty() ? "nothing" : walk,
                     stage.empty() ? "nothing" : stage);
}

}  // namespace

std::map<int, StageHolding> expected_holdings(const LiveSet& live) {
  std::map<int, StageHolding> out;
  for (const LiveMicroBatch& m : live.micro_batches)
    out[m.stage].micro_batches.push_back({m.micro_batch, m.graph_version, m.pinned_version});
  for (const LiveVersion& v : live.versions)
    out[v.stage].versions.push_back({v.version, v.current, v.pinned_by});
  return out;
}

std::string holding_difference(const std::map<int, StageHolding>& expected,
                               const std::map<int, StageHolding>& held) {
  std::map<int, std::pair<StageHolding, StageHolding>> both;
  for (const auto& [s, h] : expected) both[s].first = h;
  for (const auto& [s, h] : held) both[s].second = h;
  std::string out;
  for (const auto& [s, pair] : both) {
    const std::string d = stage_difference(pair.first, pair.second);
    if (!d.empty()) out += fmt::format("{}stage {}: {}", out.empty() ? "" : "; ", s, d);
  }
  return out;
}

std::map<int, std::vector<int>> expected_awaiting(const CompiledSchedule& cs, const LiveSet& live,
                                                  int device, int index) {
  std::map<int, std::vector<int>> out;
  const int replica = device / cs.shape().devices_per_replica;
  for (const LiveMicroBatch& m : live.micro_batches) {
    const int i = cs.backward_of(replica, m.stage, m.micro_batch);
    if (i >= 0 && cs.action(i).op == Op::kBackwardInput && cs.ref(i).device == device &&
        cs.ref(i).index <= index)
      out[m.stage].push_back(m.micro_batch);
  }
  for (auto& [s, mbs] : out) std::sort(mbs.begin(), mbs.end());
  return out;
}

std::string awaiting_difference(const std::map<int, std::vector<int>>& expected,
                                const std::map<int, std::vector<int>>& held) {
  std::map<int, std::pair<std::vector<int>, std::vector<int>>> both;
  for (const auto& [s, v] : expected) both[s].first = v;
  for (const auto& [s, v] : held) both[s].second = v;
  const auto list = [](const std::vector<int>& v) {
    std::string out;
    for (int mb : v) out += fmt::format("{}mb {}", out.empty() ? "" : ", ", mb);
    return out.empty() ? std::string("none") : out;
  };
  std::string out;
  for (const auto& [s, pair] : both) {
    if (pair.first == pair.second) continue;
    out += fmt::format("{}stage {}: awaiting backward-weight: the walk {}; the stage {}",
                       out.empty() ? "" : "; ", s, list(pair.first), list(pair.second));
  }
  return out;
}

void LivenessCheck::after(int index, const Action& action,
                          const std::map<int, StageRuntime*>& stages) {
  cursor_.advance_through(index);
  std::map<int, StageHolding> held;
  std::map<int, std::vector<int>> awaiting;
  for (const auto& [s, st] : stages) {
    held[s] = st->holding();
    if (!st->awaiting_weight().empty()) awaiting[s] = st->awaiting_weight();
  }
  const LiveSet live = cursor_.live_set();
  std::string diff = holding_difference(expected_holdings(live), held);
  if (diff.empty()) {
    diff = awaiting_difference(expected_awaiting(walk_.schedule(), live, cursor_.device(), index),
                               awaiting);
  }
  if (diff.empty()) return;
  throw std::logic_error(fmt::format(
      "liveness check: device {} after action {} ({}) holds other than the walk says: {}",
      cursor_.device(), index, pipetwin::describe(action), diff));
}

}  // namespace pipetwin::exec
