#include "exec/runtime/stage.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>

#include "exec/runtime/autocast.hpp"
#include "exec/runtime/stage_internal.hpp"
#include "exec/runtime/stage_io.hpp"

#include "models/layers.hpp"
#include "models/split_linear.hpp"

namespace pipetwin::exec {

StageRuntime::StageRuntime(StageSpec spec, LayerFactory factory, OptimizerConfig optimizer,
                           LossFn loss)
    : spec_(std::move(spec)),
      factory_(std::move(factory)),
      optimizer_(std::move(optimizer)),
      loss_(std::move(loss)) {
  auto first = std::make_shared<Slot>();
  first->layers = factory_();
  if (first->layers.size() != spec_.layers.size()) {
    throw std::logic_error(fmt::format("stage {}: factory built {} layers, expected {}",
                                       spec_.stage, first->layers.size(), spec_.layers.size()));
  }
  at::NoGradGuard no_grad;
  size_t frozen_params = 0;
  for (size_t l = 0; l < first->layers.size(); ++l) {
    const bool frozen = spec_.layers[l] < spec_.frozen_layers;
    if (frozen) ++frozen_;
    for (auto& p : first->layers[l].ptr()->parameters()) {
      first->params.push_back(p);
      param_layer_.push_back(spec_.layers[l]);
      param_index_.push_back(static_cast<int>(l));
      grads_.push_back(at::zeros_like(p));
      if (frozen) ++frozen_params;
    }
  }
  optimizer_.freeze_prefix(frozen_params);
  if (spec_.loss_scaling) scaler_.emplace(spec_.loss_scaler);
  wire();
  for (size_t i = 0; i < first->params.size(); ++i) first->params[i].mutable_grad() = grads_[i];
  slots_[0] = std::move(first);
}

StageRuntime::~StageRuntime() = default;

std::shared_ptr<StageRuntime::Slot> StageRuntime::new_slot() {
  std::shared_ptr<Slot> s;
  if (!pool_.empty()) {
    s = pool_.back();
    pool_.pop_back();
    return s;
  }
  s = std::make_shared<Slot>();
  s->layers = factory_();
  for (auto& l : s->layers) {
    for (auto& p : l.ptr()->parameters()) s->params.push_back(p);
  }
  for (size_t i = 0; i < s->params.size(); ++i) s->params[i].mutable_grad() = grads_[i];
  return s;
}

StageRuntime::Slot& StageRuntime::slot_of(int version, const char* who, int mb) {
  auto it = slots_.find(version);
  if (it == slots_.end()) {
    throw std::runtime_error(
        fmt::format("stage {}: {} of micro-batch {} reads weight version {}, "
                    "which the stage no longer holds (current {})",
                    spec_.stage, who, mb, version, current_));
  }
  return *it->second;
}

void StageRuntime::wire() {
  auto& sp = spec_;
  if (sp.skip_from.empty()) sp.skip_from.assign(sp.layers.size(), -1);
  if (sp.inputs.empty() && !sp.layers.empty()) sp.inputs = {sp.layers.front() - 1};
  if (sp.outputs.empty() && !sp.last && !sp.layers.empty()) sp.outputs = {sp.layers.back()};
  if (sp.skip_from.size() != sp.layers.size()) {
    throw std::logic_error(fmt::format("stage {}: {} skip sources for {} layers", sp.stage,
                                       sp.skip_from.size(), sp.layers.size()));
  }
  const size_t I = sp.inputs.size(), n = sp.layers.size();
  if (frozen_ > 0 && I != 1) {
    throw std::logic_error(
        fmt::format("stage {}: a frozen prefix needs one input ({} given)", sp.stage, I));
  }
  main_src_.assign(n, -1);
  skip_src_.assign(n, -1);
  std::vector<int> last_read(I + n, -1);
  for (size_t j = 0; j < n; ++j) {
    main_src_[j] = value_of(sp.layers[j] - 1);
    if (sp.skip_from[j] >= 0) skip_src_[j] = value_of(sp.skip_from[j]);
    for (int v : {main_src_[j], skip_src_[j]})
      if (v >= 0) last_read[static_cast<size_t>(v)] = static_cast<int>(j);
  }
  out_value_.clear();
  for (int l : sp.outputs) out_value_.push_back(value_of(l));
  drop_after_.assign(n, {});
  for (size_t v = 0; v + 1 < I + n; ++v) {  // the last layer's value is the stage's result
    const bool returned = std::find(out_value_.begin(), out_value_.end(), v) != out_value_.end();
    if (last_read[v] >= 0 && !returned)
      drop_after_[static_cast<size_t>(last_read[v])].push_back(static_cast<int>(v));
  }
}

int StageRuntime::value_of(int producer) const {
  const auto& sp = spec_;
  const auto pos = std::find(sp.layers.begin(), sp.layers.end(), producer);
  if (pos != sp.layers.end())
    return static_cast<int>(sp.inputs.size() + static_cast<size_t>(pos - sp.layers.begin()));
  const auto in = std::find(sp.inputs.begin(), sp.inputs.end(), producer);
  if (in == sp.inputs.end()) {
    throw std::logic_error(fmt::format(
        "stage {}: reads the output of {}, which it neither holds "
        "nor receives",
        sp.stage,
        producer < 0 ? std::string("the model input") : fmt::format("layer {}", producer)));
  }
  return static_cast<int>(in - sp.inputs.begin());
}

at::Tensor StageRuntime::call_layer(Slot& slot, size_t j, const at::Tensor& x,
                                    const at::Tensor& skip) {
  models::RecordWeightGrads::set_layer(spec_.layers[j]);  // tags deferred work (if recording)
  return skip_src_[j] < 0 ? slot.layers[j].forward(x) : slot.layers[j].forward(x, skip);
}

// Layers [from, n) over the values v (inputs, then layer outputs), dropping what is dead.
void StageRuntime::forward_values(Slot& slot, std::vector<at::Tensor>& v, size_t from) {
  const size_t I = spec_.inputs.size();
  for (size_t j = from; j < slot.layers.size(); ++j) {
    const at::Tensor none;
    v[I + j] = call_layer(slot, j, v[static_cast<size_t>(main_src_[j])],
                          skip_src_[j] < 0 ? none : v[static_cast<size_t>(skip_src_[j])]);
    for (int d : drop_after_[j]) v[static_cast<size_t>(d)] = at::Tensor();
  }
}

void StageRuntime::run(Slot& slot, MicroBatch& m, bool with_graph, bool count_loss) {
  const size_t I = m.inputs.size(), f = static_cast<size_t>(frozen_), n = slot.layers.size();
  if (f > 0 && !m.past_frozen) {
    // Keep the frozen prefix's output: a recompute starts from it (frozen layers run once).
    m.inputs[0] = run_frozen(slot, m.inputs[0]);
    m.past_frozen = true;
  }
  std::vector<at::Tensor> v(I + n);
  for (size_t k = 0; k < I; ++k) v[k] = m.inputs[k];
  if (f > 0) v[I + f - 1] = m.inputs[0];
  const bool graph = with_graph && f < n;
  const AutocastGuard autocast(spec_.autocast_device, spec_.autocast,
                               spec_.autocast != at::ScalarType::Undefined);
  // A split backward's forward: the linears bind their backwards to the micro-batch's entry.
  const models::RecordWeightGrads record(graph && m.split
                                             ? wgrads_.record(m.micro_batch)
                                             : c10::intrusive_ptr<models::DeferredWeightGrads>());
  std::unique_ptr<at::NoGradGuard> no_grad;
  if (!graph) {
    no_grad = std::make_unique<at::NoGradGuard>();
  } else {
    m.leaves.assign(I, at::Tensor());
    for (size_t k = 0; k < I; ++k) {
      const bool needs_grad =
          spec_.inputs[k] != kModelInput && f == 0 && m.inputs[k].is_floating_point();
      if (needs_grad) v[k] = m.leaves[k] = m.inputs[k].detach().requires_grad_(true);
    }
    m.xs.clear();
    m.ys.clear();
  }
  if (graph && spec_.per_layer_backward) {
    for (size_t j = f; j < n; ++j) {
      // Each layer reads its inputs through leaves of its own, so its backward can run alone.
      std::array<at::Tensor, 2> leaves;
      for (int i : {0, 1}) {
        const int src = i == 0 ? main_src_[j] : skip_src_[j];
        if (src < 0) continue;
        const at::Tensor& x = v[static_cast<size_t>(src)];
        leaves[static_cast<size_t>(i)] = x.detach().requires_grad_(x.requires_grad());
      }
      v[I + j] = call_layer(slot, j, leaves[0], leaves[1]);
      m.xs.push_back(leaves);
      m.ys.push_back(v[I + j]);
      for (int d : drop_after_[j]) v[static_cast<size_t>(d)] = at::Tensor();
    }
  } else {
    forward_values(slot, v, f);
  }
  m.outs.clear();
  for (int o : out_value_) m.outs.push_back(v[static_cast<size_t>(o)]);
  m.loss = at::Tensor();
  if (spec_.last) {
    // Inside the autocast region: the policy casts reduced logits to float32 (stage.hpp).
    const at::Tensor per_sample = loss_(v[I + n - 1], m.target);
    if (count_loss) {
      // Kept on the device, read once the window's work is done (take_loss_sum).
      const at::Tensor sum = per_sample.detach().sum().to(at::kDouble);
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + sum : sum;
    }
    m.loss = per_sample.sum() * spec_.loss_scale;
    if (scaler_) m.loss = m.loss * scaler_->scale();
  }
}

std::vector<at::Tensor> StageRuntime::forward(int mb, int version, std::vector<at::Tensor> inputs,
                                              const ForwardKeep& keep, const at::Tensor& target,
                                              bool past_frozen) {
  if (version != current_) {
    throw std::runtime_error(
        fmt::format("stage {}: forward of micro-batch {} asks for weight "
                    "version {} but the current version is {}",
                    spec_.stage, mb, version, current_));
  }
  if (inputs.size() != spec_.inputs.size()) {
    throw std::logic_error(
        fmt::format("stage {}: forward of micro-batch {} with {} inputs, the "
                    "stage reads {}",
                    spec_.stage, mb, inputs.size(), spec_.inputs.size()));
  }
  if (keep.graph && keep.pinned_version != version) {
    throw std::logic_error(
        fmt::format("stage {}: forward of micro-batch {} keeps a graph on version {} but pins {}",
                    spec_.stage, mb, version, keep.pinned_version));
  }
  Slot& slot = slot_of(version, "forward", mb);
  last_used_ = slot.version;
  auto m = std::make_unique<MicroBatch>();
  m->micro_batch = mb;
  m->split = keep.split;
  m->received = inputs;
  m->inputs = std::move(inputs);
  m->past_frozen = past_frozen;
  m->target = target;
  const models::DropoutKey key(models::micro_batch_dropout_key(
      spec_.dropout_seed, spec_.replica, static_cast<int>(micro_batch_offset_ + mb)));
  run(slot, *m, keep.graph, /*count_loss=*/true);
  std::vector<at::Tensor> outs;
  for (const auto& o : m->outs) outs.push_back(o.detach());
  if (keep.graph) {
    m->graph_version = version;
  } else {
    m->outs.clear();
    m->loss = at::Tensor();
  }
  if (keep.pinned_version >= 0) pin(keep.pinned_version, "forward", mb);
  m->pinned_version = keep.pinned_version;
  in_flight_[mb] = std::move(m);
  return outs;
}

void StageRuntime::recompute(int mb, int version) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end()) {
    throw std::runtime_error(
        fmt::format("stage {}: recompute of micro-batch {} before its forward", spec_.stage, mb));
  }
  MicroBatch& m = *it->second;
  Slot& slot = slot_of(version, "recompute", mb);
  last_used_ = slot.version;
  const models::DropoutKey key(models::micro_batch_dropout_key(
      spec_.dropout_seed, spec_.replica, static_cast<int>(micro_batch_offset_ + mb)));
  run(slot, m, true, /*count_loss=*/false);
  m.graph_version = version;
  // The new pin before the old one goes: a stash the forward pinned for this recompute is the
  // same version, and must not be freed in between.
  pin(version, "recompute", mb);
  if (m.pinned_version >= 0) release(m.pinned_version);
  m.pinned_version = version;
}

