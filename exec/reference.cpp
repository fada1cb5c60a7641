#include "exec/reference.hpp"

#include <map>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include "exec/data.hpp"
#include "exec/optimizer.hpp"
#include "exec/stage_io.hpp"
#include "models/layers.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

namespace {

struct Versions {
  int forward = -1, backward = -1;
};

// Forward/backward versions of every (stage, micro-batch) of replica 0.
std::map<std::pair<int, int>, Versions> declared_versions(const Schedule& s) {
  std::map<std::pair<int, int>, Versions> out;
  for (int d = 0; d < s.shape.devices_per_replica; ++d) {
    for (const auto& a : s.devices[static_cast<size_t>(d)]) {
      if (a.op == Op::kForward) out[{a.stage, a.micro_batch}].forward = a.version;
      if (a.op == Op::kBackward) out[{a.stage, a.micro_batch}].backward = a.version;
    }
  }
  return out;
}

std::vector<at::Tensor> snapshot(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

}  // namespace

ReferenceResult reference_training(const Plan& plan, const Schedule& schedule,
                                   const ExecOptions& opt) {
  const at::ScalarType dtype = opt.float64 ? at::kDouble : at::kFloat;
  models::LayeredModel model = models::build_model(plan.model, dtype, opt.seed);
  const auto& sh = schedule.shape;
  const int S = sh.num_stages, M = sh.micro_batches, N = sh.iterations;
  std::vector<std::vector<int>> layers(static_cast<size_t>(S));
  std::vector<std::vector<at::Tensor>> params(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s) {
    layers[static_cast<size_t>(s)] = plan.stages[static_cast<size_t>(s)].layers;
    std::sort(layers[static_cast<size_t>(s)].begin(), layers[static_cast<size_t>(s)].end());
    for (int l : layers[static_cast<size_t>(s)]) {
      for (auto& p : model.layers[static_cast<size_t>(l)].parameters())
        params[static_cast<size_t>(s)].push_back(p);
    }
  }
  // history[s][v]: stage s's weights at version v.
  std::vector<std::vector<std::vector<at::Tensor>>> history(static_cast<size_t>(S));
  for (int s = 0; s < S; ++s)
    history[static_cast<size_t>(s)].push_back(snapshot(params[static_cast<size_t>(s)]));
  auto load = [&](int s, int v) {
    at::NoGradGuard no_grad;
    const auto& w = history[static_cast<size_t>(s)].at(static_cast<size_t>(v));
    for (size_t i = 0; i < w.size(); ++i) params[static_cast<size_t>(s)][i].copy_(w[i]);
  };
  const StageGraph graph(model.skip_sources(), layers);
  const std::vector<int> order = graph.data_order();
  const int last_layer = static_cast<int>(model.layers.size()) - 1;
  const auto versions = declared_versions(schedule);
  auto data =
      opt.data == "synthetic"
          ? synthetic_batches(model, plan.batch_size, opt.seed, opt.float64)
          : digits_batches(plan.batch_size, opt.seed, opt.data == "digits-tokens", opt.float64);
  data->configure(plan.batch_size, plan.dp, M);
  std::vector<Optimizer> optimizers(static_cast<size_t>(S), Optimizer(opt.optimizer));
  ReferenceResult r;
  for (int step = 0; step < N; ++step) {
    std::vector<std::vector<at::Tensor>> grads(static_cast<size_t>(S));
    for (int s = 0; s < S; ++s) {
      for (const auto& p : params[static_cast<size_t>(s)])
        grads[static_cast<size_t>(s)].push_back(at::zeros_like(p));
    }
    double loss_sum = 0;
    for (int replica = 0; replica < plan.dp; ++replica) {
      for (int i = 0; i < M; ++i) {
        const int mb = step * M + i;
        // The masks the executor's stages draw for this micro-batch, in forward and recompute.
        const models::DropoutKey key(models::micro_batch_dropout_key(opt.seed, replica, mb));
        // Forward with the forward versions, keeping the tensors every stage reads.
        std::map<int, at::Tensor> values{{kModelInput, data->input(step, replica, i)}};
        const at::Tensor target = data->target(step, replica, i);
        {
          at::NoGradGuard no_grad;
          for (int s : order) {
            load(s, versions.at({s, mb}).forward);
            model.forward_layers(layers[static_cast<size_t>(s)], values);
          }
          loss_sum += model.per_sample_loss(values.at(last_layer), target).sum().item<double>();
        }
        // Backward stage by stage, each at its backward version on its kept inputs; a tensor
        // read by several stages gets the sum of their gradients.
        std::map<int, at::Tensor> grad;
        for (auto it = order.rbegin(); it != order.rend(); ++it) {
          const int s = *it;
          const StageIO& io = graph.io(s);
          load(s, versions.at({s, mb}).backward);
          for (auto& p : params[static_cast<size_t>(s)]) p.mutable_grad() = at::Tensor();
          std::map<int, at::Tensor> v;
          for (int p : io.inputs) {
            const at::Tensor& in = values.at(p);
            v[p] = (p != kModelInput && in.is_floating_point()) ? in.detach().requires_grad_(true)
                                                                : in;
          }
          model.forward_layers(layers[static_cast<size_t>(s)], v);
          std::vector<at::Tensor> roots, seeds;
          if (io.last) {
            roots.push_back(model.per_sample_loss(v.at(last_layer), target).sum() /
                            plan.batch_size);
            seeds.push_back(at::ones_like(roots.back()));
          }
          for (int p : io.outputs) {
            if (grad.count(p)) {
              roots.push_back(v.at(p));
              seeds.push_back(grad.at(p));
            }
          }
          torch::autograd::backward(roots, seeds);
          for (int p : io.inputs) {
            if (p == kModelInput || !v.at(p).grad().defined()) continue;
            auto g = grad.find(p);
            if (g == grad.end()) {
              grad[p] = v.at(p).grad();
            } else {
              g->second = g->second + v.at(p).grad();
            }
          }
          at::NoGradGuard no_grad;
          auto& ps = params[static_cast<size_t>(s)];
          for (size_t k = 0; k < ps.size(); ++k) {
            if (ps[k].grad().defined()) grads[static_cast<size_t>(s)][k].add_(ps[k].grad());
          }
        }
      }
    }
    r.step_loss.push_back(loss_sum / plan.batch_size);
    for (int s = 0; s < S; ++s) {
      std::vector<at::Tensor> next = snapshot(history[static_cast<size_t>(s)].back());
      optimizers[static_cast<size_t>(s)].step(history[static_cast<size_t>(s)].back(),
                                              grads[static_cast<size_t>(s)], next);
      history[static_cast<size_t>(s)].push_back(std::move(next));
    }
  }
  for (int s = 0; s < S; ++s) r.stage_parameters.push_back(history[static_cast<size_t>(s)].back());
  return r;
}

}  // namespace pipetwin::exec
