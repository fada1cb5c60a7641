#include "core/elastic/epoch_log.hpp"

#include <string_view>
#include <utility>
#include <vector>

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
  r.epoch = j.int32_at_least("epoch", 0);
  r.frozen_layers = j.int32_at_least("frozen_layers", 0);
  r.K = j.int32_at_least("K", 1);
  r.dp = j.int32_at_least("dp", 1);
  r.chunks = j.int32_at_least("chunks", 1);
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

namespace {

// CacheCounts' members by their JSON names, in the file's order: the one list its reader and its
// writer walk.
constexpr std::pair<const char*, long CacheCounts::*> kCacheCounts[] = {
    {"hits", &CacheCounts::hits},
    {"stale", &CacheCounts::stale},
    {"misses", &CacheCounts::misses},
    {"shared_reads", &CacheCounts::shared_reads}};
constexpr std::pair<const char*, double CacheCounts::*> kCacheBytes[] = {
    {"memory_read_bytes", &CacheCounts::memory_read_bytes},
    {"disk_read_bytes", &CacheCounts::disk_read_bytes},
    {"memory_write_bytes", &CacheCounts::memory_write_bytes},
    {"disk_write_bytes", &CacheCounts::disk_write_bytes}};

}  // namespace

CacheCounts cache_counts_from_json(const JsonView& j) {
  std::vector<std::string_view> known;
  for (const auto& [key, member] : kCacheCounts) known.emplace_back(key);
  for (const auto& [key, member] : kCacheBytes) known.emplace_back(key);
  j.allow_only(known);
  CacheCounts c;
  for (const auto& [key, member] : kCacheCounts) {
    c.*member = static_cast<long>(j.integer_at_least(key, 0));
  }
  for (const auto& [key, member] : kCacheBytes) c.*member = j.nonneg(key);
  return c;
}

Json cache_counts_to_json(const CacheCounts& c) {
  Json j = Json::object();
  for (const auto& [key, member] : kCacheCounts) j[key] = c.*member;
  for (const auto& [key, member] : kCacheBytes) j[key] = c.*member;
  return j;
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
  doc["epochs"] = json_array(log.epochs, [](const EpochRecord& e) {
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
    return j;
  });
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
  return load_json_as(path, epoch_log_from_json);
}

}  // namespace pipetwin::elastic
