// `pipetwin reproduce pipetransformer`: the settings and the simulated runs (see
// pipetransformer.hpp).
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "sim/planner.hpp"
#include "studies/reproduce/pipetransformer.hpp"

namespace pipetwin::sim::pipetransformer {

namespace {

// Training split of each data set (the data sets' own figures; the paper does not restate them).
// `origin`: the reference table's row that names the data set.
long training_samples(const Data& data, const std::string& dataset, const std::string& origin) {
  for (const auto& d : data.datasets) {
    if (d.name == dataset) return d.samples;
  }
  throw InputError(
      fmt::format("{}: datasets: no \"{}\" ({} names it)", data.path, dataset, origin));
}

std::string zoo_name(const Data& data, const std::string& model, const std::string& origin) {
  const auto it = data.zoo_models.find(model);
  if (it == data.zoo_models.end()) {
    throw InputError(
        fmt::format("{}: zoo_models: no \"{}\" ({} names it)", data.path, model, origin));
  }
  return it->second;
}

}  // namespace

std::vector<Setting> settings(const ReproContext& context, const Data& data) {
  const ReferenceTable table1 = load_reference(context, data.table1_reference);
  const ReferenceTable table3 = load_reference(context, data.table3_reference);
  std::vector<Setting> out;
  for (size_t row = 0; row < table1.rows.size(); ++row) {
    Setting s;
    s.dataset = table1.cell(row, "dataset");
    const size_t h = table3.find("dataset", s.dataset);
    const std::string origin = fmt::format("{} row {}", table3.path, h + 1);
    s.model = table3.cell(h, "model");
    s.zoo = zoo_name(data, s.model, origin);
    s.layers = static_cast<int>(table3.number(h, "layers"));
    s.batch = static_cast<int>(table3.number(h, "batch_size"));
    s.epochs = static_cast<int>(table3.number(h, "epochs"));
    s.samples = training_samples(data, s.dataset, origin);
    out.push_back(s);
  }
  return out;
}

const Profile& Setup::profile(const std::string& zoo) const {
  for (const auto& [name, p] : profiles) {
    if (name == zoo) return p;
  }
  throw std::logic_error("reproduce pipetransformer: no profile for " + zoo);
}

Setup make_setup(const ReproContext& context, const Data& data,
                 const std::vector<Setting>& settings) {
  Setup setup;
  setup.catalog = &context.catalog;
  setup.data = &data;
  setup.cluster = load_cluster(data.cluster, context.catalog);
  for (const auto& s : settings) {
    bool have = false;
    for (const auto& p : setup.profiles) have = have || p.first == s.zoo;
    if (!have) setup.profiles.emplace_back(s.zoo, resolve_profile(s.zoo, "", setup.cluster.device));
  }
  return setup;
}

ElasticConfig config(const Setup& setup, const Setting& s) {
  return config(setup, s, setup.data->alpha);
}

ElasticConfig config(const Setup& setup, const Setting& s, double alpha) {
  ElasticConfig c;
  c.model = s.zoo;
  c.profile = setup.profile(s.zoo);
  c.cluster = setup.cluster;
  c.compute_scale = resolve_compute_scale(c.profile, c.cluster, setup.catalog);
  c.stages = c.cluster.devices_per_node;  // K = 8 per node (Figure 7's T0)
  c.batch = s.batch;
  c.epochs = s.epochs;
  c.samples = s.samples;
  c.schedule = setup.data->schedule;  // PyTorch Pipe
  c.checkpoint = setup.data->checkpoint;
  c.alpha = alpha;
  c.trace =
      elastic::bound_trace_over_run(s.layers, alpha, s.epochs, s.samples, setup.data->freeze_steps);
  return c;
}

std::vector<SettingRuns> run_table1(const Setup& setup, const std::vector<Setting>& settings) {
  std::vector<SettingRuns> out;
  for (const auto& s : settings) {
    // Figure 9 is ViT on ImageNet; the other settings run without the ablation.
    out.push_back(
        {s, simulate_elastic(config(setup, s), s.dataset == setup.data->breakdown_dataset)});
  }
  return out;
}

std::string describe_transitions(const ElasticRun& run) {
  std::string out;
  for (const auto& t : run.transitions) {
    out += fmt::format("{}{}f K{}x{} M{}{}", out.empty() ? "" : ", ", t.frozen_layers, t.K, t.dp,
                       t.chunks, t.cache ? " cache" : "");
  }
  return out;
}

}  // namespace pipetwin::sim::pipetransformer
