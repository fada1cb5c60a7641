#include "core/elastic/epoch_log.hpp"

#include <fmt/format.h>

namespace pipetwin::elastic {

namespace {

constexpr const char* kFormat = "pipetwin.elastic_log";
constexpr int kVersion = 1;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

EpochRecord record_from_json(const JsonView& j) {
  j.allow_only({"epoch", "frozen_layers", "K", "dp", "chunks", "cache", "steps", "samples",
                "compute_s", "transition_s", "time_s", "throughput_samples_per_s", "loss",
                "accuracy", "cache_stats"});
  EpochRecord r;
  auto positive_int = [&](const char* key) {
    const int v = j.int32(key);
    if (v < 1) j.at(key).fail(fmt::format("must be positive ({} given)", v));
    return v;
  };
  r.epoch = j.int32("epoch");
  if (r.epoch < 0) j.at("epoch").fail(fmt::format("must not be negative ({} given)", r.epoch));
  r.frozen_layers = j.int32("frozen_layers");
  if (r.frozen_layers < 0) {
    j.at("frozen_layers").fail(fmt::format("must not be negative ({} given)", r.frozen_layers));
  }
  r.K = positive_int("K");
  r.dp = positive_int("dp");
  r.chunks = positive_int("chunks");
  r.cache = j.bool_or("cache", false);
  r.steps = static_cast<long>(j.integer("steps"));
  r.samples = static_cast<long>(j.integer("samples"));
  if (r.steps < 0 || r.samples < 0) j.fail("steps and samples must not be negative");
  r.compute_s = j.nonneg("compute_s");
  r.transition_s = j.nonneg_or("transition_s", 0);
  r.time_s = j.nonneg("time_s");
  r.throughput_samples_per_s = j.nonneg_or("throughput_samples_per_s", 0);
  if (j.has("loss")) r.loss = j.number("loss");
  if (j.has("accuracy")) r.accuracy = j.number("accuracy");
  if (j.has("cache_stats")) r.cache_stats = cache_counts_from_json(j.at("cache_stats"));
  return r;
}

std::string optional_cell(const std::optional<double>& v) {
  return v ? fmt::format("{:.6g}", *v) : std::string();
}

}  // namespace

CacheCounts cache_counts_from_json(const JsonView& j) {
  j.allow_only({"hits", "stale", "misses", "shared_reads", "memory_read_bytes", "disk_read_bytes",
                "memory_write_bytes", "disk_write_bytes"});
  auto count = [&](const char* key) {
    const long v = static_cast<long>(j.integer(key));
    if (v < 0) j.at(key).fail(fmt::format("must not be negative ({} given)", v));
    return v;
  };
  CacheCounts c;
  c.hits = count("hits");
  c.stale = count("stale");
  c.misses = count("misses");
  c.shared_reads = count("shared_reads");
  c.memory_read_bytes = j.nonneg("memory_read_bytes");
  c.disk_read_bytes = j.nonneg("disk_read_bytes");
  c.memory_write_bytes = j.nonneg("memory_write_bytes");
  c.disk_write_bytes = j.nonneg("disk_write_bytes");
  return c;
}

Json cache_counts_to_json(const CacheCounts& c) {
  return {{"hits", c.hits},
          {"stale", c.stale},
          {"misses", c.misses},
          {"shared_reads", c.shared_reads},
          {"memory_read_bytes", c.memory_read_bytes},
          {"disk_read_bytes", c.disk_read_bytes},
          {"memory_write_bytes", c.memory_write_bytes},
          {"disk_write_bytes", c.disk_write_bytes}};
}

void complete_epoch_row(EpochRecord& row) {
  row.time_s = row.compute_s + row.transition_s;
  row.throughput_samples_per_s = row.time_s > 0 ? static_cast<double>(row.samples) / row.time_s : 0;
}

double EpochLog::total_s() const {
  double t = 0;
  for (const auto& e : epochs) t += e.time_s;
  return t;
}

Json epoch_log_to_json(const EpochLog& log) {
  Json doc = json_document(kFormat, kVersion);
  doc["source"] = log.source;
  doc["model"] = log.model;
  Json epochs = Json::array();
  for (const auto& e : log.epochs) {
    Json j;
    j["epoch"] = e.epoch;
    j["frozen_layers"] = e.frozen_layers;
    j["K"] = e.K;
    j["dp"] = e.dp;
    j["chunks"] = e.chunks;
    j["cache"] = e.cache;
    j["steps"] = e.steps;
    j["samples"] = e.samples;
    j["compute_s"] = e.compute_s;
    j["transition_s"] = e.transition_s;
    j["time_s"] = e.time_s;
    j["throughput_samples_per_s"] = e.throughput_samples_per_s;
    if (e.loss) j["loss"] = *e.loss;
    if (e.accuracy) j["accuracy"] = *e.accuracy;
    if (e.cache_stats) j["cache_stats"] = cache_counts_to_json(*e.cache_stats);
    epochs.push_back(j);
  }
  doc["epochs"] = epochs;
  return doc;
}

EpochLog epoch_log_from_json(const JsonView& doc) {
  doc.check_format(kFormat, kVersion);
  doc.allow_only({"format", "version", "source", "model", "epochs"});
  EpochLog log;
  log.source = doc.string_or("source", "simulated");
  log.model = doc.string_or("model", "");
  for (const auto& e : doc.at("epochs").items()) log.epochs.push_back(record_from_json(e));
  return log;
}

std::string epoch_log_csv(const EpochLog& log) {
  std::string out =
      "epoch,frozen_layers,K,dp,chunks,cache,steps,samples,compute_s,transition_s,time_s,"
      "throughput_samples_per_s,loss,accuracy\n";
  for (const auto& e : log.epochs) {
    out += fmt::format("{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.3f},{},{}\n", e.epoch,
                       e.frozen_layers, e.K, e.dp, e.chunks, e.cache ? 1 : 0, e.steps, e.samples,
                       e.compute_s, e.transition_s, e.time_s, e.throughput_samples_per_s,
                       optional_cell(e.loss), optional_cell(e.accuracy));
  }
  return out;
}

void save_epoch_log(const EpochLog& log, const std::string& path) {
  write_file_atomic(
      path, ends_with(path, ".csv") ? epoch_log_csv(log) : dump_json(epoch_log_to_json(log)));
}

EpochLog load_epoch_log(const std::string& path) {
  const Json doc = load_json_file(path);
  return epoch_log_from_json(JsonView(doc, path));
}

}  // namespace pipetwin::elastic