void StageRuntime::pin(int version, const char* who, int mb) {
  ++slot_of(version, who, mb).refs;
}

void StageRuntime::release(int version) {
  auto it = slots_.find(version);
  if (it == slots_.end()) return;
  if (--it->second->refs == 0 && version != current_) {
    pool_.push_back(it->second);
    slots_.erase(it);
  }
}

bool StageRuntime::optimizer_step(int new_version, const std::function<bool(bool)>& agree) {
  if (new_version != current_ + 1) {
    throw std::runtime_error(
        fmt::format("stage {}: optimizer step to version {} but the stage is at "
                    "version {}",
                    spec_.stage, new_version, current_));
  }
  bool skip = false;
  if (scaler_) {
    skip = scaler_->unscale(grads_);
    if (agree) skip = agree(skip);
    scaler_->update(skip);
  }
  if (spec_.track_gradient_norms) record_gradient_norms();
  auto cur = slots_.at(current_);
  if (skip) {
    skip_step(*cur, new_version);
    return false;
  }
  // The simulator makes the same choice from the schedule (core/schedule/weight_versions.hpp).
  if (cur->refs == 0) {
    optimizer_.step(cur->params, grads_, cur->params);  // nothing else reads them: in place
    slots_.erase(current_);
    cur->version = new_version;
    slots_[new_version] = cur;
  } else {
    auto next = new_slot();  // the old weights stay for the micro-batches still using them
    optimizer_.step(cur->params, grads_, next->params);
    next->version = new_version;
    slots_[new_version] = next;
  }
  {
    at::NoGradGuard no_grad;
    for (auto& g : grads_) g.zero_();
  }
  current_ = new_version;
  return true;
}

