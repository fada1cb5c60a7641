#include "models/synthetic.hpp"

#include <chrono>

#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/synthetic.hpp"
#include "models/layers.hpp"

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
struct SpinFunction : public torch::autograd::Function<SpinFunction> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const torch::Tensor& w,
                               int64_t out_features, const SyntheticLayerConfig* layer) {
    const auto start = Clock::now();
    const int64_t b = x.size(0), in = x.size(1);
    auto y = in == out_features ? x : x.mean(1, true).expand({b, out_features});
    y = w.numel() > 0 ? y + w.mean() : y.clone();
    ctx->saved_data["in"] = in;
    ctx->saved_data["params"] = w.numel();
    ctx->saved_data["backward_ms"] = layer->overhead_ms + layer->bwd_ms * static_cast<double>(b);
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
    spin_for(start, ctx->saved_data["backward_ms"].toDouble());
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
