#include "python/bindings/elastic_api.hpp"

#include <fmt/format.h>

#include "core/elastic/epoch_log.hpp"
#include "core/error.hpp"
#include "python/bindings/convert.hpp"
#include "python/bindings/plan_options.hpp"
#include "sim/elastic_options.hpp"
#include "sim/elastic_sim.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::python {

void refuse_elastic_options(const Options& o) {
  // The keywords that need elastic=True, as the CLI's flags that need --elastic.
  for (const auto& spec : sim::elastic_option_specs()) {
    if (!sim::needs_elastic(spec) || !o.has(spec.keyword().c_str())) continue;
    std::string flag = spec.keyword();
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    throw InputError(fmt::format("--{} requires --elastic", flag));
  }
}

py::dict simulate_elastic_call(Options& o) {
  sim::ElasticOptions a;
  bind_option_specs(o, a, sim::elastic_option_specs());
  o.finish();
  const sim::ElasticReport r = without_gil([&] {
    sim::ElasticReport report = sim::simulate_elastic(sim::elastic_config(a), a.breakdown);
    a.write_outputs(report);
    return report;
  });
  py::dict out;
  out["report"] = to_python(sim::elastic_report_to_json(r));
  out["epoch_log"] = to_python(elastic::epoch_log_to_json(r.elastic.log));
  out["freeze_trace"] = to_python(elastic::freeze_trace_to_json(r.elastic.trace));
  return out;
}

}  // namespace pipetwin::python