void StageRuntime::begin_window(int64_t first_micro_batch) {
  if (!in_flight_.empty() || slots_.size() != 1 || slots_.begin()->first != current_) {
    throw std::logic_error(fmt::format(
        "stage {}: begin_window with {} micro-batches in flight and {} weight versions alive",
        spec_.stage, in_flight_.size(), slots_.size()));
  }
  auto slot = slots_.begin()->second;
  slots_.clear();
  slot->version = 0;
  slots_[0] = std::move(slot);
  current_ = 0;
  last_used_ = 0;
  micro_batch_offset_ = first_micro_batch;
}

std::vector<at::Tensor> StageRuntime::infer(const std::vector<at::Tensor>& inputs) {
  Slot& slot = *slots_.at(current_);
  if (inputs.size() != spec_.inputs.size()) {
    throw std::logic_error(fmt::format("stage {}: infer() of {} inputs, the stage reads {}",
                                       spec_.stage, inputs.size(), spec_.inputs.size()));
  }
  at::NoGradGuard no_grad;
  for (auto& l : slot.layers) l.ptr()->eval();
  std::vector<at::Tensor> out;
  try {
    const AutocastGuard autocast(spec_.autocast_device, spec_.autocast,
                                 spec_.autocast != at::ScalarType::Undefined);
    std::vector<at::Tensor> v = inputs;
    v.resize(inputs.size() + slot.layers.size());
    forward_values(slot, v, 0);
    for (int o : out_value_) out.push_back(v[static_cast<size_t>(o)]);
    if (spec_.last) out.push_back(float32_if_reduced(v.back()));
  } catch (...) {
    for (auto& l : slot.layers) l.ptr()->train();
    throw;
  }
  for (auto& l : slot.layers) l.ptr()->train();
  return out;
}

