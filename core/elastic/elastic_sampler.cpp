#include "core/elastic/elastic_sampler.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Uniform in [0, n) without modulo bias (rejection sampling).
uint64_t below(uint64_t& state, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = splitmix64(state);
  while (x >= limit);
  return x % n;
}

void check_width(int replicas_per_node, int batch) {
  if (replicas_per_node < 1 || batch < 1) {
    throw InputError(
        fmt::format("sampler: replicas per node and batch must be positive ({}, {} "
                    "given)",
                    replicas_per_node, batch));
  }
}

}  // namespace

ElasticSampler::ElasticSampler(long samples, int nodes, uint64_t seed, bool shuffle)
    : samples_(samples), nodes_(nodes), seed_(seed), shuffle_(shuffle) {
  if (nodes < 1) throw InputError(fmt::format("sampler: nodes must be positive ({} given)", nodes));
  if (samples < nodes) {
    throw InputError(
        fmt::format("sampler: needs at least one sample per node ({} samples, {} "
                    "nodes)",
                    samples, nodes));
  }
  cursor_.assign(static_cast<size_t>(nodes), 0);
}

long ElasticSampler::node_begin(int node) const {
  return static_cast<long>(static_cast<__int128>(samples_) * node / nodes_);
}

int ElasticSampler::node_of(long sample) const {
  int n = static_cast<int>(static_cast<__int128>(sample) * nodes_ / samples_);
  while (n + 1 < nodes_ && sample >= node_begin(n + 1)) ++n;
  while (n > 0 && sample < node_begin(n)) --n;
  return n;
}

void ElasticSampler::begin_epoch(int epoch) {
  epoch_ = epoch;
  std::fill(cursor_.begin(), cursor_.end(), 0);
  order_.clear();
  ordered_ = false;
}

bool ElasticSampler::epoch_done() const {
  for (int n = 0; n < nodes_; ++n) {
    if (cursor_[static_cast<size_t>(n)] < node_size(n)) return false;
  }
  return true;
}

long ElasticSampler::consumed() const {
  return std::accumulate(cursor_.begin(), cursor_.end(), 0L);
}

long ElasticSampler::share(long left, int replicas, int j, int batch) {
  const long full = static_cast<long>(replicas) * batch;
  if (left >= full) return batch;
  return left / replicas + (j < left % replicas ? 1 : 0);
}

void ElasticSampler::shuffle_node(int node) {
  auto& order = order_[static_cast<size_t>(node)];
  order.resize(static_cast<size_t>(node_size(node)));
  std::iota(order.begin(), order.end(), node_begin(node));
  if (!shuffle_) return;
  uint64_t state = seed_ ^ (0x5851f42d4c957f2dULL * static_cast<uint64_t>(epoch_ + 1)) ^
                   (0x14057b7ef767814fULL * static_cast<uint64_t>(node + 1));
  for (size_t i = order.size(); i > 1; --i) {
    std::swap(order[i - 1], order[below(state, i)]);
  }
}

ElasticSampler::Step ElasticSampler::next_step(int replicas_per_node, int batch) {
  check_width(replicas_per_node, batch);
  if (!ordered_) {
    order_.assign(static_cast<size_t>(nodes_), {});
    for (int n = 0; n < nodes_; ++n) shuffle_node(n);
    ordered_ = true;
  }
  Step s;
  s.ids.resize(static_cast<size_t>(nodes_ * replicas_per_node));
  for (int n = 0; n < nodes_; ++n) {
    long& cur = cursor_[static_cast<size_t>(n)];
    const long left = node_size(n) - cur;
    const auto& order = order_[static_cast<size_t>(n)];
    for (int j = 0; j < replicas_per_node; ++j) {
      const long take = share(left, replicas_per_node, j, batch);
      auto& ids = s.ids[static_cast<size_t>(n * replicas_per_node + j)];
      ids.assign(order.begin() + cur, order.begin() + cur + take);
      cur += take;
      s.samples += take;
    }
  }
  s.sample_weight = s.samples > 0 ? static_cast<double>(nodes_ * replicas_per_node) / s.samples : 0;
  return s;
}

long ElasticSampler::skip_step(int replicas_per_node, int batch) {
  check_width(replicas_per_node, batch);
  long total = 0;
  for (int n = 0; n < nodes_; ++n) {
    long& cur = cursor_[static_cast<size_t>(n)];
    const long take = std::min(node_size(n) - cur, static_cast<long>(replicas_per_node) * batch);
    cur += take;
    total += take;
  }
  return total;
}

long ElasticSampler::steps_left(int replicas_per_node, int batch) const {
  check_width(replicas_per_node, batch);
  const long per_step = static_cast<long>(replicas_per_node) * batch;
  long steps = 0;
  for (int n = 0; n < nodes_; ++n) {
    const long left = node_size(n) - cursor_[static_cast<size_t>(n)];
    steps = std::max(steps, (left + per_step - 1) / per_step);
  }
  return steps;
}

void ElasticSampler::restore(const Position& p) {
  if (p.cursor.size() != static_cast<size_t>(nodes_)) {
    throw InputError(
        fmt::format("sampler: position has {} node cursors for {} nodes", p.cursor.size(), nodes_));
  }
  for (int n = 0; n < nodes_; ++n) {
    const long c = p.cursor[static_cast<size_t>(n)];
    if (c < 0 || c > node_size(n)) {
      throw InputError(
          fmt::format("sampler: node {} cursor {} out of range 0..{}", n, c, node_size(n)));
    }
  }
  begin_epoch(p.epoch);
  cursor_ = p.cursor;
}

}  // namespace pipetwin::elastic
