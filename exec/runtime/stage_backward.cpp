// StageRuntime's backward half: back-propagation of a micro-batch (whole stage or layer by
// layer, whole or split in its input and weight halves), the warm-up, and an optimizer step
// skipped by the loss scaler (stage.hpp).
#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>

#include "exec/runtime/stage.hpp"
#include "exec/runtime/stage_internal.hpp"
#include "exec/runtime/stage_io.hpp"

namespace pipetwin::exec {

StageRuntime::MicroBatch& StageRuntime::with_graph(int mb, int version, size_t grad_outputs,
                                                   const char* who) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end() || it->second->graph_version < 0) {
    throw std::runtime_error(
        fmt::format("stage {}: {} of micro-batch {} without a forward "
                    "graph (missing forward or recompute)",
                    spec_.stage, who, mb));
  }
  MicroBatch& m = *it->second;
  if (wgrads_.awaits(mb)) {
    throw std::runtime_error(fmt::format("stage {}: {} of micro-batch {} after its backward-input",
                                         spec_.stage, who, mb));
  }
  if (m.graph_version != version) {
    throw std::runtime_error(
        fmt::format("stage {}: {} of micro-batch {} asks for weight "
                    "version {} but its graph was built on version {}",
                    spec_.stage, who, mb, version, m.graph_version));
  }
  if (grad_outputs != spec_.outputs.size()) {
    throw std::logic_error(
        fmt::format("stage {}: {} of micro-batch {} with {} output "
                    "gradients, the stage returns {} outputs",
                    spec_.stage, who, mb, grad_outputs, spec_.outputs.size()));
  }
  last_used_ = slots_.at(m.graph_version)->version;
  return m;
}

// The micro-batch's backward is over: its pin goes, and so does it.
void StageRuntime::finish_backward(int mb) {
  auto it = in_flight_.find(mb);
  if (it->second->pinned_version >= 0) release(it->second->pinned_version);
  wgrads_.drop(mb);
  in_flight_.erase(it);
}

std::vector<at::Tensor> StageRuntime::backward(int mb, int version,
                                               const std::vector<at::Tensor>& grad_outputs,
                                               const std::function<void(int)>& on_layer_done) {
  MicroBatch& m = with_graph(mb, version, grad_outputs.size(), "backward");
  // A micro-batch recorded for a split backward but backwarded whole computes everything now:
  // its entry is not deferring (models/split_linear.hpp).
  std::vector<at::Tensor> grads = backprop(m, grad_outputs, on_layer_done);
  finish_backward(mb);
  return grads;
}

std::vector<at::Tensor> StageRuntime::backward_input(int mb, int version,
                                                     const std::vector<at::Tensor>& grad_outputs) {
  MicroBatch& m = with_graph(mb, version, grad_outputs.size(), "backward-input");
  if (!m.split || !wgrads_.recorded(mb)) {
    throw std::logic_error(fmt::format(
        "stage {}: backward-input of micro-batch {} whose forward was not told its backward is "
        "split",
        spec_.stage, mb));
  }
  std::vector<at::Tensor> grads =
      wgrads_.input_half(mb, [&] { return backprop(m, grad_outputs, nullptr); });
  drop_graph(m);
  return grads;
}

void StageRuntime::backward_weight(int mb, int version,
                                   const std::function<void(int)>& on_layer_done) {
  auto it = in_flight_.find(mb);
  if (it == in_flight_.end() || !wgrads_.awaits(mb)) {
    throw std::runtime_error(fmt::format(
        "stage {}: backward-weight of micro-batch {} before its backward-input", spec_.stage, mb));
  }
  const MicroBatch& m = *it->second;
  if (m.graph_version != version) {
    throw std::runtime_error(
        fmt::format("stage {}: backward-weight of micro-batch {} asks for weight version {} but "
                    "its backward-input read version {}",
                    spec_.stage, mb, version, m.graph_version));
  }
  last_used_ = slots_.at(m.graph_version)->version;
  // The trained layers from the last down, as backprop reports them; then the frozen prefix,
  // which has no gradient to wait for.
  const size_t f = static_cast<size_t>(frozen_);
  std::vector<int> layers;
  for (size_t l = spec_.layers.size(); l-- > f;) layers.push_back(spec_.layers[l]);
  wgrads_.weight_half(mb, layers, on_layer_done);
  if (on_layer_done) {
    for (size_t l = f; l-- > 0;) on_layer_done(spec_.layers[l]);
  }
  finish_backward(mb);
}