at::Tensor StageRuntime::take_loss_sum() {
  at::Tensor s = loss_sum_.defined() ? loss_sum_ : at::zeros({}, at::kDouble);
  loss_sum_ = at::Tensor();
  return s;
}

int StageRuntime::live_versions() const {
  return static_cast<int>(slots_.size());
}

StageHolding StageRuntime::holding() const {
  StageHolding h;
  for (const auto& [mb, m] : in_flight_)
    h.micro_batches.push_back({mb, m->graph_version, m->pinned_version});
  for (const auto& [v, slot] : slots_) h.versions.push_back({v, v == current_, slot->refs});
  return h;
}

at::Tensor StageRuntime::run_frozen(Slot& slot, at::Tensor x, int from, int to) {
  if (to < 0) to = frozen_;
  if (from < 0 || from > to || to > frozen_) {
    throw std::logic_error(fmt::format("stage {}: frozen layers [{}, {}) of the {} frozen",
                                       spec_.stage, from, to, frozen_));
  }
  at::NoGradGuard no_grad;
  const AutocastGuard autocast(spec_.autocast_device, spec_.autocast,
                               spec_.autocast != at::ScalarType::Undefined);
  frozen_passes_.resize(static_cast<size_t>(frozen_), 0);
  for (int l = from; l < to; ++l) {
    auto& layer = slot.layers[static_cast<size_t>(l)];
    layer.ptr()->eval();  // infer() puts every layer back in training mode
    frozen_passes_[static_cast<size_t>(l)] += x.size(0);
    x = layer.forward(x);
  }
  // F_frozen's output in float32 also under autocast: what AutoCache stores and reads back (its
  // slots are of the weights' dtype) is then what a miss computes, bit for bit.
  return float32_if_reduced(x);
}

at::Tensor StageRuntime::frozen_forward(const at::Tensor& input, int from, int to) {
  return run_frozen(*slots_.at(current_), input, from, to);
}

void StageRuntime::record_gradient_norms() {
  std::vector<double> sq(spec_.layers.size(), 0.0);
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> norms;
  std::vector<size_t> which;
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (param_layer_[i] < spec_.frozen_layers) continue;
    norms.push_back(grads_[i].norm().to(at::kDouble));
    which.push_back(i);
  }
  if (!norms.empty()) {
    const at::Tensor host = at::stack(norms).cpu();  // one read of the device
    const auto n = host.accessor<double, 1>();
    for (size_t k = 0; k < which.size(); ++k)
      sq[static_cast<size_t>(param_index_[which[k]])] +=
          n[static_cast<int64_t>(k)] * n[static_cast<int64_t>(k)];
  }
  norms_.push_back(std::move(sq));
}

std::vector<std::vector<double>> StageRuntime::take_gradient_norms() {
  return std::exchange(norms_, {});
}

}  // namespace pipetwin::exec
