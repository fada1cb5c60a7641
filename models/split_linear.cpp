#include "models/split_linear.hpp"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/custom_function.h>

namespace pipetwin::models {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The calling thread's recording (split_linear.hpp, RecordWeightGrads).
struct Recording {
  c10::intrusive_ptr<DeferredWeightGrads> grads;
  int layer = -1;
};
thread_local Recording t_recording;

int64_t bytes_of(const at::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.numel()) * static_cast<int64_t>(t.element_size()) : 0;
}

// The weight half of one linear's backward: what it holds and computes (split_linear.hpp).
struct WeightHalf {
  at::Tensor x, dy;         // the layer's input and its output's gradient, in the compute dtype
  at::Tensor weight, bias;  // the leaves to accumulate into; undefined: not wanted
  at::Tensor grad_weight() const {
    const at::Tensor dy2 = dy.reshape({-1, dy.size(-1)});
    return dy2.t().mm(x.reshape({-1, x.size(-1)})).to(weight.scalar_type());
  }
  at::Tensor grad_bias() const {
    return dy.reshape({-1, dy.size(-1)}).sum(0).to(bias.scalar_type());
  }
  void run() const {
    at::NoGradGuard no_grad;
    if (weight.defined()) accumulate_grad(weight, grad_weight());
    if (bias.defined()) accumulate_grad(bias, grad_bias());
  }
};

struct SplitLinearFunction : public torch::autograd::Function<SplitLinearFunction> {
  // `bias` is an empty placeholder when !has_bias (LibTorch 1.13's custom functions reject
  // undefined tensor arguments).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, bool has_bias,
                            c10::intrusive_ptr<DeferredWeightGrads> grads, int64_t layer) {
    at::Tensor y = at::linear(x, weight, has_bias ? bias : at::Tensor());
    const at::ScalarType compute = y.scalar_type();  // autocast's choice, if any
    ctx->save_for_backward(
        {x.scalar_type() == compute ? x : x.to(compute), weight, has_bias ? bias : at::Tensor()});
    ctx->saved_data["grads"] = at::IValue::make_capsule(std::move(grads));
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["has_bias"] = has_bias;
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &bias = saved[2];
    const at::Tensor dy = grad_outputs[0];
    const auto x_dtype = static_cast<at::ScalarType>(ctx->saved_data["x_dtype"].toInt());
    at::Tensor dx;
    if (ctx->needs_input_grad(0)) dx = at::matmul(dy, weight.to(dy.scalar_type())).to(x_dtype);
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    WeightHalf half{x.to(dy.scalar_type()), dy, ctx->needs_input_grad(1) ? weight : at::Tensor(),
                    has_bias && ctx->needs_input_grad(2) ? bias : at::Tensor()};
    variable_list out{dx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    if (!half.weight.defined() && !half.bias.defined()) return out;
    const auto grads = c10::static_intrusive_pointer_cast<DeferredWeightGrads>(
        ctx->saved_data["grads"].toCapsule());
    if (grads->deferring()) {
      const int64_t bytes = bytes_of(half.x) + bytes_of(half.dy);
      grads->push(
          static_cast<int>(ctx->saved_data["layer"].toInt()),
          [half = std::move(half)] { half.run(); }, bytes);
      return out;
    }
    // Not deferring: autograd accumulates them, as it does at::linear's.
    if (half.weight.defined()) out[1] = half.grad_weight();
    if (half.bias.defined()) out[2] = half.grad_bias();
    return out;
  }
};

}  // namespace

void DeferredWeightGrads::push(int layer, std::function<void()> work, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.push_back({layer, std::move(work), bytes});
}

int DeferredWeightGrads::run(int layer) {
  std::vector<Work> mine;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto split = std::stable_partition(waiting_.begin(), waiting_.end(), [layer](const Work& w) {
      return layer >= 0 && w.layer != layer;
    });
    mine.assign(std::make_move_iterator(split), std::make_move_iterator(waiting_.end()));
    waiting_.erase(split, waiting_.end());
  }
  for (const Work& w : mine) w.run();
  return static_cast<int>(mine.size());
}

int DeferredWeightGrads::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(waiting_.size());
}

int64_t DeferredWeightGrads::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t sum = 0;
  for (const Work& w : waiting_) sum += w.bytes;
  return sum;
}

std::vector<int> DeferredWeightGrads::layers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<int> out;
  for (const Work& w : waiting_) out.push_back(w.layer);
  std::sort(out.rbegin(), out.rend());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void DeferredWeightGrads::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  waiting_.clear();
}

RecordWeightGrads::RecordWeightGrads(c10::intrusive_ptr<DeferredWeightGrads> grads)
    : saved_(std::exchange(t_recording.grads, std::move(grads))), saved_layer_(t_recording.layer) {}

RecordWeightGrads::~RecordWeightGrads() {
  t_recording.grads = std::move(saved_);
  t_recording.layer = saved_layer_;
}

void RecordWeightGrads::set_layer(int layer) {
  if (t_recording.grads) t_recording.layer = layer;
}

WeightGradBinding current_weight_grad_binding() {
  return {t_recording.grads, t_recording.layer};
}

void accumulate_grad(const at::Tensor& leaf, const at::Tensor& g) {
  at::NoGradGuard no_grad;
  if (leaf.grad().defined()) {
    leaf.mutable_grad().add_(g);
  } else {
    leaf.mutable_grad() = g.detach().clone(at::MemoryFormat::Contiguous);
  }
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!t_recording.grads || !at::GradMode::is_enabled() || !weight.requires_grad())
    return at::linear(x, weight, bias);
  const bool has_bias = bias.defined();
  return SplitLinearFunction::apply(x, weight, has_bias ? bias : at::empty({0}, weight.options()),
                                    has_bias, t_recording.grads,
                                    static_cast<int64_t>(t_recording.layer));
}

}  // namespace pipetwin::models
