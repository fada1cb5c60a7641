#include <algorithm>
#include <cstdio>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "core/elastic/transformer_layers.hpp"
#include "core/error.hpp"
#include "exec/runtime/session.hpp"
#include "exec/train/auto_cache.hpp"
#include "exec/train/train_data.hpp"
#include "exec/train/train_run.hpp"
#include "exec/train/trainer.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

AutoCache::~AutoCache() = default;

std::vector<int64_t> AutoCache::slot_shape() const {
  // F_frozen's output per sample at every boundary the run may freeze at (1..L transformer
  // layers frozen), from one training sample through a fresh copy of the model in eval mode.
  const elastic::TransformerLayers tl = elastic::TransformerLayers::from_profile(run_.plan.profile);
  std::vector<int> boundaries;
  for (int f = 1; f <= tl.layers(); ++f) boundaries.push_back(tl.frozen_profile_layers(f));
  const at::ScalarType dtype = run_.options.exec.float64 ? at::kDouble : at::kFloat;
  models::LayeredModel m = models::build_model(run_.plan.model, dtype, run_.options.exec.seed);
  at::NoGradGuard no_grad;
  at::Tensor x = run_.data->epochs->sample_inputs(0, 1);
  std::vector<std::pair<int, std::vector<int64_t>>> outputs;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    m.layers[l].module.ptr()->eval();
    x = m.layers[l].module.forward(x);
    const int boundary = static_cast<int>(l) + 1;
    if (std::find(boundaries.begin(), boundaries.end(), boundary) != boundaries.end()) {
      outputs.emplace_back(boundary, std::vector<int64_t>(x.sizes().begin() + 1, x.sizes().end()));
    }
  }
  return uniform_slot_shape(outputs);
}

void AutoCache::open() {
  const CacheOptions& c = run_.options.autocache;
  const bool on = c.mode == AutoCacheMode::kOn;
  if (c.mode == AutoCacheMode::kOff || (!on && !run_.elastic_policy)) return;
  if (!run_.data->epochs) {
    if (!on) return;  // synthetic samples are new every step: nothing to reuse
    throw InputError(
        "--autocache on: the cache keys activations by sample id; --data synthetic draws new "
        "samples every step (use --data digits or digits-tokens)");
  }
  std::vector<int64_t> shape;
  try {
    shape = slot_shape();
  } catch (const InputError& e) {
    if (on) throw;
    if (run_.options.verbose && run_.session->rank() == 0)
      std::printf("AutoCache off: %s\n", e.what());
    return;
  }
  CacheLayout layout;
  layout.samples = run_.data->epochs->samples();
  layout.shape = shape;
  layout.dtype = run_.options.exec.float64 ? at::kDouble : at::kFloat;
  const int local = run_.control.local_rank();
  const std::string job = cache_job_name(run_.control.multi_process(), run_.control.job_key());
  // The machine's first process creates the files; the others open them once it has.
  std::exception_ptr failure;
  for (const auto role : {ActivationStore::Role::kCreate, ActivationStore::Role::kOpen}) {
    const bool mine = (role == ActivationStore::Role::kCreate) == (local == 0);
    try {
      if (mine) {
        store_ = std::make_unique<ActivationStore>(c, job, layout, role, local);
        owner_ = role == ActivationStore::Role::kCreate;
      }
    } catch (...) {
      failure = std::current_exception();
    }
    run_.agree(failure,
               role == ActivationStore::Role::kCreate ? "autocache (creating the files)"
                                                      : "autocache (opening the files)",
               true);
  }
  run_.data->epochs->set_frozen_cache(store_.get());
  if (run_.elastic_policy) {
    run_.elastic_policy->configure_cache(static_cast<long>(layout.samples), {c.memory_budget_bytes},
                                         {});
  }
}

void AutoCache::set(bool on) {
  run_.progress.cache = on && store_ && run_.plan.frozen_layers > 0;
  if (store_) store_->set_boundary(run_.plan.frozen_layers, run_.progress.cache);
}

bool AutoCache::wanted(const Transition& t) const {
  switch (run_.options.autocache.mode) {
    case AutoCacheMode::kOn:
      return t.frozen_layers > 0;
    case AutoCacheMode::kOff:
      return false;
    case AutoCacheMode::kAuto:
      break;
  }
  return t.cache;
}

std::vector<double> AutoCache::take_counts() {
  std::vector<double> v(8, 0.0);
  if (!store_) return v;
  const CacheStats s = store_->take_stats();
  v = {static_cast<double>(s.work.hits),   static_cast<double>(s.work.stale),
       static_cast<double>(s.work.misses), static_cast<double>(s.shared_reads),
       s.work.memory_read_bytes,           s.work.disk_read_bytes,
       s.work.memory_write_bytes,          s.work.disk_write_bytes};
  return v;
}

elastic::CacheCounts cache_counts_from(const double* v) {
  elastic::CacheCounts c;
  c.hits = static_cast<long>(v[0]);
  c.stale = static_cast<long>(v[1]);
  c.misses = static_cast<long>(v[2]);
  c.shared_reads = static_cast<long>(v[3]);
  c.memory_read_bytes = v[4];
  c.disk_read_bytes = v[5];
  c.memory_write_bytes = v[6];
  c.disk_write_bytes = v[7];
  return c;
}

void AutoCache::close() {
  if (!store_) return;
  run_.control.barrier();  // every process is done with the files
  run_.data->epochs->set_frozen_cache(nullptr);
  // The first process removes them; the mappings (and the counts) live on with the trainer.
  if (owner_) store_->remove_files();
}

}  // namespace pipetwin::exec
