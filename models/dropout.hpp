// Keyed dropout: masks drawn from the device's own random generator, reproducible per
// (micro-batch, site).
//
// LibTorch's dropout draws from the device's default generator, which all threads share, so a
// pipeline's masks would depend on thread timing and a recomputed forward (checkpointing,
// torchgpipe Section 2.1) would not see the forward's mask. pipetwin's dropout draws from the
// generator too — on a GPU its Philox stream, through the fused kernels (native_dropout, and the
// attention kernel's internal dropout on LibTorch 2.x: layers.cpp) — but seeds it per draw:
//   - site: a number fixed at build time, one per dropout in the model (ParamFactory::next_site);
//   - key: set by the caller for the current thread with a DropoutKey scope. An executor opens
//     `DropoutKey k(micro_batch_dropout_key(seed, replica, micro_batch))` around a micro-batch's
//     forward and opens the same key again around its recompute, and gets the same masks; since
//     masks depend on the site, not on which stage runs the layer or what ran before it, any
//     partition sees the masks a single process running the same micro-batches under the same
//     keys sees (exec/runtime/reference.hpp).
// The seed of a draw is mix64(key ^ mix64(site + 1)). Where it is drawn:
//   - CPU tensors: a generator of the calling thread's own (mt19937, the CPU generator LibTorch
//     has), reseeded per draw and passed to bernoulli_ explicitly, in the operations LibTorch's
//     CPU dropout runs (a mask of the input's dtype, scaled, multiplied); stage threads on one CPU
//     never wait for each other.
//   - GPU tensors: with_site_generator() below, around the fused kernel that draws from the
//     device's default generator: under a lock per device (stream sets of one GPU share its
//     generator), the generator's state is saved, the draw's seed set (Philox offset 0), the
//     kernel launched (it reads seed and offset at launch), and the state put back — what
//     torch.utils.checkpoint's preserve_rng_state does, per draw instead of per segment.
// Outside any DropoutKey scope dropout is LibTorch's own (the default generator, unseeded: fresh
// masks, not reproducible). With p = 0, or in eval mode, dropout is the identity and a layer's
// forward is a pure function of input and weights. Each site is used once per forward; reusing a
// module twice in one forward would repeat a mask.
//
// Thread-safety: DropoutKey scopes and the CPU generators are per thread; with_site_generator
// serialises the draws of one device.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include <ATen/ATen.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>

namespace pipetwin::models {

// 64-bit mixing function (SplitMix64's finaliser); used for keys and seeds.
uint64_t mix64(uint64_t x);

// Sets the calling thread's dropout key until destroyed (scopes nest).
class DropoutKey {
 public:
  explicit DropoutKey(uint64_t key);
  ~DropoutKey();
  DropoutKey(const DropoutKey&) = delete;
  DropoutKey& operator=(const DropoutKey&) = delete;

 private:
  bool saved_scoped_;
  uint64_t saved_key_;
};

// The key of one micro-batch of one data-parallel replica in a run seeded with `seed`: what the
// executor's stages and the reference trainer open around its forward and its recompute.
uint64_t micro_batch_dropout_key(uint64_t seed, int replica, int micro_batch);

// The seed of `site`'s draw under the calling thread's key; nullopt outside any DropoutKey.
std::optional<uint64_t> site_seed(uint64_t site);

// Runs `draw` (a kernel that draws from the default generator of `device`) with that generator
// seeded for `site` under the calling thread's key, as described above, and returns its result.
// Outside any DropoutKey scope it runs `draw` as it is.
at::Tensor with_site_generator(const c10::Device& device, uint64_t site,
                               const std::function<at::Tensor()>& draw);

// Zeroes each element with probability p and scales the rest by 1 / (1 - p); the identity when
// !training or p == 0.
at::Tensor keyed_dropout(const at::Tensor& x, double p, uint64_t site, bool training);

class DropoutImpl : public torch::nn::Module {
 public:
  DropoutImpl(double p, uint64_t site) : p_(p), site_(site) {}
  at::Tensor forward(const at::Tensor& x) { return keyed_dropout(x, p_, site_, is_training()); }
  double p() const { return p_; }
  uint64_t site() const { return site_; }

 private:
  double p_;
  uint64_t site_;
};

}  // namespace pipetwin::models
