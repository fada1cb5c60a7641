// Precision: the dtype a run computes in, and AutocastGuard, the autocast region a stage's
// forward and recompute run in.
//
// float32 and float64 are the weights' dtype and every computation's. bfloat16 and float16 are
// autocast mixed precision as PyTorch AMP does it (the torch.amp documentation; Micikevicius et
// al., "Mixed Precision Training", ICLR 2018): the weights,
// their gradients and the optimizer state stay float32 (master weights); forward and recompute run
// inside an autocast region, where the operations autocast lists (matrix products, convolutions)
// cast their inputs to the lower-precision dtype and the others run in float32 or in their inputs'
// dtype; the backward replays what autocast recorded. float16 also needs dynamic loss scaling
// (exec/runtime/loss_scaler.hpp). LibTorch's CPU autocast supports bfloat16 only.
//
// AutocastGuard turns autocast on for one device kind on the calling thread (autocast state is
// thread-local) and, when it ends, puts the previous state back and, as leaving Python's
// `with torch.autocast(...)` does, clears autocast's cache of cast weights once the outermost
// region ends, so a later optimizer step is never read through a stale cast. A guard with
// `enabled` false does nothing.
//
// Thread-safety: parse_precision and the names are pure functions; a guard belongs to the thread
// that made it.
#pragma once

#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

namespace pipetwin::models {
struct LayeredModel;
}

namespace pipetwin::exec {

struct Precision {
  bool float64 = false;  // weights and computation in float64
  // kBFloat16 or kHalf: autocast to that dtype over float32 weights; Undefined: none.
  at::ScalarType autocast = at::ScalarType::Undefined;
  bool mixed() const { return autocast != at::ScalarType::Undefined; }
};

// "float32", "bfloat16", "float16" or "float64"; InputError naming `flag`, the value and the
// known ones otherwise.
Precision parse_precision(const std::string& text, const std::string& flag = "--dtype");
// The CLI's --dtype (empty: not given) with its synonym --float64; InputError when they disagree.
Precision parse_precision_flags(const std::string& dtype, bool float64);
// The name parse_precision reads ("float32" ...).
std::string precision_name(const Precision& p);
// The short tag checkpoints fingerprint: "f32", "f64", "bf16", "f16".
std::string precision_tag(const Precision& p);
// The dtype of the weights, gradients and optimizer state (float64 or float32).
at::ScalarType weight_dtype(const Precision& p);
// The device kind whose autocast a run on `device` ("cpu", "cuda", "cuda:I") uses.
c10::DeviceType autocast_device_type(const std::string& device);
// InputError (one line) where `p` cannot run on `device`: float16 autocast on a CPU.
void check_precision_device(const Precision& p, const std::string& device);
// `y` in float32 when autocast left it in bfloat16 or float16, else `y`: what a stage's infer()
// returns and its frozen prefix keeps. The training loss takes no cast of its own: the stage
// computes it inside the autocast region, whose policy runs the loss operators in float32
// (exec/runtime/stage.hpp).
at::Tensor float32_if_reduced(const at::Tensor& y);
// InputError (one line, naming the layer) where a layer of `model` cannot train under the CPU's
// autocast to `dtype`: one forward and backward of `input` (one micro-batch) layer by layer. Where
// LibTorch picks oneDNN's bfloat16 kernels (its CPU check sees AVX-512) but oneDNN may not use
// them (DNNL_MAX_CPU_ISA=AVX2), a matrix product or convolution has no primitive. Leaves the
// parameters' gradients undefined.
void check_cpu_autocast_trains(models::LayeredModel& model, const at::Tensor& input,
                               at::ScalarType dtype);

class AutocastGuard {
 public:
  // `dtype` kBFloat16 or kHalf; `device` at::kCPU or at::kCUDA.
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype, bool enabled = true);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool enabled_;
  bool was_enabled_ = false;
  at::ScalarType was_dtype_ = at::ScalarType::Undefined;
};

}  // namespace pipetwin::exec
