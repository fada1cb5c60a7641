#include "python/bindings/plan_options.hpp"

namespace pipetwin::python {

void bind_plan_flags(Options& o, cli::PlanFlags& f) {
  o.text("model", f.model);
  o.path("profile", f.profile);
  o.text("cluster", f.cluster);
  o.path("catalog", f.catalog);
  o.text("dtype", f.dtype);
  o.text("optimizer", f.optimizer);
  o.integer("stages", f.stages);
  o.text("schedule", f.schedule);
  o.count_or_auto("virtual_stages", f.virtual_stages);
  o.integer("batch", f.batch);
  o.count_or_auto("chunks", f.chunks);
  o.text("partitioner", f.partitioner);
  o.integer("dp", f.dp);
  o.text("checkpoint_mode", f.checkpoint_mode);
  o.flag("checkpoint", f.checkpoint);
  o.integer("frozen", f.frozen);
  o.integer("iterations", f.iterations);
}

Catalog load_catalog(const std::string& dir) {
  return Catalog::load(dir.empty() ? Catalog::default_dir() : dir);
}

}  // namespace pipetwin::python