// After backward_input: the autograd graph and the tensors kept for it go; the weight halves
// hold what backward_weight needs (weight_grad_store.hpp). The micro-batch stays in flight, its
// graph version and pin with it, until backward_weight.
void StageRuntime::drop_graph(MicroBatch& m) {
  m.inputs.clear();
  m.received.clear();
  m.target = at::Tensor();
  m.leaves.clear();
  m.xs.clear();
  m.ys.clear();
  m.outs.clear();
  m.loss = at::Tensor();
}

std::vector<at::Tensor> StageRuntime::backprop(MicroBatch& m,
                                               const std::vector<at::Tensor>& grad_outputs,
                                               const std::function<void(int)>& on_layer_done) {
  const size_t f = static_cast<size_t>(frozen_), I = m.inputs.size();
  std::vector<at::Tensor> grads(I);
  if (spec_.per_layer_backward && !m.ys.empty()) {
    grads = backprop_by_layer(m, grad_outputs, on_layer_done);
  } else {
    std::vector<at::Tensor> roots, seeds;
    if (m.loss.defined() && m.loss.requires_grad()) {
      roots.push_back(m.loss);
      seeds.push_back(at::ones_like(m.loss));
    }
    for (size_t k = 0; k < m.outs.size(); ++k) {
      if (grad_outputs[k].defined() && m.outs[k].requires_grad()) {
        roots.push_back(m.outs[k]);
        // Under autocast a gradient arrives in the dtype its activation crossed in (stage.hpp).
        seeds.push_back(grad_outputs[k].to(m.outs[k].scalar_type()));
      }
    }
    // Nothing requires a gradient when every layer of the stage is frozen.
    if (!roots.empty()) torch::autograd::backward(roots, seeds);
    if (on_layer_done) {
      for (size_t l = spec_.layers.size(); l-- > f;) on_layer_done(spec_.layers[l]);
    }
    for (size_t k = 0; k < I && k < m.leaves.size(); ++k) {
      if (m.leaves[k].defined() && m.leaves[k].requires_grad()) grads[k] = m.leaves[k].grad();
    }
  }
  if (on_layer_done) {
    for (size_t l = f; l-- > 0;) on_layer_done(spec_.layers[l]);  // frozen: no gradient to wait for
  }
  // Below a frozen prefix nothing trains, and an input no gradient reached gets zeros: the
  // upstream stage's schedule still receives its gradient.
  for (size_t k = 0; k < I; ++k) {
    if (!grads[k].defined() && spec_.inputs[k] != kModelInput)
      grads[k] = at::zeros_like(m.received[k]);
  }
  return grads;
}

