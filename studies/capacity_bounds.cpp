#include "studies/capacity_bounds.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "core/cost_model.hpp"
#include "sim/memory_pools.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin::sim {

int recomputes_per_step(Checkpoint checkpoint, int chunks) {
  switch (checkpoint) {
    case Checkpoint::kNone:
      return 0;
    case Checkpoint::kExceptLast:
      return chunks - 1;
    case Checkpoint::kAlways:
      return chunks;
  }
  return 0;
}

LayoutBounds::LayoutBounds(const Profile& profile, const Cluster& cluster, double compute_scale,
                           int batch, const Framework& framework)
    : cluster_(cluster), batch_(batch), tensor_capacity_(pipetwin::tensor_capacity_bytes(cluster)) {
  CostOptions o;
  o.compute_scale = compute_scale;
  o.framework = framework;
  const CostModel cost(profile, cluster, o);
  const int layers = cost.num_layers();
  for (int l = 0; l < layers; ++l) {
    const auto& p = profile.layers[static_cast<size_t>(l)];
    static_bytes_ += 2 * p.param_bytes + p.optimizer_bytes;
    layer_static_.push_back(2 * p.param_bytes + p.optimizer_bytes);
    layer_saved_.push_back(p.saved_bytes_per_sample);
    optimizer_.push_back(std::min(cost.optimizer_s(l), cost.optimizer_new_version_s(l)));
    optimizer_sum_ += optimizer_.back();
  }
  for (int d = 0; d < cluster.num_devices(); ++d)
    slowdown_ = d == 0 ? cost.device_slowdown(d) : std::min(slowdown_, cost.device_slowdown(d));
  for (int b = 1; b <= batch; ++b) {
    if (batch % b != 0) continue;
    Sums& s = by_micro_batch_[b];
    s.least_contention = least_contention(cost, b);
    for (int l = 0; l < layers; ++l) {
      const auto& p = profile.layers[static_cast<size_t>(l)];
      const double saved = p.saved_bytes_per_sample * b;
      s.f_b.push_back(cost.forward_s(l, b) + cost.backward_s(l, b));
      s.backward += cost.backward_s(l, b);
      s.r.push_back(cost.recompute_s(l, b));
      s.compute += s.f_b.back();
      s.recompute += s.r.back();
      s.saved += saved;
      s.layer_memory = std::max(s.layer_memory, 2 * p.param_bytes + p.optimizer_bytes + saved);
    }
  }
}

const LayoutBounds::Sums& LayoutBounds::sums(int micro_batch) const {
  return by_micro_batch_.at(micro_batch);
}

double LayoutBounds::memory_bytes(const LayoutShape& x) const {
  const Sums& s = sums(batch_ / (x.dp * x.chunks));
  std::set<int> memories;
  for (int d = 0; d < x.dp * x.stages; ++d) memories.insert(cluster_.memory_of(d));
  const double all = x.dp * (static_bytes_ + s.saved / x.virtual_stages);
  return std::max(all / static_cast<double>(memories.size()), s.layer_memory);
}

double LayoutBounds::split_memory_bytes(const LayoutShape& x,
                                        const std::vector<int>& saved_sets) const {
  if (saved_sets.empty()) return 0;
  const double b = static_cast<double>(batch_ / (x.dp * x.chunks));
  const size_t layers = layer_static_.size();
  // Whether every stage can stay within `cap`.
  auto splits_within = [&](double cap) {
    size_t l = 0;
    for (int sets : saved_sets) {
      double used = 0;
      while (l < layers) {
        const double add = layer_static_[l] + sets * layer_saved_[l] * b;
        if (used + add > cap) break;
        used += add;
        ++l;
      }
    }
    return l == layers;
  };
  double lo = 0, hi = 0;
  for (size_t l = 0; l < layers; ++l) {
    int most = 0;
    for (int sets : saved_sets) most = std::max(most, sets);
    hi += layer_static_[l] + most * layer_saved_[l] * b;  // one stage of everything fits
  }
  for (int i = 0; i < 50 && hi - lo > 1e-6 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (splits_within(mid) ? hi : lo) = mid;
  }
  return lo;
}

double LayoutBounds::time_s(const LayoutShape& x) const {
  if (x.asynchronous) return 0;
  const Sums& s = sums(batch_ / (x.dp * x.chunks));
  const int m = x.chunks, r = recomputes_per_step(x.checkpoint, m);
  double heaviest = 0;
  for (size_t l = 0; l < s.f_b.size(); ++l)
    heaviest = std::max(heaviest, m * s.f_b[l] + r * s.r[l] + optimizer_[l]);
  const double replica = m * s.compute + r * s.recompute + optimizer_sum_;
  double bound = std::max(replica / x.stages, heaviest);
  // Sharing groups (devices placed in order): every group at its best throughput together does
  // the dp replicas' work no faster than their summed throughputs; their backwards, one at a
  // time per group under serial_backward.
  std::map<int, int> groups;
  for (int d = 0; d < x.dp * x.stages; ++d) {
    const int g = cluster_.sharing_group(d);
    if (g >= 0) ++groups[g];
  }
  if (!groups.empty() && static_cast<int>(groups.size()) * cluster_.device.core_sharing >=
                             x.dp * x.stages) {  // every device is in a group
    double throughput = 0;
    for (const auto& [g, n] : groups) throughput += shared_throughput(n, s.least_contention);
    bound = std::max(bound, x.dp * replica / throughput);
    if (cluster_.device.serial_backward)
      bound = std::max(bound, x.dp * m * s.backward / static_cast<double>(groups.size()));
  }
  return slowdown_ * bound;
}

