#include "exec/runtime/reference.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <stdexcept>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/autograd.h>

#include "exec/runtime/data.hpp"
#include "exec/runtime/optimizer.hpp"
#include "exec/runtime/stage_io.hpp"
#include "models/layers.hpp"
#include "models/zoo.hpp"

namespace pipetwin::exec {

namespace {

struct Versions {
  int forward = -1, backward = -1, weight = -1;  // weight: the BackwardWeight's, if split
};

// Forward/backward versions of every (stage, micro-batch) of replica 0. A split backward's
// versions are its BackwardInput's: the reference computes both halves at once, which is the
// executor's result only where the BackwardWeight reads the same version (it does: the stage
// keeps it pinned until then, exec/runtime/weight_grad_store.hpp); std::logic_error otherwise.
std::map<std::pair<int, int>, Versions> declared_versions(const Schedule& s) {
  std::map<std::pair<int, int>, Versions> out;
  for (int d = 0; d < s.shape.devices_per_replica; ++d) {
    for (const auto& a : s.devices[static_cast<size_t>(d)]) {
      Versions& v = out[{a.stage, a.micro_batch}];
      if (a.op == Op::kForward) v.forward = a.version;
      if (is_input_backward(a.op)) v.backward = a.version;
      if (a.op == Op::kBackwardWeight) v.weight = a.version;
    }
  }
  for (const auto& [key, v] : out) {
    if (v.weight >= 0 && v.weight != v.backward) {
      throw std::logic_error(
          fmt::format("reference: stage {} micro-batch {}: backward-weight reads version {}, its "
                      "backward-input version {}",
                      key.first, key.second, v.weight, v.backward));
    }
  }
  return out;
}

std::vector<at::Tensor> snapshot(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const auto& p : params) out.push_back(p.detach().clone());
  return out;
}

// One reference run: the model cut into the plan's stages, each stage's weight history, and
// the micro-batch loop of the header's description.
class Reference {
 public:
  Reference(const Plan& plan, const Schedule& schedule, const ExecOptions& opt)
      : plan_(plan),
        schedule_(schedule),
        opt_(opt),
        model_(models::build_model(plan.model, opt.float64 ? at::kDouble : at::kFloat, opt.seed)),
        layers_(stage_layers(plan)),
        stages_(static_cast<size_t>(schedule.shape.num_stages)),
        graph_(model_.skip_sources(), layers_),
        order_(graph_.data_order()),
        versions_(declared_versions(schedule)),
        data_(opt.data == "synthetic"
                  ? synthetic_batches(model_, plan.batch_size, opt.seed, opt.float64)
                  : digits_batches(plan.batch_size, opt.seed, opt.data == "digits-tokens",
                                   opt.float64)) {
    for (size_t s = 0; s < stages_.size(); ++s) {
      Stage& st = stages_[s];
      for (int l : layers_[s]) {
        for (auto& p : model_.layers[static_cast<size_t>(l)].parameters()) st.params.push_back(p);
      }
      st.history.push_back(snapshot(st.params));  // version 0
      st.optimizer = Optimizer(opt.optimizer);
    }
    data_->configure(plan.batch_size, plan.dp, schedule.shape.micro_batches);
  }

  ReferenceResult run() {
    const int M = schedule_.shape.micro_batches;
    ReferenceResult r;
    for (int step = 0; step < schedule_.shape.iterations; ++step) {
      for (auto& st : stages_) {
        st.grads.clear();
        for (const auto& p : st.params) st.grads.push_back(at::zeros_like(p));
      }
      double loss_sum = 0;
      for (int replica = 0; replica < plan_.dp; ++replica) {
        for (int i = 0; i < M; ++i) loss_sum += micro_batch(step, replica, i);
      }
      r.step_loss.push_back(loss_sum / plan_.batch_size);
      for (auto& st : stages_) {
        std::vector<at::Tensor> next = snapshot(st.history.back());
        st.optimizer.step(st.history.back(), st.grads, next);
        st.history.push_back(std::move(next));
      }
    }
    for (const auto& st : stages_) r.stage_parameters.push_back(st.history.back());
    return r;
  }

