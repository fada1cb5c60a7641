// models/dropout.hpp: keyed dropout's masks come from the device generator, seeded per
// (micro-batch, site): a recomputed forward sees its forward's masks, two micro-batches (or
// replicas, or sites) get different ones, the default generator is left as it was, and the
// thread that draws plays no part.
#include "models/dropout.hpp"

#include <gtest/gtest.h>

#include <thread>

#include <torch/utils.h>

#include "models/layers.hpp"
#include "models/zoo.hpp"

namespace pipetwin::models {
namespace {

constexpr uint64_t kSeed = 7;

// The mask keyed_dropout drew for `site` under micro-batch `mb`'s key: which elements it kept.
at::Tensor mask_of(int replica, int mb, uint64_t site, const at::Tensor& x) {
  const DropoutKey key(micro_batch_dropout_key(kSeed, replica, mb));
  return keyed_dropout(x, 0.25, site, true).ne(0);
}

TEST(ModelsDropout, MasksFollowTheKeyNotTheGlobalGenerator) {
  const auto x = at::ones({1000}, at::kDouble);
  torch::Tensor a, b, c, other_site;
  {
    DropoutKey key(42);
    a = keyed_dropout(x, 0.25, 3, true);
    other_site = keyed_dropout(x, 0.25, 4, true);
  }
  torch::manual_seed(123);  // the global generator plays no part
  {
    DropoutKey key(42);
    b = keyed_dropout(x, 0.25, 3, true);
  }
  {
    DropoutKey key(43);
    c = keyed_dropout(x, 0.25, 3, true);
  }
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));
  EXPECT_FALSE(a.equal(other_site));
  const double kept = (a > 0).sum().item<double>() / 1000.0;
  EXPECT_NEAR(kept, 0.75, 0.05);
  EXPECT_NEAR(a.max().item<double>(), 1.0 / 0.75, 1e-12);
  EXPECT_TRUE(keyed_dropout(x, 0.25, 3, false).equal(x));
  EXPECT_TRUE(keyed_dropout(x, 0.0, 3, true).equal(x));
}

TEST(ModelsDropout, RecomputedForwardReproducesTheForwardsMask) {
  const auto x = at::ones({64, 65}, at::kFloat);
  const at::Tensor forward = mask_of(0, 3, 5, x);
  // Between a forward and its recompute other micro-batches draw, on this thread and others, and
  // the default generator moves on.
  (void)mask_of(0, 4, 5, x);
  std::thread([&] { (void)mask_of(0, 2, 5, x); }).join();
  (void)at::rand({100});
  const at::Tensor recompute = mask_of(0, 3, 5, x);
  EXPECT_TRUE(forward.equal(recompute));
  // The kept share is the keep probability, and the kept elements are scaled by 1 / (1 - p).
  EXPECT_NEAR(forward.to(at::kDouble).mean().item<double>(), 0.75, 0.02);
}

TEST(ModelsDropout, TwoMicroBatchesGetDifferentMasks) {
  const auto x = at::ones({64, 65}, at::kFloat);
  const at::Tensor m0 = mask_of(0, 0, 5, x), m1 = mask_of(0, 1, 5, x);
  EXPECT_FALSE(m0.equal(m1));
  // Independent draws: they agree where two independent masks of keep rate 0.75 would (5/8).
  const double agree = m0.eq(m1).to(at::kDouble).mean().item<double>();
  EXPECT_NEAR(agree, 0.75 * 0.75 + 0.25 * 0.25, 0.03);
  EXPECT_FALSE(m0.equal(mask_of(1, 0, 5, x)));  // the same micro-batch of another replica
  EXPECT_FALSE(m0.equal(mask_of(0, 0, 6, x)));  // another site of the same micro-batch
}

TEST(ModelsDropout, TheDrawingThreadPlaysNoPart) {
  const auto x = at::ones({4096}, at::kFloat);
  const at::Tensor here = mask_of(0, 9, 2, x);
  at::Tensor there;
  std::thread([&] { there = mask_of(0, 9, 2, x); }).join();
  EXPECT_TRUE(here.equal(there));
}

// The fused kernels' path (GPU dropout, the attention kernel's dropout): the device's default
// generator, seeded per site for the draw and put back after it (preserve_rng_state).
TEST(ModelsDropout, SiteGeneratorSeedsTheDrawAndRestoresTheDefaultGenerator) {
  const c10::Device cpu(c10::kCPU);
  const auto draw = [] { return at::rand({256}); };  // from the default CPU generator
  torch::manual_seed(11);
  const at::Tensor plain = at::rand({16});
  torch::manual_seed(11);
  at::Tensor a, b, c;
  {
    const DropoutKey key(micro_batch_dropout_key(kSeed, 0, 1));
    a = with_site_generator(cpu, 3, draw);
    b = with_site_generator(cpu, 3, draw);
    c = with_site_generator(cpu, 4, draw);
  }
  // The default generator is where it was: the draws above took nothing from its stream.
  EXPECT_TRUE(at::rand({16}).equal(plain));
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));
  // Outside any key the draw is the generator's own.
  torch::manual_seed(11);
  EXPECT_TRUE(with_site_generator(cpu, 3, [] { return at::rand({16}); }).equal(plain));
}

TEST(ModelsDropout, ModelForwardIsReproducibleUnderAKey) {
  auto m = build_model("bert:tiny,layers=1,seq=8,dropout=0.3", torch::kFloat64);
  torch::NoGradGuard no_grad;
  const auto x = m.synthetic_input(2, 0);
  torch::Tensor a, b, c;
  {
    DropoutKey key(7);
    a = m.forward(x);
  }
  {
    DropoutKey key(7);  // e.g. the recompute of the same micro-batch
    b = m.forward(x);
  }
  {
    DropoutKey key(8);
    c = m.forward(x);
  }
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));
  m.train(false);
  EXPECT_TRUE(m.forward(x).equal(m.forward(x)));
}

// GPT-2's causal attention with dropout on its probabilities: a forward's gradient is its
// recompute's (the same masks), and another micro-batch's differs.
TEST(ModelsDropout, AttentionGradientIsReproducibleUnderAKey) {
  auto m = build_model("gpt2:tiny,layers=1,dim=32,heads=2,vocab=64,ctx=16,seq=8,dropout=0.3",
                       torch::kFloat64);
  const auto x = m.synthetic_input(2, 0), y = m.synthetic_target(2, 0);
  const auto grad = [&](int mb) {
    for (auto& p : m.parameters()) p.mutable_grad() = at::Tensor();
    const DropoutKey key(micro_batch_dropout_key(kSeed, 0, mb));
    m.per_sample_loss(m.forward(x), y).sum().backward();
    return m.layers[1].parameters().front().grad().clone();  // the attention's first weight
  };
  const at::Tensor g0 = grad(0);
  EXPECT_TRUE(g0.equal(grad(0)));
  EXPECT_FALSE(g0.equal(grad(1)));
}

}  // namespace
}  // namespace pipetwin::models
