#include "profiles/zoo/activation_memory.hpp"

namespace pipetwin::zoo {

namespace {

double sbh(const TransformerActivations& x) {
  return x.seq * x.micro_batch * x.hidden;
}

}  // namespace

SublayerActivations attention_activations(const TransformerActivations& x) {
  const double e = x.elem, mask = x.dropout ? 1.0 : 0.0;
  SublayerActivations a;
  // LN input, QKV input (the LN's output), the output dropout's mask.
  a.replicated = sbh(x) * (2 * e + mask);
  // Softmax output; with dropout its mask and the dropped copy P V reads.
  const double probs = x.heads * x.seq * x.seq * x.micro_batch;
  a.attention_core = probs * (e + (x.dropout ? 1.0 + e : 0.0));
  // Q, K, V, the projection's input, and the core.
  a.split = sbh(x) * 4 * e + a.attention_core;
  return a;
}

SublayerActivations mlp_activations(const TransformerActivations& x) {
  const double e = x.elem, mask = x.dropout ? 1.0 : 0.0;
  const double m = x.mlp > 0 ? x.mlp : 4 * x.hidden;
  SublayerActivations a;
  a.replicated = sbh(x) * (2 * e + mask);       // LN input, fc1 input, mask
  a.split = x.seq * x.micro_batch * m * 2 * e;  // fc1 output, GeLU output
  return a;
}

double per_device_bytes(const SublayerActivations& a, const TensorParallel& tp) {
  const double t = tp.size;
  const double split = a.split - (tp.selective_recompute ? a.attention_core : 0.0);
  const double replicated = tp.sequence_parallel ? a.replicated / t : a.replicated;
  return replicated + split / t;
}

double layer_activation_bytes(const TransformerActivations& x, const TensorParallel& tp) {
  return per_device_bytes(attention_activations(x), tp) + per_device_bytes(mlp_activations(x), tp);
}

}  // namespace pipetwin::zoo
