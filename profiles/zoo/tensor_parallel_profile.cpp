// shard_profile (profiles/zoo/tensor_parallel.hpp): a profile of the whole model made the profile
// of one tensor-parallel shard by the ratios of the priced shard to the priced whole.
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "profiles/zoo/tensor_parallel.hpp"

namespace pipetwin::zoo {

namespace {

double ratio(double whole, double shard) {
  return whole > 0 ? shard / whole : 1.0;
}

const LayerTiming& timing_at(const LayerProfile& layer, int micro_batch) {
  for (const auto& t : layer.timings) {
    if (t.micro_batch == micro_batch) return t;
  }
  throw std::logic_error(fmt::format("tensor-parallel pricing: layer \"{}\" has no micro-batch {}",
                                     layer.name, micro_batch));
}

// The attention core's share of a shard's attention sub-layer forward (by FLOPs): what selective
// recomputation runs again in the backward.
double core_share(const ZooLayer& shard) {
  if (shard.kind != "attention" || shard.forward_flops <= 0) return 0;
  for (const auto& op : shard.ops) {
    if (op.kind == OpKind::attention) {
      const double core = 4.0 * static_cast<double>(op.heads * op.seq * op.kv_seq * op.head_dim);
      return core / shard.forward_flops;
    }
  }
  return 0;
}

void scale_times(LayerTiming& t, const LayerTiming& whole, const LayerTiming& shard,
                 double recompute_core) {
  const double f = ratio(whole.forward_s, shard.forward_s);
  const double b = ratio(whole.backward_s, shard.backward_s);
  t.forward_s *= f;
  t.recompute_s *= f;
  t.backward_s *= b;
  if (t.backward_weight_s >= 0) {
    t.backward_weight_s *= ratio(whole.backward_weight_s, shard.backward_weight_s);
  }
  for (double& c : t.cold_forward_s) c *= f;
  for (double& c : t.cold_backward_s) c *= b;
  t.backward_s += recompute_core * t.forward_s;
}

void scale_bytes(LayerProfile& l, const LayerProfile& whole, const LayerProfile& shard) {
  const double saved = ratio(whole.saved_bytes_per_sample, shard.saved_bytes_per_sample);
  l.output_bytes_per_sample *= ratio(whole.output_bytes_per_sample, shard.output_bytes_per_sample);
  l.saved_bytes_per_sample *= saved;
  l.backward_bytes_per_sample *= saved;
  l.forward_workspace_bytes_per_sample *= saved;
  l.backward_workspace_bytes_per_sample *= saved;
  const double params = ratio(whole.param_bytes, shard.param_bytes);
  l.param_bytes *= params;
  l.optimizer_bytes *= params;
  const double step =
      whole.optimizer_step_s > 0 ? ratio(whole.optimizer_step_s, shard.optimizer_step_s) : params;
  l.optimizer_step_s *= step;
  l.optimizer_new_version_s *= step;
}

}  // namespace

Profile shard_profile(const Profile& whole, const ZooModel& model, const TensorParallel& tp,
                      const PriceModel& price, const std::string& origin) {
  if (whole.tensor_parallel != TensorParallel{}) {
    throw InputError(fmt::format("{}: the profile of {} is already a tensor-parallel shard ({})",
                                 origin, whole.model, describe(whole.tensor_parallel)));
  }
  if (tp == TensorParallel{}) return whole;
  if (whole.num_layers() != model.num_layers()) {
    throw InputError(fmt::format("{}: the profile of {} has {} layers, the model {} has {}", origin,
                                 whole.model, whole.num_layers(), model.name, model.num_layers()));
  }
  const ZooModel shard = shard_model(model, tp, origin);
  std::set<int> sizes;
  for (const auto& l : whole.layers) {
    for (const auto& t : l.timings) sizes.insert(t.micro_batch);
  }
  const std::vector<int> micro_batches(sizes.begin(), sizes.end());
  const Profile priced_whole = price(model, micro_batches);
  const Profile priced_shard = price(shard, micro_batches);
  const double elem = dtype_bytes(whole.dtype, "profile: dtype");
  Profile p = whole;
  for (int i = 0; i < p.num_layers(); ++i) {
    const auto li = static_cast<size_t>(i);
    LayerProfile& l = p.layers[li];
    const LayerProfile& pw = priced_whole.layers[li];
    const LayerProfile& ps = priced_shard.layers[li];
    const double recompute_core = tp.selective_recompute ? core_share(shard.layers[li]) : 0.0;
    for (auto& t : l.timings) {
      scale_times(t, timing_at(pw, t.micro_batch), timing_at(ps, t.micro_batch), recompute_core);
    }
    scale_bytes(l, pw, ps);
    const LayerCollectives c = layer_collectives(model, i, tp, elem);
    l.tp_forward = c.forward;
    l.tp_backward = c.backward;
  }
  for (auto& e : p.edges) {
    if (e.from < 0 || e.from >= p.num_layers()) continue;
    const auto from = static_cast<size_t>(e.from);
    e.bytes_per_sample *= ratio(priced_whole.layers[from].output_bytes_per_sample,
                                priced_shard.layers[from].output_bytes_per_sample);
  }
  p.tensor_parallel = tp;
  p.notes +=
      (p.notes.empty() ? "" : "; ") +
      fmt::format("tensor-parallel shard ({}) by the ratios of the priced shard", describe(tp));
  return p;
}

}  // namespace pipetwin::zoo
