#include "core/elastic/autocache.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::elastic {

void BatchWork::add(const SampleWork& w, double read_bytes, double write_bytes) {
  ++samples;
  if (w.compute_to == 0) return;  // nothing frozen
  if (w.cached_at < 0) {
    ++misses;
  } else if (w.compute_from < w.compute_to) {
    ++stale;
  } else {
    ++hits;
  }
  (w.read == Tier::kDisk ? disk_read_bytes : memory_read_bytes) +=
      w.read == Tier::kNone ? 0 : read_bytes;
  if (w.write != Tier::kNone)
    (w.write == Tier::kDisk ? disk_write_bytes : memory_write_bytes) += write_bytes;
  if (w.compute_from < w.compute_to) {
    if (runs_from.size() <= static_cast<size_t>(w.compute_from)) {
      runs_from.resize(static_cast<size_t>(w.compute_from) + 1, 0);
    }
    ++runs_from[static_cast<size_t>(w.compute_from)];
  }
}

ActivationCache::ActivationCache(long samples, CacheConfig config)
    : config_(config),
      at_(static_cast<size_t>(samples), -1),
      tier_(static_cast<size_t>(samples), Tier::kNone) {
  if (samples < 1)
    throw InputError(fmt::format("autocache: samples must be positive ({} given)", samples));
  if (!(config.memory_budget_bytes >= 0)) {
    throw InputError(fmt::format("autocache: memory budget must not be negative ({} given)",
                                 config.memory_budget_bytes));
  }
  bytes_at_.assign(1, 0.0);
}

void ActivationCache::set_boundary(int frozen, double bytes_per_sample) {
  if (frozen < boundary_) {
    throw InputError(fmt::format("autocache: the frozen boundary cannot move down ({} after {})",
                                 frozen, boundary_));
  }
  if (!(bytes_per_sample >= 0)) {
    throw InputError(fmt::format("autocache: activation bytes must not be negative ({} given)",
                                 bytes_per_sample));
  }
  boundary_ = frozen;
  if (bytes_at_.size() <= static_cast<size_t>(frozen))
    bytes_at_.resize(static_cast<size_t>(frozen) + 1, 0.0);
  bytes_at_[static_cast<size_t>(frozen)] = bytes_per_sample;
}

double ActivationCache::entry_bytes(int boundary) const {
  return boundary >= 0 && static_cast<size_t>(boundary) < bytes_at_.size()
             ? bytes_at_[static_cast<size_t>(boundary)]
             : 0.0;
}

long ActivationCache::check_id(long id) const {
  if (id < 0 || id >= static_cast<long>(at_.size())) {
    throw InputError(fmt::format("autocache: sample id {} out of range 0..{}", id, at_.size() - 1));
  }
  return id;
}

SampleWork ActivationCache::peek(long id) const {
  const auto i = static_cast<size_t>(check_id(id));
  SampleWork w;
  if (boundary_ == 0) return w;  // nothing frozen: nothing to cache
  w.cached_at = at_[i];
  w.read = tier_[i];
  w.compute_from = std::max(0, w.cached_at);
  w.compute_to = boundary_;
  if (w.cached_at == boundary_) return w;
  const double old_bytes = w.cached_at >= 0 ? entry_bytes(w.cached_at) : 0.0;
  const double in_memory = memory_bytes_ - (w.read == Tier::kMemory ? old_bytes : 0.0);
  const bool fits = in_memory + entry_bytes(boundary_) <= config_.memory_budget_bytes;
  w.write = (w.read != Tier::kDisk && fits) ? Tier::kMemory : Tier::kDisk;
  return w;
}

SampleWork ActivationCache::use(long id) {
  const SampleWork w = peek(id);
  if (w.write == Tier::kNone) return w;
  const auto i = static_cast<size_t>(id);
  if (w.cached_at >= 0) {
    (w.read == Tier::kMemory ? memory_bytes_ : disk_bytes_) -= entry_bytes(w.cached_at);
  } else {
    ++entries_;
  }
  (w.write == Tier::kMemory ? memory_bytes_ : disk_bytes_) += entry_bytes(boundary_);
  at_[i] = boundary_;
  tier_[i] = w.write;
  return w;
}

BatchWork ActivationCache::use_batch(const std::vector<long>& ids) {
  BatchWork b;
  for (long id : ids) {
    const SampleWork w = use(id);
    b.add(w, entry_bytes(w.cached_at), entry_bytes(boundary_));
  }
  return b;
}

std::vector<long> ActivationCache::to_prefetch(const std::vector<long>& upcoming) const {
  std::vector<long> out;
  for (long id : upcoming) {
    const auto i = static_cast<size_t>(check_id(id));
    if (tier_[i] == Tier::kDisk) out.push_back(id);
  }
  return out;
}

double cache_read_s(double bytes, double spilled, const CacheCosts& c) {
  if (!(c.host_bandwidth > 0)) throw InputError("autocache: host bandwidth must be positive");
  double t = bytes / c.host_bandwidth;
  if (spilled > 0) {
    if (!(c.disk_bandwidth > 0)) throw InputError("autocache: disk bandwidth must be positive");
    t += spilled * bytes / c.disk_bandwidth;
  }
  return t;
}

bool cache_pays_off(double frozen_forward_s, double read_s) {
  return read_s < frozen_forward_s;
}

}  // namespace pipetwin::elastic
