#include "models/synthetic.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/cost_model.hpp"
#include "profiles/synthetic.hpp"
#include "models/layers.hpp"
#include "models/split_linear.hpp"

namespace pipetwin::models {

namespace {

using Clock = std::chrono::steady_clock;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

thread_local bool t_recompute = false;

void spin_for(Clock::time_point start, double ms) {
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double, std::milli>(ms));
  while (Clock::now() < deadline) {
  }
}

// y = resize(x) + mean(w), timed (synthetic.hpp). w is empty for a layer without parameters.
// Recorded for a split backward (split_linear.hpp), its backward defers the weight half when asked.
struct SpinFunction : public torch::autograd::Function<SpinFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               int64_t out_features, const SyntheticLayerConfig* layer) {
    const auto start = Clock::now();
    const int64_t b = x.size(0), in = x.size(1);
    auto y = in == out_features ? x : x.mean(1, true).expand({b, out_features});
    y = w.numel() > 0 ? y + w.mean() : y.clone();
    ctx->saved_data["in"] = in;
    ctx->saved_data["params"] = w.numel();
    const double whole = layer->overhead_ms + layer->bwd_ms * static_cast<double>(b);
    ctx->saved_data["backward_ms"] = whole;
    const WeightGradBinding bind = current_weight_grad_binding();
    if (bind.grads && w.numel() > 0) {
      const double weight = layer->wgrad_overhead_ms + layer->wgrad_ms * static_cast<double>(b);
      ctx->saved_data["weight_ms"] = std::clamp(weight, 0.0, whole);
      ctx->saved_data["grads"] = at::IValue::make_capsule(bind.grads);
      ctx->saved_data["layer"] = static_cast<int64_t>(bind.layer);
      ctx->save_for_backward({w});
    }
    const double per_sample = t_recompute ? layer->recompute_ms : layer->fwd_ms;
    spin_for(start, layer->overhead_ms + per_sample * static_cast<double>(b));
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto start = Clock::now();
    const auto& g = grad_outputs[0];
    const int64_t b = g.size(0), out = g.size(1);
    const int64_t in = ctx->saved_data["in"].toInt();
    const int64_t params = ctx->saved_data["params"].toInt();
    const auto grad_x =
        in == out ? g : (g.sum(1, true) / static_cast<double>(in)).expand({b, in}).contiguous();
    torch::Tensor grad_w;
    if (params > 0) grad_w = (g.sum() / static_cast<double>(params)).expand({params}).contiguous();
    const double whole = ctx->saved_data["backward_ms"].toDouble();
    if (grad_w.defined() && ctx->needs_input_grad(1) && ctx->saved_data.count("grads")) {
      const auto grads = c10::static_intrusive_pointer_cast<DeferredWeightGrads>(
          ctx->saved_data["grads"].toCapsule());
      if (grads->deferring()) {
        // I spins for the whole less the weight half; W spins for the rest and adds grad_w.
        const double weight = ctx->saved_data["weight_ms"].toDouble();
        const torch::Tensor w = ctx->get_saved_variables()[0];
        grads->push(
            static_cast<int>(ctx->saved_data["layer"].toInt()),
            [w, grad_w, weight] {
              const auto begin = Clock::now();
              accumulate_grad(w, grad_w);
              spin_for(begin, weight);
            },
            static_cast<int64_t>(grad_w.numel() * grad_w.element_size()));
        spin_for(start, whole - weight);
        return {grad_x, torch::Tensor(), torch::Tensor(), torch::Tensor()};
      }
    }
    spin_for(start, whole);
    return {grad_x, grad_w, torch::Tensor(), torch::Tensor()};
  }
};

class SyntheticLayerImpl : public torch::nn::Module {
 public:
  SyntheticLayerImpl(ParamFactory& f, SyntheticLayerConfig config, int64_t params,
                     int64_t out_features)
      : config_(std::move(config)), out_features_(out_features) {
    // LibTorch 1.13's custom functions reject undefined tensors: no parameters is an empty one.
    weight_ = params > 0 ? register_parameter("weight", f.normal({params}, 0.02)) : f.zeros({0});
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return SpinFunction::apply(x, weight_, out_features_, &config_);
  }