double LayoutBounds::split_time_s(const LayoutShape& x) const {
  if (x.asynchronous || x.virtual_stages != 1) return 0;
  const Sums& s = sums(batch_ / (x.dp * x.chunks));
  const int m = x.chunks, r = recomputes_per_step(x.checkpoint, m);
  std::vector<double> work;
  double hi = 0;
  for (size_t l = 0; l < s.f_b.size(); ++l) {
    work.push_back(m * s.f_b[l] + r * s.r[l] + optimizer_[l]);
    hi += work.back();
  }
  // Whether K stages can each stay within `cap`.
  auto splits_within = [&](double cap) {
    size_t l = 0;
    for (int k = 0; k < x.stages && l < work.size(); ++k) {
      double used = 0;
      while (l < work.size() && used + work[l] <= cap) used += work[l++];
    }
    return l == work.size();
  };
  double lo = 0;
  for (int i = 0; i < 60 && hi - lo > 1e-9 * hi; ++i) {
    const double mid = (lo + hi) / 2;
    (splits_within(mid) ? hi : lo) = mid;
  }
  // `lo` splits nowhere; a hair below it absorbs the rounding of sums taken in another order.
  return slowdown_ * lo * (1 - 1e-12);
}

double least_contention(const CostModel& cost, double micro_batch) {
  double least = std::numeric_limits<double>::infinity();
  for (int l = 0; l < cost.num_layers(); ++l) {
    least = std::min(
        {least, cost.contention(l, micro_batch), cost.contention_backward(l, micro_batch)});
  }
  return std::isinf(least) ? 1.0 : least;
}

double shared_throughput(int n, double contention) {
  double most = 1;
  for (int j = 2; j <= n; ++j) most = std::max(most, j / (1 + (j - 1) * (contention - 1)));
  return most;
}

double work_bound(const CostModel& cost, const std::vector<int>& placement, const DeviceWork& w,
                  double micro_batch) {
  const Cluster& cluster = cost.cluster();
  const size_t per_replica = w.work.size();
  double most = 0;
  struct Group {
    int devices = 0;
    double work = 0, backward = 0;
  };
  std::map<int, Group> groups;
  for (size_t d = 0; d < placement.size(); ++d) {
    const double slow = cost.device_slowdown(placement[d]);
    most = std::max(most, w.work[d % per_replica] * slow);
    const int g = cluster.sharing_group(placement[d]);
    if (g < 0) continue;
    Group& group = groups[g];
    ++group.devices;
    group.work += w.work[d % per_replica] * slow;
    group.backward += w.backward[d % per_replica] * slow;
  }
  if (groups.empty()) return most;
  const double contention = least_contention(cost, micro_batch);
  for (const auto& [g, group] : groups) {
    most = std::max(most, group.work / shared_throughput(group.devices, contention));
    if (cluster.device.serial_backward) most = std::max(most, group.backward);
  }
  return most;
}

DeviceWork device_work(const std::vector<StageCost>& stages, const std::vector<int>& stage_device,
                       int devices, int chunks, Checkpoint checkpoint) {
  const int r = recomputes_per_step(checkpoint, chunks);
  DeviceWork w;
  w.work.assign(static_cast<size_t>(devices), 0.0);
  w.backward.assign(static_cast<size_t>(devices), 0.0);
  for (size_t s = 0; s < stages.size(); ++s) {
    const StageCost& c = stages[s];
    const auto d = static_cast<size_t>(stage_device[s]);
    w.work[d] += chunks * (c.forward_s + c.backward_s) + r * c.recompute_s +
                 std::min(c.optimizer_s, c.optimizer_new_version_s);
    w.backward[d] += chunks * c.backward_s;
  }
  return w;
}

double plan_time_bound(const PlanContext& ctx) {
  const Plan& p = ctx.plan;
  if (schedule_info(p.schedule).asynchronous || p.replicates_stages()) return 0;
  std::vector<int> stage_device;
  for (const auto& st : p.stages) stage_device.push_back(st.device);
  const DeviceWork w =
      device_work(ctx.stages, stage_device, p.devices_per_replica(), p.chunks, p.checkpoint);
  return work_bound(ctx.cost, ctx.placement, w, p.micro_batch_size());
}

}  // namespace pipetwin::sim
