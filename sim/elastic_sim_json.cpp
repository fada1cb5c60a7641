// sim/elastic_sim's report as JSON ("pipetwin.elastic_report" v1; see elastic_sim.hpp).
#include "sim/elastic_sim.hpp"

namespace pipetwin::sim {

namespace {

Json run_to_json(const ElasticRun& run, double baseline_s) {
  Json j;
  j["name"] = run.name;
  j["total_s"] = run.total_s;
  j["samples"] = run.samples;
  j["throughput_samples_per_s"] = run.throughput();
  j["comm_s"] = run.comm_s;
  j["speedup"] = run.total_s > 0 ? baseline_s / run.total_s : 0;
  Json transitions = Json::array();
  for (const auto& t : run.transitions) {
    Json chunks = Json::array();
    for (const auto& [m, s] : t.chunk_times) chunks.push_back({{"chunks", m}, {"iteration_s", s}});
    transitions.push_back({{"epoch", t.epoch},
                           {"sample", t.sample},
                           {"step", t.step},
                           {"frozen_layers", t.frozen_layers},
                           {"K", t.K},
                           {"dp", t.dp},
                           {"chunks", t.chunks},
                           {"cache", t.cache},
                           {"overhead_s", t.overhead_s},
                           {"state_transfer_s", t.state_transfer_s},
                           {"chunk_times", chunks}});
  }
  j["transitions"] = transitions;
  return j;
}

}  // namespace

Json elastic_report_to_json(const ElasticReport& r) {
  Json doc = json_document("pipetwin.elastic_report", 1);
  doc["model"] = r.elastic.log.model;
  doc["layers"] = r.elastic.trace.layers;  // L, the transformer layers the freeze algorithm counts
  doc["speedup"] = r.speedup;
  doc["elastic"] = run_to_json(r.elastic, r.baseline.total_s);
  doc["baseline"] = run_to_json(r.baseline, r.baseline.total_s);
  Json breakdown = Json::array();
  for (const auto& run : r.breakdown) breakdown.push_back(run_to_json(run, r.baseline.total_s));
  doc["breakdown"] = breakdown;
  return doc;
}

}  // namespace pipetwin::sim