 private:
  SyntheticLayerConfig config_;
  int64_t out_features_;
  torch::Tensor weight_;
};

int64_t element_size(torch::Dtype dtype) {
  return static_cast<int64_t>(c10::elementSize(dtype));
}

}  // namespace

SyntheticRecompute::SyntheticRecompute() : saved_(t_recompute) {
  t_recompute = true;
}
SyntheticRecompute::~SyntheticRecompute() {
  t_recompute = saved_;
}

namespace {

// The weight half of the layer's backward: the spec's wgrad_ms where given (the profile's
// backward_weight_s), else the cost model's estimate, `share` of the whole backward
// (core/cost_model.hpp, estimated_weight_share).
void set_weight_half(SyntheticLayerConfig& s, const LayerTiming& t1, const LayerTiming& t2,
                     double share) {
  if (t1.backward_weight_s < 0) {
    s.wgrad_ms = share * s.bwd_ms;
    s.wgrad_overhead_ms = share * (t1.backward_s * 1e3 - s.bwd_ms * t1.micro_batch);
    return;
  }
  const double db = t2.micro_batch - t1.micro_batch;
  s.wgrad_ms = (t2.backward_weight_s - t1.backward_weight_s) / db * 1e3;
  s.wgrad_overhead_ms = t1.backward_weight_s * 1e3 - s.wgrad_ms * t1.micro_batch;
}

}  // namespace

SyntheticConfig synthetic_config(const ModelSpec& spec) {
  const Profile profile = synthetic_profile(spec);
  SyntheticConfig c;
  c.input_bytes = profile.input_bytes_per_sample;
  for (const auto& l : profile.layers) {
    // core profiles every layer at several micro-batch sizes with t(b) = overhead + per * b;
    // two of them give both terms back.
    const auto& t1 = l.timings.at(0);
    const auto& t2 = l.timings.at(1);
    const double db = t2.micro_batch - t1.micro_batch;
    SyntheticLayerConfig s;
    s.name = l.name;
    s.fwd_ms = (t2.forward_s - t1.forward_s) / db * 1e3;
    s.bwd_ms = (t2.backward_s - t1.backward_s) / db * 1e3;
    s.recompute_ms = (t2.recompute_s - t1.recompute_s) / db * 1e3;
    s.overhead_ms = t1.forward_s * 1e3 - s.fwd_ms * t1.micro_batch;
    set_weight_half(s, t1, t2, estimated_weight_share(l));
    s.output_bytes = l.output_bytes_per_sample;
    s.param_bytes = l.param_bytes;
    c.layers.push_back(s);
  }
  return c;
}

int64_t synthetic_features(double bytes, int64_t element_size) {
  return std::max<int64_t>(1, static_cast<int64_t>(bytes) / element_size);
}

int64_t synthetic_parameters(double bytes, int64_t element_size) {
  return static_cast<int64_t>(bytes) / element_size;
}

int64_t parameter_count(const SyntheticConfig& c, int64_t element_size) {
  int64_t n = 0;
  for (const auto& l : c.layers) n += synthetic_parameters(l.param_bytes, element_size);
  return n;
}

LayeredModel build_synthetic(const SyntheticConfig& c, torch::Dtype dtype, uint64_t seed) {
  ParamFactory f(dtype, seed);
  const int64_t e = element_size(dtype);
  LayeredModel m;
  m.task = Task::kRegression;
  m.sample.input_shape = {synthetic_features(c.input_bytes, e)};
  for (const auto& l : c.layers) {
    const int64_t out = synthetic_features(l.output_bytes, e);
    m.layers.push_back({l.name, "synthetic",
                        torch::nn::AnyModule(std::make_shared<SyntheticLayerImpl>(
                            f, l, synthetic_parameters(l.param_bytes, e), out))});
    m.sample.target_shape = {out};
  }
  return m;
}

}  // namespace pipetwin::models
