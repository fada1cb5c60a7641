// CapacityOptions: what `pipetwin capacity` and the Python API's capacity() are given (the plan
// options they share with `plan`, the price file, the clusters, the samples and the search's
// lists), and the CapacityRequest they make of it (studies/capacity.hpp). The CLI binds these
// fields to its flags and the Python API to keywords; both then call request(), so the request is
// filled once.
//
// Thread-safety: a value type; request() is a const function of it and the catalog.
#pragma once

#include <string>
#include <vector>

#include "core/cluster.hpp"
#include "studies/capacity.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::sim {

struct CapacityOptions {
  // model, profile, catalog, dtype, optimizer, batch, framework, distributed_optimizer
  PlanOptions flags;
  std::vector<std::string> partitioners = default_capacity_partitioners();
  std::vector<std::string> clusters, schedules = default_capacity_schedules();
  std::vector<std::string> checkpoint_modes = {"none", "except_last", "always"};
  std::vector<int> tp_sizes = {1, 2, 4, 8};  // tensor-parallel sizes to try (CapacityRequest)
  std::string prices;                        // "": <catalog>/prices.json
  int jobs = 0;
  double samples = 0, epochs = 1, budget = 0;

  // The request, after flags.check_precision() (the callers check the dtype and optimizer before
  // they load the catalog): `catalog` (loaded from flags.catalog) must outlive it. InputError for
  // an unknown checkpoint mode and a broken price file.
  CapacityRequest request(const Catalog& catalog) const;
};

}  // namespace pipetwin::sim
