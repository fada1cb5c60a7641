// Tensor-parallel shards (profiles/zoo/tensor_parallel.hpp) and their collectives
// (core/tensor_parallel.hpp): parameters and activations per device against hand counts of
// Megatron-LM's split, collective volumes per block, the refusals, and a measured-style profile
// sharded by ratios equal to the priced shard.
#include "profiles/zoo/tensor_parallel.hpp"

#include <string>

#include <gtest/gtest.h>

#include "core/cluster.hpp"
#include "core/error.hpp"
#include "profiles/model_source.hpp"
#include "profiles/zoo/activation_memory.hpp"
#include "profiles/zoo/analytic.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::zoo {
namespace {

using test::input_error;

// GPT-2 tiny with 8 heads of 16 (dim 128, MLP 512, vocabulary 1024, s = 64) and dropout.
const std::string kGpt = "gpt2:tiny,heads=8,dropout=0.1";
constexpr double kD = 128, kS = 64, kM = 512, kV = 1024;

const ZooLayer& layer(const ZooModel& m, const std::string& name) {
  return m.layers[static_cast<size_t>(m.layer_index(name))];
}

TEST(TensorParallelShard, ParametersSplitAsMegatronDoes) {
  const ZooModel whole = describe_model(kGpt);
  for (int t : {1, 2, 4, 8}) {
    const ZooModel shard = shard_model(whole, {t, false, false});
    // qkv and its bias by t, the projection's weight by t, its bias and the LayerNorm whole.
    EXPECT_EQ(layer(shard, "block0.attn").params,
              static_cast<int64_t>((3 * kD * kD + 3 * kD) / t + kD * kD / t + kD + 2 * kD))
        << t;
    EXPECT_EQ(layer(shard, "block0.mlp").params,
              static_cast<int64_t>((kD * kM + kM) / t + kM * kD / t + kD + 2 * kD))
        << t;
    // The word embedding's rows by t, the positions whole; the LM head's rows by t.
    EXPECT_EQ(layer(shard, "embed").params, static_cast<int64_t>(kV * kD / t + 64 * kD)) << t;
    EXPECT_EQ(layer(shard, "head").params, static_cast<int64_t>(2 * kD + kD * kV / t)) << t;
  }
}

TEST(TensorParallelShard, SavedActivationsFollowKorthikantiPerSublayer) {
  const ZooModel whole = describe_model(kGpt);
  TransformerActivations x;
  x.seq = kS;
  x.hidden = kD;
  x.heads = 8;
  x.mlp = kM;
  for (int t : {2, 4, 8}) {
    for (bool sp : {false, true}) {
      for (bool selective : {false, true}) {
        const TensorParallel tp{t, sp, selective};
        const ZooModel shard = shard_model(whole, tp);
        const double att = per_device_bytes(attention_activations(x), tp) /
                           per_device_bytes(attention_activations(x), {});
        const double mlp =
            per_device_bytes(mlp_activations(x), tp) / per_device_bytes(mlp_activations(x), {});
        EXPECT_DOUBLE_EQ(layer(shard, "block1.attn").saved_elems,
                         layer(whole, "block1.attn").saved_elems * att);
        EXPECT_DOUBLE_EQ(layer(shard, "block1.mlp").saved_elems,
                         layer(whole, "block1.mlp").saved_elems * mlp);
        // Sequence parallelism hands on 1/t of the sequence.
        EXPECT_DOUBLE_EQ(layer(shard, "block1.mlp").output_elems, sp ? kS * kD / t : kS * kD);
      }
    }
  }
}

TEST(TensorParallelShard, TwoAllReducesPerBlockEachWay) {
  const ZooModel whole = describe_model(kGpt);
  const double elem = 2, sh = kS * kD * elem;  // bytes of s x h per sample
  for (int t : {2, 4, 8}) {
    double sent = 0;
    for (const char* name : {"block0.attn", "block0.mlp"}) {
      const LayerCollectives c = layer_collectives(whole, whole.layer_index(name), {t}, elem);
      ASSERT_EQ(c.forward.size(), 1u);
      ASSERT_EQ(c.backward.size(), 1u);
      EXPECT_EQ(c.forward[0].kind, CollectiveKind::kAllReduce);
      EXPECT_DOUBLE_EQ(c.forward[0].bytes_per_sample, sh);
      for (const auto& list : {c.forward, c.backward}) {
        for (const auto& one : list) sent += ring_bytes_sent(one.kind, t, one.bytes_per_sample);
      }
      // Sequence parallelism: an all-gather and a reduce-scatter each way, the same volume.
      const LayerCollectives s = layer_collectives(whole, whole.layer_index(name), {t, true}, elem);
      ASSERT_EQ(s.forward.size(), 2u);
      EXPECT_EQ(s.forward[0].kind, CollectiveKind::kAllGather);
      EXPECT_EQ(s.forward[1].kind, CollectiveKind::kReduceScatter);
      double sp_sent = 0, ar_sent = 0;
      for (const auto& one : s.forward)
        sp_sent += ring_bytes_sent(one.kind, t, one.bytes_per_sample);
      for (const auto& one : c.forward)
        ar_sent += ring_bytes_sent(one.kind, t, one.bytes_per_sample);
      EXPECT_DOUBLE_EQ(sp_sent, ar_sent);
    }
    // Four all-reduces per block, each 2 (t - 1) / t s b h elements sent per rank.
    EXPECT_DOUBLE_EQ(sent, 4 * 2.0 * (t - 1) / t * sh) << t;
  }
}

TEST(TensorParallelShard, RefusalsNameTheCount) {
  const ZooModel xl = describe_model("gpt2:1.5b");
  EXPECT_EQ(tensor_parallel_refusal(xl, {2}),
            "gpt2:1.5b: 25 attention heads of layer \"block0.attn\" are not divisible by the "
            "tensor-parallel size 2");
  EXPECT_EQ(tensor_parallel_refusal(describe_model("gpt2:1.5b,heads=32"), {8}), "");
  EXPECT_NE(input_error([] {
              shard_model(describe_model("resnet:50"), {2});
            }).find("resnet has no split here"),
            std::string::npos);
  EXPECT_NE(tensor_parallel_refusal(describe_model(kGpt), {1, true})
                .find("sequence parallelism needs tensor parallelism"),
            std::string::npos);
}

TEST(TensorParallelShard, WeightsPerDeviceHalveAtTwo) {
  const ZooModel whole = describe_model("gpt2:1.5b,heads=32");
  const ZooModel shard = shard_model(whole, {2});
  const double ratio = static_cast<double>(shard.parameters()) / whole.parameters();
  EXPECT_NEAR(ratio, 0.5, 0.005);  // norms, biases of row-parallel linears and positions stay
  EXPECT_GT(ratio, 0.5);
}

TEST(TensorParallelProfile, RatiosOfAnAnalyticProfileGiveThePricedShard) {
  const Catalog catalog = Catalog::load(Catalog::default_dir());
  const DeviceSpec& device = *catalog.find_device("a100-80gb");
  AnalyticOptions o;
  o.dtype = "bfloat16";
  const ZooModel whole = describe_model(kGpt);
  const PriceModel price = [&](const ZooModel& m, const std::vector<int>& b) {
    AnalyticOptions with = o;
    with.micro_batches = b;
    return analytic_profile(m, device, with);
  };
  const TensorParallel tp{4, true, false};
  const Profile sharded = shard_profile(analytic_profile(whole, device, o), whole, tp, price);
  const Profile priced = analytic_profile(shard_model(whole, tp), device, o);
  ASSERT_EQ(sharded.num_layers(), priced.num_layers());
  EXPECT_EQ(sharded.tensor_parallel, tp);
  for (int l = 0; l < sharded.num_layers(); ++l) {
    const auto& a = sharded.layers[static_cast<size_t>(l)];
    const auto& b = priced.layers[static_cast<size_t>(l)];
    EXPECT_NEAR(a.timings[2].forward_s, b.timings[2].forward_s, 1e-12 * b.timings[2].forward_s);
    EXPECT_NEAR(a.timings[2].backward_s, b.timings[2].backward_s, 1e-12 * b.timings[2].backward_s);
    EXPECT_NEAR(a.saved_bytes_per_sample, b.saved_bytes_per_sample, 1e-6);
    EXPECT_NEAR(a.param_bytes, b.param_bytes, 1e-6);
    EXPECT_NEAR(a.optimizer_bytes, b.optimizer_bytes, 1e-6);
  }
  EXPECT_FALSE(sharded.layers[1].tp_forward.empty());
  EXPECT_THROW(shard_profile(sharded, whole, tp, price), InputError);  // already a shard
}

TEST(TensorParallelProfile, ResolvedThroughTheModelSource) {
  ResolveOptions o;
  o.dtype = "bfloat16";
  o.optimizer = "adam";
  const Profile whole = resolve_profile(kGpt, "", "h100-sxm", o);
  o.tensor_parallel = {2};
  const Profile shard = resolve_profile(kGpt, "", "h100-sxm", o);
  EXPECT_EQ(shard.tensor_parallel.size, 2);
  double pw = 0, ps = 0;
  for (const auto& l : whole.layers) pw += l.param_bytes;
  for (const auto& l : shard.layers) ps += l.param_bytes;
  EXPECT_LT(ps, 0.6 * pw);
  o.tensor_parallel = {2};
  EXPECT_NE(input_error([&] {
              resolve_profile("resnet:50", "", "h100-sxm", o);
            }).find("tensor parallelism"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetwin::zoo
