// Epoch log of an elastic training run: per epoch, the pipeline the run used (K, data-parallel
// width, chunks M, frozen layers, AutoCache on/off) and how long the epoch took (docs/design.md
// "Elastic training": K, DP width, M, frozen layers, throughput, loss and accuracy). The simulator
// writes it with predicted times, the executor with measured times and its loss and accuracy, so
// the two line up column by column.
//
// JSON: "pipetwin.elastic_log" version 1, {"format", "version", "source", "model", "epochs":
// [{"epoch", "frozen_layers", "K", "dp", "chunks", "cache", "steps", "samples", "compute_s",
// "transition_s", "time_s", "throughput_samples_per_s", "loss"?, "accuracy"?, "cache_stats"?}]},
// validated on load with errors naming the file and field. CSV: one header line, one row per
// epoch, the same columns (loss and accuracy empty when unknown; cache_stats only in JSON).
// "cache_stats" (added later, optional, so older files load): what AutoCache did in the epoch,
// as a live run counts it (exec/runtime/activation_store.hpp): {"hits", "stale", "misses",
// "shared_reads", "memory_read_bytes", "disk_read_bytes", "memory_write_bytes",
// "disk_write_bytes"}.
//
// Thread-safety: plain value types.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/json_io.hpp"

namespace pipetwin::elastic {

// AutoCache's work in an epoch, summed over the machine's processes.
struct CacheCounts {
  long hits = 0;          // entry at the current boundary: read only
  long stale = 0;         // entry at an older boundary: read, the layers between run, rewritten
  long misses = 0;        // no entry: every frozen layer run, written
  long shared_reads = 0;  // entries read that another process (replica) wrote
  double memory_read_bytes = 0, disk_read_bytes = 0;
  double memory_write_bytes = 0, disk_write_bytes = 0;
};

struct EpochRecord {
  int epoch = 0;
  int frozen_layers = 0;  // transformer layers frozen at the end of the epoch
  int K = 1;              // pipeline length at the end of the epoch
  int dp = 1;             // pipeline replicas
  int chunks = 1;         // M
  bool cache = false;     // AutoCache in use
  long steps = 0;
  long samples = 0;
  double compute_s = 0;     // training steps
  double transition_s = 0;  // pipeline transformations during the epoch (start-up in epoch 0)
  double time_s = 0;        // compute_s + transition_s
  double throughput_samples_per_s = 0;  // samples / time_s
  std::optional<double> loss, accuracy;
  std::optional<CacheCounts> cache_stats;  // a live run's, when it had a cache
};

// Fills an epoch row's derived columns from what the run counted: time_s = compute_s +
// transition_s, throughput_samples_per_s = samples / time_s (0 for an epoch that took no time).
// The replay (sim/elastic_sim.hpp) and the live run (exec/train/trainer.hpp) both close their rows
// with it, so their logs agree on what the columns mean.
void complete_epoch_row(EpochRecord& row);

struct EpochLog {
  std::string source = "simulated";  // or "measured"
  std::string model;
  std::vector<EpochRecord> epochs;
  double total_s() const;
};

Json cache_counts_to_json(const CacheCounts& counts);
CacheCounts cache_counts_from_json(const JsonView& j);  // InputError naming the field
Json epoch_log_to_json(const EpochLog& log);
EpochLog epoch_log_from_json(const JsonView& doc);
std::string epoch_log_csv(const EpochLog& log);
void save_epoch_log(const EpochLog& log, const std::string& path);  // .csv: CSV, else JSON
EpochLog load_epoch_log(const std::string& path);                   // JSON

}  // namespace pipetwin::elastic
