#include "python/bindings/capacity_api.hpp"

#include "core/error.hpp"
#include "python/bindings/options.hpp"
#include "python/bindings/plan_api.hpp"
#include "python/bindings/plan_options.hpp"
#include "studies/capacity.hpp"
#include "studies/capacity_options.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::python {

namespace {

// capacity()'s keywords (cli/cmd_capacity.cpp's CapacityArgs), with the CLI's defaults.
struct CapacityCall : sim::CapacityOptions {
  bool batch_given = false, samples_given = false;  // both required
};

py::object number_or_none(double v) {
  return v > 0 ? py::object(py::float_(v)) : py::object(py::none());
}

py::object text_or_none(const std::string& s) {
  return s.empty() ? py::object(py::none()) : py::object(py::str(s));
}

// The plan columns of capacity.csv: of the plan chosen, or of the leanest tried; None without.
void plan_columns(py::dict& row, const Plan* p, py::object gpus) {
  row["gpus"] = gpus;
  row["stages"] = p ? py::object(py::int_(p->devices_per_replica())) : py::object(py::none());
  row["virtual_stages"] =
      p ? py::object(py::int_(p->num_stages() / p->devices_per_replica())) : py::object(py::none());
  row["dp"] = p ? py::object(py::int_(p->dp)) : py::object(py::none());
  row["chunks"] = p ? py::object(py::int_(p->chunks)) : py::object(py::none());
  row["micro_batch"] = p ? py::object(py::int_(p->micro_batch_size())) : py::object(py::none());
  row["schedule"] = p ? py::object(py::str(p->schedule)) : py::object(py::none());
  row["checkpoint"] =
      p ? py::object(py::str(checkpoint_name(p->checkpoint))) : py::object(py::none());
  row["partitioner"] = p ? py::object(py::str(p->partitioner)) : py::object(py::none());
}

// One row of capacity.csv (cli/cmd_capacity.cpp's csv_row) as values.
py::dict row_of(const char* objective, size_t rank, const sim::ClusterCapacity& c,
                const sim::CapacityChoice* x) {
  py::dict row;
  row["objective"] = objective;
  row["rank"] = rank ? py::object(py::int_(rank)) : py::object(py::none());
  row["cluster"] = c.cluster;
  row["device"] = c.device;
  row["devices"] = c.devices;
  row["price_per_gpu_hour"] = c.price_per_gpu_hour;
  row["fits"] = c.fits ? "yes" : "no";
  const Plan* plan = x ? &x->plan : (c.has_leanest ? &c.leanest : nullptr);
  plan_columns(row, plan, x ? py::object(py::int_(x->gpus)) : py::object(py::none()));
  const char* times[] = {"iteration_time_s", "throughput_samples_per_s", "epoch_time_s",
                         "total_time_s", "cost"};
  const double values[] = {x ? x->iteration_time_s : 0, x ? x->throughput_samples_per_s : 0,
                           x ? x->epoch_time_s : 0, x ? x->total_time_s : 0, x ? x->cost : 0};
  for (size_t i = 0; i < 5; ++i) row[times[i]] = x ? py::object(py::float_(values[i])) : py::none();
  row["peak_memory_bytes"] = number_or_none(x ? x->peak_memory_bytes : c.need_bytes);
  row["memory_capacity_bytes"] = number_or_none(c.capacity_bytes);
  row["oom_device"] = text_or_none(c.oom_device);
  row["over_bytes"] = number_or_none(c.over_bytes);
  row["note"] = text_or_none(c.note);
  row["plan"] = plan ? py::cast(PlanObject(*plan)) : py::none();
  return row;
}

py::list rows_of(const sim::CapacityReport& r) {
  py::list rows;
  for (size_t i = 0; i < r.by_time.size(); ++i) {
    const auto& c = r.clusters[r.by_time[i]];
    rows.append(row_of("fastest", i + 1, c, &c.fastest));
  }
  for (size_t i = 0; i < r.by_cost.size(); ++i) {
    const auto& c = r.clusters[r.by_cost[i]];
    rows.append(row_of("cheapest", i + 1, c, &c.cheapest));
  }
  for (const auto& c : r.clusters) {
    if (!c.fits) rows.append(row_of("none", 0, c, nullptr));
  }
  return rows;
}

// cli/cmd_capacity.cpp's run_capacity, without the printing and the files.
sim::CapacityReport run(const CapacityCall& a) {
  if (!a.batch_given) throw InputError("--batch is required");  // CLI11's words
  if (!a.samples_given) throw InputError("--samples is required");
  a.flags.check_precision();
  const Catalog catalog = load_catalog(a.flags.catalog);
  return sim::plan_capacity(a.request(catalog));
}

py::list capacity_verb(const py::kwargs& kwargs) {
  Options o("capacity", kwargs);
  CapacityCall a;
  a.batch_given = o.has("batch");
  using P = sim::PlanOption;  // the plan options `pipetwin capacity` takes
  bind_plan_flags(
      o, a.flags,
      {P::kModel, P::kProfile, P::kCatalog, P::kDtype, P::kOptimizer, P::kBatch, P::kFramework,
       P::kDistributedOptimizer});
  o.words("partitioner", a.partitioners);
  a.samples_given = o.has("samples");
  o.real("samples", a.samples);
  o.real("epochs", a.epochs);
  o.path("prices", a.prices);
  o.words("clusters", a.clusters);
  o.words("schedules", a.schedules);
  o.words("checkpoint_modes", a.checkpoint_modes);
  o.integers("tp_sizes", a.tp_sizes);
  o.real("budget", a.budget);
  o.integer("jobs", a.jobs);
  o.finish();
  return rows_of(without_gil([&] { return run(a); }));
}

}  // namespace

void bind_capacity(py::module_& m) {
  m.def("_capacity", &capacity_verb);
}

}  // namespace pipetwin::python
