// profiles/zoo/activation_memory.hpp against the hand counts of Korthikanti et al. (2022),
// Table 2: a GPT layer's activation bytes per device at t in {1, 2, 4, 8}, with and without
// sequence parallelism and selective recomputation.
#include "profiles/zoo/activation_memory.hpp"

#include <gtest/gtest.h>

namespace pipetwin::zoo {
namespace {

// GPT-2 1.5B's layer: s = 1024, h = 1600, a = 25, 16-bit activations, dropout; so 5 a s / h = 80
// and s b h = 1,638,400 per sample.
TransformerActivations gpt2_xl(double b = 1) {
  TransformerActivations x;
  x.seq = 1024;
  x.hidden = 1600;
  x.heads = 25;
  x.elem = 2;
  x.micro_batch = b;
  return x;
}

constexpr double kSbh = 1024.0 * 1600.0;

TensorParallel tp(int t, bool sp = false, bool selective = false) {
  return {t, sp, selective};
}

TEST(ActivationMemory, WholeLayerIs34PlusFiveASOverH) {
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(1)), kSbh * (34 + 80));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(4), tp(1)), 4 * kSbh * (34 + 80));
}

TEST(ActivationMemory, SublayerPartsAsThePaperCountsThem) {
  const double as2b = 25.0 * 1024 * 1024;
  const SublayerActivations att = attention_activations(gpt2_xl());
  EXPECT_DOUBLE_EQ(att.replicated, 5 * kSbh);        // LN input 2, QKV input 2, dropout mask 1
  EXPECT_DOUBLE_EQ(att.attention_core, 5 * as2b);    // softmax 2, its mask 1, dropped copy 2
  EXPECT_DOUBLE_EQ(att.split, 8 * kSbh + 5 * as2b);  // Q, K 4, V 2, projection input 2
  const SublayerActivations mlp = mlp_activations(gpt2_xl());
  EXPECT_DOUBLE_EQ(mlp.replicated, 5 * kSbh);  // LN input 2, fc1 input 2, dropout mask 1
  EXPECT_DOUBLE_EQ(mlp.split, 16 * kSbh);      // fc1 output 8, GeLU output 8
  EXPECT_DOUBLE_EQ(mlp.attention_core, 0);
}

TEST(ActivationMemory, TensorParallelDividesTheSplitTerms) {
  // s b h (10 + 24/t + 5 a s / (h t)).
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(2)), kSbh * (10 + 12 + 40));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(4)), kSbh * (10 + 6 + 20));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(8)), kSbh * (10 + 3 + 10));
}

TEST(ActivationMemory, SequenceParallelDividesEverything) {
  // s b h / t (34 + 5 a s / h).
  for (int t : {2, 4, 8}) {
    EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(t, true)), kSbh * (34 + 80) / t) << t;
  }
}

TEST(ActivationMemory, SelectiveRecomputationDropsTheAttentionCore) {
  // s b h (10 + 24/t) without sequence parallelism, 34 s b h / t with it.
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(1, false, true)), kSbh * 34);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(2, false, true)), kSbh * 22);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(4, false, true)), kSbh * 16);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(8, false, true)), kSbh * 13);
  for (int t : {2, 4, 8}) {
    EXPECT_DOUBLE_EQ(layer_activation_bytes(gpt2_xl(), tp(t, true, true)), kSbh * 34 / t) << t;
  }
}

TEST(ActivationMemory, WithoutDropoutNoMasksAndNoDroppedCopy) {
  TransformerActivations x = gpt2_xl();
  x.dropout = false;
  const double as2b = 25.0 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(attention_activations(x).replicated, 4 * kSbh);
  EXPECT_DOUBLE_EQ(attention_activations(x).attention_core, 2 * as2b);
  EXPECT_DOUBLE_EQ(mlp_activations(x).replicated, 4 * kSbh);
}

TEST(ActivationMemory, FourByteElementsAndAnotherMlpWidth) {
  TransformerActivations x = gpt2_xl();
  x.elem = 4;
  x.mlp = 2 * x.hidden;
  EXPECT_DOUBLE_EQ(attention_activations(x).replicated, 9 * kSbh);  // 4 + 4 + a 1-byte mask
  EXPECT_DOUBLE_EQ(mlp_activations(x).split, 2 * 2 * kSbh * 4);     // two s x m outputs, 4 bytes
}

}  // namespace
}  // namespace pipetwin::zoo
