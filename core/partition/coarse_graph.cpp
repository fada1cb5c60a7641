#include "core/partition/coarse_graph.hpp"

#include <stdexcept>

namespace pipetwin {

namespace {

std::string scope_of(const std::string& name) {
  const auto dot = name.find_last_of('.');
  return dot == std::string::npos ? std::string() : name.substr(0, dot);
}

double sum_of(const std::map<int, double>& m) {
  double s = 0;
  for (const auto& [n, w] : m) s += w;
  return s;
}

}  // namespace

CoarseGraph::CoarseGraph(const PartitionRequest& r)
    : r_(r), limit_(r.memory_limit_bytes), sets_(activation_sets(r)) {
  const CostModel& cm = *r.cost;
  const int L = cm.num_layers();
  for (int l = 0; l < L; ++l) {
    const StageCost c = cm.stage_cost({l}, r.micro_batch);
    Block b;
    b.layers = {l};
    b.compute_s = c.forward_s + c.backward_s;
    b.static_bytes = c.static_bytes();
    b.saved_bytes = c.saved_bytes;
    if (l == 0) b.model_input_bytes = cm.profile().input_bytes_per_sample * r.micro_batch;
    const auto& layer = cm.profile().layers[static_cast<size_t>(l)];
    b.kind = layer.kind;
    b.scope = scope_of(layer.name);
    total_compute_ += b.compute_s;
    blocks_.push_back(std::move(b));
  }
  for (const auto& e : cm.graph().edges()) {
    blocks_[static_cast<size_t>(e.from)].out[e.to] += e.bytes_per_sample;
    blocks_[static_cast<size_t>(e.to)].in[e.from] += e.bytes_per_sample;
  }
  ord_.resize(static_cast<size_t>(L));
  at_ = cm.graph().topological_order();
  for (int p = 0; p < L; ++p) ord_[static_cast<size_t>(at_[static_cast<size_t>(p)])] = p;
  alive_ = L;
  seen_.assign(static_cast<size_t>(L), 0);
}

std::vector<int> CoarseGraph::blocks() const {
  std::vector<int> out;
  for (int b : at_) {
    if (b >= 0) out.push_back(b);
  }
  return out;
}

std::vector<int> CoarseGraph::neighbours(int b) const {
  std::vector<int> out;
  for (const auto& [n, w] : block(b).in) out.push_back(n);
  for (const auto& [n, w] : block(b).out) {
    if (!block(b).in.count(n)) out.push_back(n);
  }
  return out;
}

double CoarseGraph::bytes_between(int a, int b) const {
  double s = 0;
  if (auto it = block(a).out.find(b); it != block(a).out.end()) s += it->second;
  if (auto it = block(a).in.find(b); it != block(a).in.end()) s += it->second;
  return s;
}

double CoarseGraph::memory(int b) const {
  const Block& x = block(b);
  return x.static_bytes +
         sets_ * (sum_of(x.in) * r_.micro_batch + x.model_input_bytes + x.saved_bytes);
}

double CoarseGraph::merged_memory(int a, int b) const {
  const Block &x = block(a), &y = block(b);
  const double in = sum_of(x.in) + sum_of(y.in) - bytes_between(a, b);
  return x.static_bytes + y.static_bytes +
         sets_ * (in * r_.micro_batch + x.model_input_bytes + y.model_input_bytes + x.saved_bytes +
                  y.saved_bytes);
}

std::vector<int> CoarseGraph::window_reach(int u, int v, bool& hit) const {
  ++stamp_;
  hit = false;
  const int limit = position(v);
  std::vector<int> stack, reached;
  for (const auto& [n, w] : block(u).out) {
    if (n != v && position(n) < limit) stack.push_back(n);
  }
  for (int n : stack) seen_[static_cast<size_t>(n)] = stamp_;
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    reached.push_back(x);
    for (const auto& [n, w] : block(x).out) {
      if (n == v) hit = true;
      if (position(n) < limit && seen_[static_cast<size_t>(n)] != stamp_) {
        seen_[static_cast<size_t>(n)] = stamp_;
        stack.push_back(n);
      }
    }
  }
  return reached;
}

bool CoarseGraph::can_contract(int a, int b) const {
  if (a == b || !block(a).alive || !block(b).alive) return false;
  if (!block(a).out.count(b) && !block(b).out.count(a)) return false;
  const int u = position(a) < position(b) ? a : b;
  const int v = u == a ? b : a;
  bool hit = false;
  window_reach(u, v, hit);
  return !hit;
}

int CoarseGraph::contract(int keep, int drop) {
  const int u = position(keep) < position(drop) ? keep : drop;
  const int v = u == keep ? drop : keep;
  bool hit = false;
  window_reach(u, v, hit);
  if (hit) throw std::logic_error("CoarseGraph::contract would create a cycle");
  // Reorder the window [pos(u), pos(v)]: the rest, the merged block, then what u reaches.
  const int lo = position(u), hi = position(v);
  std::vector<int> before, after;
  for (int p = lo + 1; p < hi; ++p) {
    const int x = at_[static_cast<size_t>(p)];
    if (x < 0) continue;
    (seen_[static_cast<size_t>(x)] == stamp_ ? after : before).push_back(x);
  }
  int p = lo;
  auto place = [&](int x) {
    at_[static_cast<size_t>(p)] = x;
    ord_[static_cast<size_t>(x)] = p++;
  };
  for (int x : before) place(x);
  place(keep);
  for (int x : after) place(x);
  while (p <= hi) at_[static_cast<size_t>(p++)] = -1;
  merge_into(keep, drop);
  return keep;
}

void CoarseGraph::merge_into(int keep, int drop) {
  Block& x = blocks_[static_cast<size_t>(keep)];
  Block& y = blocks_[static_cast<size_t>(drop)];
  x.layers.insert(x.layers.end(), y.layers.begin(), y.layers.end());
  x.compute_s += y.compute_s;
  x.static_bytes += y.static_bytes;
  x.saved_bytes += y.saved_bytes;
  x.model_input_bytes += y.model_input_bytes;
  if (x.kind != y.kind) x.kind.clear();
  if (x.scope != y.scope) x.scope.clear();
  x.out.erase(drop);
  x.in.erase(drop);
  for (const auto& [n, w] : y.in) {
    if (n == keep) continue;
    x.in[n] += w;
    auto& o = blocks_[static_cast<size_t>(n)].out;
    o.erase(drop);
    o[keep] += w;
  }
  for (const auto& [n, w] : y.out) {
    if (n == keep) continue;
    x.out[n] += w;
    auto& i = blocks_[static_cast<size_t>(n)].in;
    i.erase(drop);
    i[keep] += w;
  }
  y = Block{};
  y.alive = false;
  --alive_;
}

}  // namespace pipetwin
