#include "core/partition/partitioner.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/partition/stage_memory.hpp"

namespace pipetwin {

std::vector<int> Partition::balance() const {
  std::vector<int> out;
  for (const auto& s : stages) out.push_back(static_cast<int>(s.size()));
  return out;
}

int Partition::replicas_of(int stage) const {
  return replicas.empty() ? 1 : replicas[static_cast<size_t>(stage)];
}

int Partition::device_of(int stage) const {
  if (!device.empty()) return device[static_cast<size_t>(stage)];
  int d = 0;
  for (int s = 0; s < stage; ++s) d += replicas_of(s);
  return d;
}

int Partition::num_devices() const {
  if (device.empty()) {
    int n = 0;
    for (int s = 0; s < num_stages(); ++s) n += replicas_of(s);
    return n;
  }
  return *std::max_element(device.begin(), device.end()) + 1;
}

bool Partition::uniform_replicas() const {
  for (int s = 1; s < num_stages(); ++s) {
    if (replicas_of(s) != replicas_of(0)) return false;
  }
  return true;
}

Partition contiguous_partition(const std::vector<int>& balance) {
  Partition p;
  int next = 0;
  for (int n : balance) {
    std::vector<int> layers;
    for (int i = 0; i < n; ++i) layers.push_back(next++);
    p.stages.push_back(std::move(layers));
  }
  return p;
}

void check_partition_request(const PartitionRequest& r, const std::string& who,
                             bool needs_index_order) {
  if (r.cost == nullptr) throw std::invalid_argument(who + ": no cost model");
  if (r.num_stages < 1) {
    throw InputError(fmt::format("{}: partitions must be positive ({} < 1)", who, r.num_stages));
  }
  const int L = r.cost->num_layers();
  if (L < r.num_stages) {
    throw InputError(
        fmt::format("{}: model has fewer layers than stages ({} < {})", who, L, r.num_stages));
  }
  if (needs_index_order && !r.cost->graph().index_order_is_topological()) {
    throw InputError(
        fmt::format("{}: contiguous partitioning needs layers in data-flow order "
                    "(the profile has an edge to an earlier layer)",
                    who));
  }
}

double stage_memory_bytes(const PartitionRequest& r, const std::vector<int>& layers) {
  const StageCost c = r.cost->stage_cost(layers, r.micro_batch);
  return c.static_bytes() + r.in_flight * (c.input_bytes + c.saved_bytes);
}

namespace {

// The schedule model's peak of `layers` over `held`'s positions.
double priced_bytes(const PartitionRequest& r, const std::vector<int>& layers,
                    const HeldSet& held) {
  const StageCost c = r.cost->stage_cost(layers, r.micro_batch);
  const CrossingBytes x = crossing_bytes_per_sample(*r.cost, layers);
  const double b = r.micro_batch;
  return held.bytes(stage_bytes(c, x.in * b, x.out * b));
}

}  // namespace

CrossingBytes crossing_bytes_per_sample(const CostModel& cost, const std::vector<int>& layers) {
  std::vector<char> in_stage(static_cast<size_t>(cost.num_layers()), 0);
  for (int l : layers) in_stage[static_cast<size_t>(l)] = 1;
  CrossingBytes x;
  for (const auto& e : cost.graph().edges()) {
    const bool from = in_stage[static_cast<size_t>(e.from)],
               to = in_stage[static_cast<size_t>(e.to)];
    if (!from && to) x.in += e.bytes_per_sample;
    if (from && !to) x.out += e.bytes_per_sample;
  }
  return x;
}

double stage_memory_bytes(const PartitionRequest& r, const std::vector<int>& layers, int stage,
                          int num_stages) {
  if (r.memory == nullptr) return stage_memory_bytes(r, layers);
  return priced_bytes(r, layers, r.memory->held(stage, num_stages));
}

double activation_sets(const PartitionRequest& r) {
  return r.memory != nullptr ? r.memory->most_in_flight(r.num_stages) : r.in_flight;
}

std::vector<double> device_memory_bytes(const PartitionRequest& r, const Partition& p) {
  std::vector<double> out(static_cast<size_t>(p.num_devices()), 0.0);
  // Several stages on a device: no chain position; each at the worst of a device chain.
  const bool positioned =
      r.memory == nullptr || p.device.empty() || p.num_devices() == p.num_stages();
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto& layers = p.stages[static_cast<size_t>(s)];
    const double need = positioned
                            ? stage_memory_bytes(r, layers, s, p.num_stages())
                            : priced_bytes(r, layers, r.memory->any_position(p.num_devices()));
    for (int k = 0; k < (p.device.empty() ? p.replicas_of(s) : 1); ++k) {
      out[static_cast<size_t>(p.device_of(s) + k)] += need;
    }
  }
  return out;
}

bool fits_memory(const PartitionRequest& r, const Partition& p) {
  if (r.memory_limit_bytes <= 0) return true;
  for (double need : device_memory_bytes(r, p)) {
    if (need > r.memory_limit_bytes) return false;
  }
  return true;
}

void check_memory(const PartitionRequest& r, const Partition& p, const std::string& who) {
  if (r.memory_limit_bytes <= 0) return;
  const std::vector<double> need = device_memory_bytes(r, p);
  for (int s = 0; s < p.num_stages(); ++s) {
    const int d = p.device_of(s);
    const double bytes = need[static_cast<size_t>(d)];
    if (bytes <= r.memory_limit_bytes) continue;
    std::vector<int> shared;
    for (int t = 0; t < p.num_stages(); ++t) {
      if (p.device_of(t) == d) shared.push_back(t);
    }
    const std::string where = shared.size() > 1
                                  ? fmt::format("device {} (stages {})", d, fmt::join(shared, ", "))
                                  : fmt::format("stage {}", s);
    throw NoFitError(fmt::format("{}: {} needs {:.2f} GiB, over the {:.2f} GiB limit", who, where,
                                 bytes / kGiB, r.memory_limit_bytes / kGiB),
                     bytes, r.memory_limit_bytes, "on " + where);
  }
}