 private:
  struct Stage {
    std::vector<at::Tensor> params;                // the model's, in layer order
    std::vector<std::vector<at::Tensor>> history;  // history[v]: the weights at version v
    std::vector<at::Tensor> grads;                 // this step's, summed over micro-batches
    Optimizer optimizer{OptimizerConfig{}};
  };

  static std::vector<std::vector<int>> stage_layers(const Plan& plan) {
    std::vector<std::vector<int>> out;
    for (const auto& st : plan.stages) {
      out.push_back(st.layers);
      std::sort(out.back().begin(), out.back().end());
    }
    return out;
  }

  void load(int s, int v) {
    at::NoGradGuard no_grad;
    Stage& st = stages_[static_cast<size_t>(s)];
    const auto& w = st.history.at(static_cast<size_t>(v));
    for (size_t i = 0; i < w.size(); ++i) st.params[i].copy_(w[i]);
  }

  // Micro-batch i of replica `replica` at step `step`: its summed per-sample loss; its gradients
  // added to the stages' sums.
  double micro_batch(int step, int replica, int i) {
    const int mb = step * schedule_.shape.micro_batches + i;
    // The masks the executor's stages draw for this micro-batch, in forward and recompute.
    const models::DropoutKey key(models::micro_batch_dropout_key(opt_.seed, replica, mb));
    // Forward with the forward versions, keeping the tensors every stage reads.
    std::map<int, at::Tensor> values{{kModelInput, data_->input(step, replica, i)}};
    const at::Tensor target = data_->target(step, replica, i);
    double loss = 0;
    {
      at::NoGradGuard no_grad;
      for (int s : order_) {
        load(s, versions_.at({s, mb}).forward);
        model_.forward_layers(layers_[static_cast<size_t>(s)], values);
      }
      loss = model_.per_sample_loss(values.at(last_layer()), target).sum().item<double>();
    }
    // Backward stage by stage, each at its backward version on its kept inputs; a tensor read
    // by several stages gets the sum of their gradients.
    std::map<int, at::Tensor> grad;
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      load(*it, versions_.at({*it, mb}).backward);
      backward_stage(*it, values, target, grad);
    }
    return loss;
  }

  // Stage s's vector-Jacobian product at its kept inputs `values`, seeded by `grad` (the
  // gradients of its outputs, and the loss on the last stage); adds its inputs' gradients to
  // `grad` and its parameters' to the stage's sums.
  void backward_stage(int s, const std::map<int, at::Tensor>& values, const at::Tensor& target,
                      std::map<int, at::Tensor>& grad) {
    const StageIO& io = graph_.io(s);
    Stage& st = stages_[static_cast<size_t>(s)];
    for (auto& p : st.params) p.mutable_grad() = at::Tensor();
    std::map<int, at::Tensor> v;
    for (int p : io.inputs) {
      const at::Tensor& in = values.at(p);
      v[p] = (p != kModelInput && in.is_floating_point()) ? in.detach().requires_grad_(true) : in;
    }
    model_.forward_layers(layers_[static_cast<size_t>(s)], v);
    std::vector<at::Tensor> roots, seeds;
    if (io.last) {
      roots.push_back(model_.per_sample_loss(v.at(last_layer()), target).sum() / plan_.batch_size);
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
    for (size_t k = 0; k < st.params.size(); ++k) {
      if (st.params[k].grad().defined()) st.grads[k].add_(st.params[k].grad());
    }
  }

  int last_layer() const { return static_cast<int>(model_.layers.size()) - 1; }

  const Plan& plan_;
  const Schedule& schedule_;
  const ExecOptions& opt_;
  models::LayeredModel model_;
  const std::vector<std::vector<int>> layers_;  // layers_[s]: stage s's layers, ascending
  std::vector<Stage> stages_;
  const StageGraph graph_;
  const std::vector<int> order_;
  const std::map<std::pair<int, int>, Versions> versions_;
  std::unique_ptr<BatchSource> data_;
};

}  // namespace

ReferenceResult reference_training(const Plan& plan, const Schedule& schedule,
                                   const ExecOptions& opt) {
  return Reference(plan, schedule, opt).run();
}

}  // namespace pipetwin::exec
