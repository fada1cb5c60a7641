// ActivationStore: flags, slot shapes, and the counts (exec/runtime/activation_store.hpp).
#include <unistd.h>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "exec/runtime/activation_store.hpp"

namespace pipetwin::exec {

namespace {

// Adds b's counts to a.
void merge(elastic::BatchWork& a, const elastic::BatchWork& b) {
  a.samples += b.samples;
  a.hits += b.hits;
  a.stale += b.stale;
  a.misses += b.misses;
  a.memory_read_bytes += b.memory_read_bytes;
  a.disk_read_bytes += b.disk_read_bytes;
  a.memory_write_bytes += b.memory_write_bytes;
  a.disk_write_bytes += b.disk_write_bytes;
  if (a.runs_from.size() < b.runs_from.size()) a.runs_from.resize(b.runs_from.size(), 0);
  for (size_t i = 0; i < b.runs_from.size(); ++i) a.runs_from[i] += b.runs_from[i];
}

}  // namespace

AutoCacheMode parse_autocache_mode(const std::string& text) {
  if (text == "auto") return AutoCacheMode::kAuto;
  if (text == "on") return AutoCacheMode::kOn;
  if (text == "off") return AutoCacheMode::kOff;
  throw InputError(fmt::format("--autocache: expected auto, on or off, got \"{}\"", text));
}

void CacheOptions::validate() const {
  if (!(memory_budget_bytes >= 0)) {
    throw InputError(
        fmt::format("--cache-memory must not be negative ({} given)", memory_budget_bytes));
  }
}

int64_t CacheLayout::slot_bytes() const {
  int64_t n = static_cast<int64_t>(at::elementSize(dtype));
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> uniform_slot_shape(
    const std::vector<std::pair<int, std::vector<int64_t>>>& outputs) {
  if (outputs.empty()) throw InputError("autocache: the model has no frozen boundary to cache");
  for (const auto& [boundary, shape] : outputs) {
    if (shape != outputs.front().second) {
      throw InputError(fmt::format(
          "autocache: F_frozen's output per sample is {} after {} layers but {} after {}; the "
          "cache's fixed-size slots need one shape at every boundary (run with --autocache off)",
          fmt::format("[{}]", fmt::join(outputs.front().second, ", ")), outputs.front().first,
          fmt::format("[{}]", fmt::join(shape, ", ")), boundary));
    }
  }
  return outputs.front().second;
}

std::string cache_job_name(bool distributed, int master_port) {
  return distributed ? fmt::format("port{}", master_port) : fmt::format("pid{}", ::getpid());
}

void ActivationStore::count_passes(int from, int to, const std::vector<int64_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  if (to <= from) return;
  if (layer_passes_.size() < static_cast<size_t>(to)) layer_passes_.resize(static_cast<size_t>(to));
  for (int l = from; l < to; ++l) layer_passes_[static_cast<size_t>(l)] += std::ssize(ids);
  if (!track_) return;
  if (sample_passes_.size() < static_cast<size_t>(to))
    sample_passes_.resize(static_cast<size_t>(to));
  for (int l = from; l < to; ++l) {
    auto& v = sample_passes_[static_cast<size_t>(l)];
    if (v.empty()) v.assign(static_cast<size_t>(layout_.samples), 0);
    for (int64_t id : ids) {
      uint16_t& p = v[static_cast<size_t>(index_of(id))];
      if (p < UINT16_MAX) ++p;
    }
  }
}

void ActivationStore::track_passes(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  track_ = on;
}

int64_t ActivationStore::passes(int layer) const {
  std::lock_guard<std::mutex> lock(mu_);
  return layer >= 0 && static_cast<size_t>(layer) < layer_passes_.size()
             ? layer_passes_[static_cast<size_t>(layer)]
             : 0;
}

int ActivationStore::passes(int layer, int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (layer < 0 || static_cast<size_t>(layer) >= sample_passes_.size()) return 0;
  const auto& v = sample_passes_[static_cast<size_t>(layer)];
  return v.empty() ? 0 : v[static_cast<size_t>(index_of(id))];
}

int ActivationStore::max_passes_per_sample() const {
  std::lock_guard<std::mutex> lock(mu_);
  int most = 0;
  for (const auto& v : sample_passes_) {
    for (uint16_t p : v) most = std::max<int>(most, p);
  }
  return most;
}

CacheStats ActivationStore::take_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(stats_, CacheStats{});
}

void ActivationStore::add_stats(const CacheStats& s) {
  std::lock_guard<std::mutex> lock(mu_);
  merge(stats_.work, s.work);
  stats_.shared_reads += s.shared_reads;
}

}  // namespace pipetwin::exec
