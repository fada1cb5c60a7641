#include "python/bindings/plan_options.hpp"

#include <algorithm>

namespace pipetwin::python {

void bind_plan_flags(Options& o, sim::PlanOptions& f, const std::vector<sim::PlanOption>& which) {
  const auto& specs = sim::plan_option_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (std::find(which.begin(), which.end(), sim::PlanOption(i)) != which.end())
      bind_option_spec(o, f, specs[i]);
  }
}

Catalog load_catalog(const std::string& dir) {
  return Catalog::load(dir.empty() ? Catalog::default_dir() : dir);
}

}  // namespace pipetwin::python
