#include "exec/runtime/stage_io.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

namespace pipetwin::exec {

namespace {

void insert_sorted(std::vector<int>& v, int x) {
  auto it = std::lower_bound(v.begin(), v.end(), x);
  if (it == v.end() || *it != x) v.insert(it, x);
}

}  // namespace

StageGraph::StageGraph(std::vector<int> skip_from, const std::vector<std::vector<int>>& stages)
    : skip_from_(std::move(skip_from)), stage_of_(skip_from_.size(), -1), io_(stages.size()) {
  const int L = static_cast<int>(skip_from_.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    for (int l : stages[s]) {
      if (l < 0 || l >= L) {
        throw std::invalid_argument(
            fmt::format("stage {}: layer {} outside the model's {} layers", s, l, L));
      }
      if (stage_of_[static_cast<size_t>(l)] >= 0) {
        throw std::invalid_argument(fmt::format("layer {} is in stage {} and stage {}", l,
                                                stage_of_[static_cast<size_t>(l)], s));
      }
      stage_of_[static_cast<size_t>(l)] = static_cast<int>(s);
    }
  }
  for (int l = 0; l < L; ++l) {
    if (stage_of_[static_cast<size_t>(l)] < 0)
      throw std::invalid_argument(fmt::format("layer {} is in no stage", l));
    const int skip = skip_from_[static_cast<size_t>(l)];
    if (skip >= l - 1 && skip >= 0) {
      throw std::invalid_argument(fmt::format(
          "layer {}: a skip input from layer {} (must come from before layer {})", l, skip, l - 1));
    }
  }
  if (L == 0) return;
  io_[static_cast<size_t>(stage_of(0))].first = true;
  io_[static_cast<size_t>(stage_of(L - 1))].last = true;
  // Every read of a producer's output by a layer of another stage.
  for (int l = 0; l < L; ++l) {
    const int to = stage_of(l);
    for (int p : {l - 1, skip_from_[static_cast<size_t>(l)]}) {
      if (p < 0 && !(p == kModelInput && l == 0)) continue;
      if (p == kModelInput) {
        insert_sorted(io_[static_cast<size_t>(to)].inputs, kModelInput);
        continue;
      }
      const int from = stage_of(p);
      if (from == to) continue;
      insert_sorted(io_[static_cast<size_t>(to)].inputs, p);
      insert_sorted(io_[static_cast<size_t>(from)].outputs, p);
      insert_sorted(edge_tensors_[{from, to}], p);
    }
  }
}

const std::vector<int>& StageGraph::tensors(int from, int to) const {
  static const std::vector<int> kNone;
  auto it = edge_tensors_.find({from, to});
  return it == edge_tensors_.end() ? kNone : it->second;
}

std::vector<std::pair<int, int>> StageGraph::edges() const {
  std::vector<std::pair<int, int>> out;
  for (const auto& [e, t] : edge_tensors_) out.push_back(e);
  return out;
}

std::vector<int> StageGraph::data_order() const {
  // Kahn's algorithm over the stage edges.
  const int S = num_stages();
  std::vector<int> pending(static_cast<size_t>(S), 0), order;
  const auto all = edges();
  for (const auto& e : all) ++pending[static_cast<size_t>(e.second)];
  std::set<int> ready;
  for (int s = 0; s < S; ++s) {
    if (pending[static_cast<size_t>(s)] == 0) ready.insert(s);
  }
  while (!ready.empty()) {
    const int s = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(s);
    for (const auto& e : all) {
      if (e.first == s && --pending[static_cast<size_t>(e.second)] == 0) ready.insert(e.second);
    }
  }
  if (static_cast<int>(order.size()) != S)
    throw std::invalid_argument("the stages read from each other in a cycle");
  return order;
}

}  // namespace pipetwin::exec
