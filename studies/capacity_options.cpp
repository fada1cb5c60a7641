#include "studies/capacity_options.hpp"

#include "core/schedule/schedule.hpp"

namespace pipetwin::sim {

CapacityRequest CapacityOptions::request(const Catalog& catalog) const {
  CapacityRequest q;
  q.model = flags.model;
  q.profile_path = flags.profile;
  q.precision = flags.precision();
  q.catalog = &catalog;
  q.prices = load_prices(prices.empty() ? default_prices_path(catalog) : prices, catalog);
  q.clusters = clusters;
  q.batch = flags.batch;
  q.samples = samples;
  q.epochs = epochs;
  q.schedules = schedules;
  q.partitioners = partitioners;
  q.checkpoints.clear();
  for (const auto& mode : checkpoint_modes) q.checkpoints.push_back(parse_checkpoint_mode(mode));
  q.budget = budget;
  q.jobs = jobs;
  q.framework = flags.framework_terms();
  q.tp_sizes = tp_sizes;
  q.distributed_optimizer = flags.distributed_optimizer;
  return q;
}

}  // namespace pipetwin::sim