std::vector<at::Tensor> StageRuntime::backprop_by_layer(
    MicroBatch& m, const std::vector<at::Tensor>& grad_outputs,
    const std::function<void(int)>& on_layer_done) {
  // Layer by layer from the last, each reporting when its gradients are complete (the all-reduce
  // of its bucket may start). A value's gradient sums what its readers send back.
  const size_t f = static_cast<size_t>(frozen_), I = m.inputs.size(), n = spec_.layers.size();
  std::vector<at::Tensor> g(I + n);
  auto add = [&g](int value, const at::Tensor& t) {
    at::Tensor& acc = g[static_cast<size_t>(value)];
    acc = acc.defined() ? acc + t : t;
  };
  for (size_t k = 0; k < out_value_.size(); ++k) {
    if (grad_outputs[k].defined()) add(out_value_[k], grad_outputs[k]);
  }
  for (size_t j = n; j-- > f;) {
    const size_t i = j - f;  // index into xs / ys
    std::vector<at::Tensor> roots, seeds;
    if (j + 1 == n && m.loss.defined() && m.loss.requires_grad()) {
      roots.push_back(m.loss);
      seeds.push_back(at::ones_like(m.loss));
    }
    if (g[I + j].defined() && m.ys[i].requires_grad()) {
      roots.push_back(m.ys[i]);
      seeds.push_back(g[I + j].to(m.ys[i].scalar_type()));
    }
    if (!roots.empty()) torch::autograd::backward(roots, seeds);
    for (int side : {0, 1}) {
      const at::Tensor& leaf = m.xs[i][static_cast<size_t>(side)];
      const int src = side == 0 ? main_src_[j] : skip_src_[j];
      if (leaf.defined() && leaf.requires_grad() && leaf.grad().defined()) add(src, leaf.grad());
    }
    if (on_layer_done) on_layer_done(spec_.layers[j]);
  }
  return std::vector<at::Tensor>(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(I));
}

void StageRuntime::warm_up(const std::vector<at::Tensor>& inputs, const at::Tensor& target,
                           int graphs, bool split) {
  // Hold `graphs` graphs at once, as the run will: the allocator grows to the run's peak here
  // rather than during the first timed iterations (page faults on fresh memory). The warm-up
  // leaves no trace: BatchNorm statistics are put back, gradients and the loss zeroed.
  std::vector<at::Tensor> saved_buffers;
  for (const auto& b : buffers()) saved_buffers.push_back(b.detach().clone());
  std::vector<MicroBatch> ms(static_cast<size_t>(std::max(1, graphs)));
  for (size_t i = 0; i < ms.size(); ++i) {
    MicroBatch& m = ms[i];
    m.inputs = inputs;
    m.received = inputs;
    m.target = target;
    m.split = split;
    m.micro_batch = -1 - static_cast<int>(i);  // no schedule's micro-batch
    run(*slots_.at(current_), m, true, /*count_loss=*/false);
  }
  std::vector<int> layers;  // the trained ones, from the last (backward_weight)
  for (size_t l = spec_.layers.size(); l-- > static_cast<size_t>(frozen_);)
    layers.push_back(spec_.layers[l]);
  for (size_t i = ms.size(); i-- > 0;) {
    std::vector<at::Tensor> ones;
    for (const auto& o : ms[i].outs) ones.push_back(at::ones_like(o));
    if (!split) {
      backprop(ms[i], ones, nullptr);
      continue;
    }
    wgrads_.input_half(ms[i].micro_batch, [&] { return backprop(ms[i], ones, nullptr); });
    drop_graph(ms[i]);
    wgrads_.weight_half(ms[i].micro_batch, layers, nullptr);
  }
  at::NoGradGuard no_grad;
  for (auto& g : grads_) g.zero_();
  const auto live = buffers();
  for (size_t i = 0; i < live.size(); ++i) live[i].copy_(saved_buffers[i]);
  loss_sum_ = at::Tensor();
}

// A step that overflowed (GradScaler skips optimizer.step()): version new_version holds the same
// weights, the optimizer state stays, the gradients are dropped.
void StageRuntime::skip_step(Slot& cur, int new_version) {
  at::NoGradGuard no_grad;
  auto held = slots_.at(current_);
  if (cur.refs == 0) {
    slots_.erase(current_);
    held->version = new_version;
    slots_[new_version] = held;
  } else {
    auto next = new_slot();
    for (size_t i = 0; i < next->params.size(); ++i) next->params[i].copy_(cur.params[i]);
    next->version = new_version;
    slots_[new_version] = next;
  }
  for (auto& g : grads_) g.zero_();
  current_ = new_version;
}

}  // namespace pipetwin::exec
