// The one place where pipetwin adapts to the LibTorch version it is built against (models/ and
// exec/ alike).
//
// Debian 12 ships LibTorch 1.13; the GPU machines use a PyTorch 2.x wheel. Everything else uses
// the stable C++ API that both provide. Five differences:
//
// Allocator (exec/platform/memory_tracker.cpp): c10::Allocator::allocate lost its const qualifier
// in 2.3, and copy_data became pure virtual.
//
// Attention (models/layers.cpp): LibTorch 2.x has a fused scaled_dot_product_attention (flash /
// memory-efficient kernels on GPU) that 1.13 lacks. kHasFusedAttention says whether
// fused_attention() may be called; models/layers.cpp otherwise computes the textbook softmax(Q K^T
// / sqrt(d)) V. With dropout the kernel draws its mask from the device's default generator, which
// layers.cpp seeds per micro-batch and site around the call (models/dropout.hpp).
//
// Optimizers (exec/runtime/optimizer.cpp): 1.13 has the multi-tensor _foreach_* operations that
// torch.optim's foreach path uses; 2.4 and later also have the fused single-kernel updates
// _fused_sgd_ and _fused_adam_ (torch.optim's fused=True), for GPU tensors. kHasFusedOptimizers
// says whether fused_sgd() and fused_adam() may be called (a build may turn them off with
// -DPIPETWIN_NO_FUSED_OPTIMIZERS).
//
// c10d (exec/platform/distributed.hpp): in 1.13 ProcessGroupGloo derives from c10d::ProcessGroup;
// from 2.0 it derives from c10d::Backend, and ProcessGroup became a front that dispatches to one
// backend per device type (and wants them registered). pipetwin talks to the Gloo object itself
// either way — send, recv, broadcast, allreduce and barrier have the same signatures on both
// classes — as PIPETWIN_C10D_GROUP, declared by the header PIPETWIN_C10D_GROUP_HEADER names.
//
// Autocast (exec/runtime/autocast.hpp): 1.13 has one switch and one lower-precision dtype per
// device kind (at::autocast::set_enabled / set_autocast_gpu_dtype for CUDA, set_cpu_enabled /
// set_autocast_cpu_dtype for the CPU); 2.4 made them functions of the device type
// (set_autocast_enabled(at::DeviceType, bool), set_autocast_dtype(at::DeviceType, dtype)) and
// deprecated the old names. autocast_state() and set_autocast_state() read and set both, for the
// CPU or CUDA, on the calling thread (autocast state is thread-local).
//
// Thread-safety: constants and pure functions; the autocast functions touch only the calling
// thread's state.
#pragma once

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define PIPETWIN_ALLOCATOR_CONST
#define PIPETWIN_ALLOCATOR_HAS_COPY_DATA 1
#else
#define PIPETWIN_ALLOCATOR_CONST const
#define PIPETWIN_ALLOCATOR_HAS_COPY_DATA 0
#endif

#if TORCH_VERSION_MAJOR >= 2
#define PIPETWIN_C10D_GROUP_HEADER <torch/csrc/distributed/c10d/Backend.hpp>
#define PIPETWIN_C10D_GROUP ::c10d::Backend
#else
#define PIPETWIN_C10D_GROUP_HEADER <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#define PIPETWIN_C10D_GROUP ::c10d::ProcessGroup
#endif

namespace pipetwin::models {

#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
inline constexpr bool kHasFusedAttention = true;
#else
inline constexpr bool kHasFusedAttention = false;
#endif

// softmax(q k^T / sqrt(head_dim)) v with dropout p on the probabilities (drawn from the default
// generator of q's device); q, k, v are [batch, heads, seq, head_dim].
inline at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  double dropout_p, bool causal) {
#if defined(TORCH_VERSION_MAJOR) && TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, dropout_p, causal);
#else
  (void)q, (void)k, (void)v, (void)dropout_p, (void)causal;
  TORCH_CHECK(false, "fused attention needs LibTorch 2.x (built against ", TORCH_VERSION, ")");
#endif
}

#if (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)) && \
    !defined(PIPETWIN_NO_FUSED_OPTIMIZERS)
inline constexpr bool kHasFusedOptimizers = true;
#else
inline constexpr bool kHasFusedOptimizers = false;
#endif

// torch.optim.SGD(fused=True)'s update of `params` in place (dampening 0, no Nesterov): the
// gradient plus weight_decay * param into the momentum buffer (set to it on `first_step`), then
// param -= lr * buffer. `bufs` empty without momentum.
inline void fused_sgd(at::TensorList params, at::TensorList grads, at::TensorList bufs,
                      double weight_decay, double momentum, double lr, bool first_step) {
#if (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)) && \
    !defined(PIPETWIN_NO_FUSED_OPTIMIZERS)
  at::_fused_sgd_(params, grads, bufs, weight_decay, momentum, lr, /*dampening=*/0.0,
                  /*nesterov=*/false, /*maximize=*/false, first_step);
#else
  (void)params, (void)grads, (void)bufs, (void)weight_decay, (void)momentum, (void)lr,
      (void)first_step;
  TORCH_CHECK(false, "fused SGD needs LibTorch 2.4 or later (built against ", TORCH_VERSION, ")");
#endif
}

// torch.optim.Adam(fused=True)'s update of `params` in place (no AMSGrad); `steps` holds the step
// count (float32, on the parameters' device) per parameter, already counting this step.
inline void fused_adam(at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                       at::TensorList exp_avg_sqs, at::TensorList steps, double lr, double beta1,
                       double beta2, double weight_decay, double eps) {
#if (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)) && \
    !defined(PIPETWIN_NO_FUSED_OPTIMIZERS)
  at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, lr, beta1,
                   beta2, weight_decay, eps, /*amsgrad=*/false, /*maximize=*/false);
#else
  (void)params, (void)grads, (void)exp_avgs, (void)exp_avg_sqs, (void)steps, (void)lr, (void)beta1,
      (void)beta2, (void)weight_decay, (void)eps;
  TORCH_CHECK(false, "fused Adam needs LibTorch 2.4 or later (built against ", TORCH_VERSION, ")");
#endif
}

// Whether autocast is on for `device` (CPU or CUDA) on this thread, and its lower-precision dtype.
struct AutocastState {
  bool enabled = false;
  at::ScalarType dtype = at::kBFloat16;
};

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline AutocastState autocast_state(at::DeviceType device) {
  return {at::autocast::is_autocast_enabled(device), at::autocast::get_autocast_dtype(device)};
}
inline void set_autocast_state(at::DeviceType device, const AutocastState& s) {
  at::autocast::set_autocast_dtype(device, s.dtype);
  at::autocast::set_autocast_enabled(device, s.enabled);
}
#else
inline AutocastState autocast_state(at::DeviceType device) {
  if (device == at::kCUDA)
    return {at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
  return {at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
}
inline void set_autocast_state(at::DeviceType device, const AutocastState& s) {
  if (device == at::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(s.dtype);
    at::autocast::set_enabled(s.enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(s.dtype);
    at::autocast::set_cpu_enabled(s.enabled);
  }
}
#endif

}  // namespace pipetwin::models
