// AutoCache: activations at the frozen boundary, cached per sample (PipeTransformer Section 3.4,
// Figure 8, Appendix E).
//
// Pure logic, shared by the simulator and a live trainer: for every sample a step trains, what
// is read from the cache (and from which tier), which frozen layers must still run, and what is
// written back; plus the bytes held in host memory and on disk.
//
//  - One cache per machine, keyed by sample id (Appendix D.1: "we build a sample unique ID by
//    returning index in the get_item() function ... we can find a sample's hidden feature with
//    O(1) time"); the elastic sampler keeps each id on one machine, so the entry is reused every
//    epoch, by every replica of the machine.
//  - Lazy replacement (Figure 8): "Immediately after the transition ... the cache still holds
//    cached activations from layer 3, which must be replaced by activations from layer 7.
//    Therefore, all processes read their corresponding activations from the cache, feed them to
//    the next 4 layers to compute activations for layer 7, then replace the existing cache ...
//    without running any sample through any frozen layers twice." So a sample cached at
//    boundary c < F runs only the frozen layers [c, F), and is rewritten at F.
//  - Memory budget and disk spill (Section 3.4: "When the activations are too large to reside
//    on CPU memory, AutoCache will also swap them to the disk and perform prefetching"):
//    entries stay in host memory while they fit the budget, the rest go to disk. Disk entries
//    are read ahead by prefetching (Appendix E's sliding window over the upcoming batches):
//    `to_prefetch` lists the disk entries among the next samples. A replaced entry keeps its
//    tier when it still fits. (Appendix E moves a window over a disk-resident cache; keeping as
//    much as fits resident and streaming only the rest reads less from disk for the same memory.)
//  - When to cache (Section 3.4: "it only employs cached activations when the profiler suggests
//    caching can speed up the forward pass"): `cache_pays_off` compares reading one sample's
//    activation (host-to-device copy, plus the disk read for the spilled share) with that
//    sample's forward pass through the frozen layers.
//
// Boundaries are profile-layer counts (the frozen prefix, transformer_layers.hpp).
//
// Thread-safety: ActivationCache is not thread-safe (the machine's cache daemon owns it); the
// free functions are pure.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace pipetwin::elastic {

enum class Tier : uint8_t { kNone, kMemory, kDisk };

// What one sample needs in the current step.
struct SampleWork {
  int cached_at = -1;       // boundary of the entry read; -1: none (run from the input)
  Tier read = Tier::kNone;  // tier read from
  int compute_from = 0;     // frozen layers [compute_from, compute_to) run forward
  int compute_to = 0;
  Tier write = Tier::kNone;  // tier the new entry goes to; kNone: nothing written
};

// The same summed over a batch.
struct BatchWork {
  long samples = 0;
  long hits = 0;    // entry at the current boundary: read only
  long stale = 0;   // entry at an older boundary: read, run the layers between, rewrite
  long misses = 0;  // no entry: run every frozen layer, write
  double memory_read_bytes = 0, disk_read_bytes = 0;
  double memory_write_bytes = 0, disk_write_bytes = 0;
  std::vector<long> runs_from;  // runs_from[c]: samples that run frozen layers [c, boundary)
  void add(const SampleWork& w, double read_bytes, double write_bytes);
};

struct CacheConfig {
  double memory_budget_bytes = std::numeric_limits<double>::infinity();  // host memory per machine
};

class ActivationCache {
 public:
  // Sample ids are 0..samples-1.
  ActivationCache(long samples, CacheConfig config = {});

  // Moves the boundary to `frozen` profile layers, whose output is `bytes_per_sample`. Entries
  // are replaced lazily. Throws InputError if the boundary would move down.
  void set_boundary(int frozen, double bytes_per_sample);
  int boundary() const { return boundary_; }

  // What sample `id` needs now, without changing anything.
  SampleWork peek(long id) const;
  // The same, and records the new entry (the trainer calls it as the sample is trained).
  SampleWork use(long id);
  BatchWork use_batch(const std::vector<long>& ids);
  // Disk entries among `upcoming` ids, for the prefetcher.
  std::vector<long> to_prefetch(const std::vector<long>& upcoming) const;

  long entries() const { return entries_; }
  double memory_bytes() const { return memory_bytes_; }
  double disk_bytes() const { return disk_bytes_; }
  double entry_bytes(int boundary) const;

 private:
  long check_id(long id) const;

  CacheConfig config_;
  std::vector<int32_t> at_;  // per sample: boundary of its entry, -1 none
  std::vector<Tier> tier_;
  std::vector<double> bytes_at_;  // bytes per sample of an entry at each boundary seen
  int boundary_ = 0;
  long entries_ = 0;
  double memory_bytes_ = 0, disk_bytes_ = 0;
};

struct CacheCosts {
  double host_bandwidth = 0;  // bytes/s, host memory to device (the node's PCIe link)
  double disk_bandwidth = 0;  // bytes/s
};

// Seconds to read one sample's `bytes` when `spilled` (0..1) of the cache is on disk.
double cache_read_s(double bytes, double spilled, const CacheCosts& costs);
// Section 3.4's test: cache only when reading beats the frozen forward pass.
bool cache_pays_off(double frozen_forward_s, double read_s);

}  // namespace pipetwin::elastic