double stage_period(double compute_s, double comm_fwd_s, double comm_bwd_s) {
  return compute_s + std::max(0.0, comm_fwd_s - compute_s) + std::max(0.0, comm_bwd_s - compute_s);
}

namespace {

std::vector<int> stage_of_layers(int num_layers, const Partition& p) {
  std::vector<int> of(static_cast<size_t>(num_layers), -1);
  for (int s = 0; s < p.num_stages(); ++s) {
    for (int l : p.stages[static_cast<size_t>(s)]) of[static_cast<size_t>(l)] = s;
  }
  return of;
}

}  // namespace

double bottleneck_time(const PartitionRequest& r, const Partition& p) {
  const CostModel& cm = *r.cost;
  const int D = p.num_devices();
  std::vector<double> compute(static_cast<size_t>(D), 0), in(compute), out(compute);
  std::vector<char> used(static_cast<size_t>(D), 0);
  for (int s = 0; s < p.num_stages(); ++s) {
    const auto d = static_cast<size_t>(p.device_of(s));
    used[d] = 1;
    for (int l : p.stages[static_cast<size_t>(s)]) {
      compute[d] += cm.forward_s(l, r.micro_batch) + cm.backward_s(l, r.micro_batch);
    }
  }
  const auto of = stage_of_layers(cm.num_layers(), p);
  for (const auto& [key, bytes] : cm.graph().stage_edge_bytes(of)) {
    const int da = p.device_of(key.first), db = p.device_of(key.second);
    if (da == db) continue;
    const double t = cm.transfer_s(bytes * r.micro_batch, da, db);
    in[static_cast<size_t>(db)] += t;   // activations arrive at the consumer
    out[static_cast<size_t>(da)] += t;  // their gradients arrive back at the producer
  }
  std::vector<double> period(static_cast<size_t>(D), 0);
  for (int d = 0; d < D; ++d) {
    const auto i = static_cast<size_t>(d);
    period[i] = stage_period(compute[i], in[i], out[i]);
  }
  for (int s = 0; s < p.num_stages(); ++s) {
    const int m = p.replicas_of(s);
    if (m <= 1) continue;
    std::vector<int> devices;
    for (int k = 0; k < m; ++k) devices.push_back(p.device_of(s) + k);
    const double grads = cm.stage_cost(p.stages[static_cast<size_t>(s)], r.micro_batch).param_bytes;
    const double ar = cm.allreduce_s(grads, devices) / std::max(1, r.micro_batches);
    auto& t = period[static_cast<size_t>(p.device_of(s))];
    t = std::max(t, ar) / m;
  }
  double worst = 0;
  for (int d = 0; d < D; ++d) {
    if (used[static_cast<size_t>(d)]) worst = std::max(worst, period[static_cast<size_t>(d)]);
  }
  return worst;
}

double evaluate_partition(const PartitionRequest& r, const Partition& p) {
  return r.evaluate ? r.evaluate(p) : bottleneck_time(r, p);
}

namespace {

// Kahn's algorithm on the stage graph; ties go to the stage with the lowest first layer. Returns
// fewer than S stages when there is a cycle.
std::vector<int> stage_topological_order(const ModelGraph& g,
                                         const std::vector<std::vector<int>>& stages) {
  const auto S = stages.size();
  Partition tmp;
  tmp.stages = stages;
  const auto of = stage_of_layers(g.num_layers(), tmp);
  std::vector<std::set<int>> succ(S);
  std::vector<int> indegree(S, 0);
  for (const auto& e : g.edges()) {
    const int a = of[static_cast<size_t>(e.from)], b = of[static_cast<size_t>(e.to)];
    if (a != b && succ[static_cast<size_t>(a)].insert(b).second) ++indegree[static_cast<size_t>(b)];
  }
  auto first = [&](int s) {
    const auto& l = stages[static_cast<size_t>(s)];
    return l.empty() ? 0 : *std::min_element(l.begin(), l.end());
  };
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (size_t s = 0; s < S; ++s) {
    if (indegree[s] == 0) ready.push({first(static_cast<int>(s)), static_cast<int>(s)});
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int s = ready.top().second;
    ready.pop();
    order.push_back(s);
    for (int t : succ[static_cast<size_t>(s)]) {
      if (--indegree[static_cast<size_t>(t)] == 0) ready.push({first(t), t});
    }
  }
  return order;
}

}  // namespace

Partition order_stages(const ModelGraph& graph, std::vector<std::vector<int>> stages,
                       std::vector<int> device) {
  for (auto& s : stages) std::sort(s.begin(), s.end());
  const std::vector<int> order = stage_topological_order(graph, stages);
  if (order.size() != stages.size()) {
    throw std::logic_error("order_stages: the stages depend on each other in a cycle");
  }
  Partition p;
  for (int s : order) {
    p.stages.push_back(std::move(stages[static_cast<size_t>(s)]));
    if (!device.empty()) p.device.push_back(device[static_cast<size_t>(s)]);
  }
  return p;
}

Partition renumber_devices(Partition p) {
  std::map<int, int> renumber;
  for (int& d : p.device) d = renumber.emplace(d, static_cast<int>(renumber.size())).first->second;
  return p;
}

bool stage_graph_is_acyclic(const ModelGraph& graph, const Partition& p) {
  return stage_topological_order(graph, p.stages).size() == p.stages.size();
}

}  // namespace pipetwin
