// Optimizer: PyTorch's SGD (momentum, weight decay) and Adam update rules, applied functionally,
// over all of a stage's parameters at once as torch.optim's multi-tensor paths do: the fused
// single-kernel updates (torch.optim's fused=True) for GPU tensors where LibTorch has them (2.4
// and later, models/torch_compat.hpp), else the _foreach_* operations of torch.optim's foreach
// path (a few kernels per step instead of a few per parameter).
//
// The executor keeps several weight versions of a stage alive (PipeDream's weight stashing), so an
// update must be able to write the new version into other tensors than the old one: step() reads
// params and grads and writes `out`, which may be the params themselves (in place) or a fresh
// copy. The formulas follow torch.optim.SGD and torch.optim.Adam exactly, so a pipelined run and
// single-process training with this class give the same weights (on a CPU bit for bit, the foreach
// operations running tensor by tensor there).
//
// Frozen layers (PipeTransformer Section 3.1) get no update: freeze_prefix(n) makes step() leave
// the first n parameters alone — no weight decay, no momentum, no Adam moments (their state stays
// as it was when they froze; layers never thaw) — and, when the update writes another weight
// version, copy them across unchanged. A stage's frozen layers are a prefix of its layers (the
// freeze algorithm freezes bottom-up), hence a prefix of its parameters.
//
// Thread-safety: not thread-safe; one optimizer per stage, used by the stage's compute thread.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipetwin::exec {

struct OptimizerConfig {
  std::string kind = "sgd";  // "sgd" or "adam"
  double lr = 0.01;
  double momentum = 0.0;  // sgd
  double weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam

  // State bytes per parameter byte: 0 (plain SGD), 1 (momentum), 2 (Adam).
  double state_ratio() const;
  void validate() const;  // InputError on bad values
};

// The optimizer's state in parameter order, for checkpoints: the step count (Adam's bias
// correction) and the buffers of the rule in use — each list is empty before the first step,
// else it has one tensor per parameter.
struct OptimizerState {
  int64_t steps = 0;
  std::vector<at::Tensor> momentum;             // sgd with momentum
  std::vector<at::Tensor> exp_avg, exp_avg_sq;  // adam
};

class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig config) : config_(std::move(config)) {}

  // out[i] = update(params[i], grads[i]); `out` may alias `params`.
  void step(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
            const std::vector<at::Tensor>& out);
  int64_t steps() const { return steps_; }
  const OptimizerConfig& config() const { return config_; }
  // The optimizer state, in parameter order (momentum buffers, or Adam's two moments).
  std::vector<at::Tensor> state() const;
  // The same with the step count, and its inverse (copies in; lists must be empty or have
  // `num_params` tensors, else std::invalid_argument).
  OptimizerState export_state() const;
  void import_state(const OptimizerState& state, size_t num_params);
  // A learning-rate schedule moves the rate between steps.
  void set_lr(double lr) { config_.lr = lr; }
  // The first `n` parameters of every step() are frozen (see above).
  void freeze_prefix(size_t n) { frozen_ = n; }
  size_t frozen_prefix() const { return frozen_; }

 private:
  // The update of the active parameters `p` (in place; `g` their gradients), which are the
  // parameters from index `f` on.
  void sgd_step(const std::vector<at::Tensor>& p, std::vector<at::Tensor> g, size_t f);
  void adam_step(const std::vector<at::Tensor>& p, std::vector<at::Tensor> g, size_t f);

  OptimizerConfig config_;
  int64_t steps_ = 0;
  size_t frozen_ = 0;
  std::vector<at::Tensor> buf_, exp_avg_, exp_avg_sq_;
};

}  // namespace pipetwin::exec
