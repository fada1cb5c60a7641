// LossScaler: dynamic loss scaling for float16 mixed precision, with PyTorch's GradScaler
// semantics (torch.amp.GradScaler; Micikevicius et al., "Mixed Precision Training", ICLR 2018,
// Section 3.2), and OverflowVote, the agreement of a pipeline's stages on whether a step
// overflowed.
//
// float16 has 5 exponent bits: small gradients flush to zero. The loss is multiplied by the scale
// (initially 2^16) before backward, so the gradients are the scale times too large; before the
// optimizer step they are divided by it again (unscale) and checked for inf / NaN. A step with
// any non-finite gradient is skipped (the weights and optimizer state stay as they were) and the
// scale is multiplied by the backoff factor (0.5); after `growth_interval` (2000) clean steps in a
// row it is multiplied by the growth factor (2). The scale is a power of two, so scaling and
// unscaling round nothing: without an overflow the weights equal training without a scaler.
//
// In a pipeline every stage holds its own LossScaler and unscales its own gradients. The stages
// of a synchronous schedule (naive, GPipe, 1F1B) skip together: at its optimizer step each stage
// votes whether it found a non-finite gradient, waits for the votes of every stage of every
// replica for that step (OverflowVote), and all apply the OR. Each scaler then sees the same
// sequence of decisions, so every stage's scale stays the one the last stage multiplied the loss
// by. (Asynchronous schedules are refused float16: exec/runtime/session.cpp says why.)
//
// Thread-safety: a LossScaler is not thread-safe (one per stage, its compute thread).
// OverflowVote::vote may be called from any thread, once per voter and step.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "exec/platform/abort.hpp"

namespace pipetwin::exec {

struct LossScalerConfig {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
  void validate() const;  // InputError on bad values
};

class LossScaler {
 public:
  explicit LossScaler(LossScalerConfig config = {});

  double scale() const { return scale_; }
  // Clean steps since the last backoff or growth (GradScaler's growth tracker).
  int growth_tracker() const { return growth_tracker_; }
  // Divides every gradient by scale() in place; returns whether any element is inf or NaN. One
  // check over all of them and one read of the device (float32 gradients on a GPU: GradScaler's
  // fused unscale-and-check kernel).
  bool unscale(const std::vector<at::Tensor>& grads) const;
  // After a step: back off when it overflowed, else count it and grow after the interval.
  void update(bool found_inf);
  // Checkpoints: set the state update() leaves.
  void restore(double scale, int growth_tracker);

 private:
  LossScalerConfig config_;
  double scale_;
  int growth_tracker_ = 0;
};

class OverflowVote {
 public:
  // `voters`: the stages (of every replica) that take part in every step.
  OverflowVote(int voters, const AbortSignal& abort);
  // Casts this voter's vote for `step`; returns once every voter has, the OR of the votes.
  bool vote(int64_t step, bool found_inf);

 private:
  int voters_;
  const AbortSignal& abort_;
  std::mutex mu_;
  std::condition_variable cv_;
  // step -> (votes in, any inf, voters that read the result)
  struct Round {
    int votes = 0, read = 0;
    bool found_inf = false;
  };
  std::map<int64_t, Round> rounds_;
};

}  // namespace pipetwin::exec
