#include "profiles/zoo/tensor_parallel.hpp"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "profiles/zoo/activation_memory.hpp"

namespace pipetwin::zoo {

namespace {

bool splittable_family(const std::string& family) {
  return family == "vit" || family == "bert" || family == "gpt2";
}

bool is_tail_op(const std::string& name) {
  return name == "norm" || name == "out_dropout" || name == "residual";
}

const OpSpec* find_op(const ZooLayer& layer, const std::string& name) {
  for (const auto& op : layer.ops) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

// Parameters an op owns that the split divides (weights of linears, embedding tables).
double op_params(const OpSpec& op) {
  if (op.kind == OpKind::embedding) return static_cast<double>(op.k) * static_cast<double>(op.n);
  if (op.kind != OpKind::gemm || !op.weight) return 0;
  return static_cast<double>(op.k) * static_cast<double>(op.n) +
         (op.bias ? static_cast<double>(op.n) : 0.0);
}

// Forward FLOPs per sample of a product or an attention core (element-wise ops have none).
double op_flops(const OpSpec& op) {
  if (op.kind == OpKind::gemm) {
    return 2.0 * op.groups * op.rows * static_cast<double>(op.n) * static_cast<double>(op.k);
  }
  if (op.kind == OpKind::attention) {
    return 4.0 * static_cast<double>(op.heads) * static_cast<double>(op.seq) *
           static_cast<double>(op.kv_seq) * static_cast<double>(op.head_dim);
  }
  return 0;
}

OpSpec shard_op(OpSpec op, TpSplit split, const TensorParallel& tp) {
  const int t = tp.size;
  if (split == TpSplit::column) op.n /= t;
  if (split == TpSplit::row || split == TpSplit::vocab) op.k /= t;  // input features, table rows
  if (split == TpSplit::heads) op.heads /= t;
  const bool sequence = split == TpSplit::sequence && tp.sequence_parallel && !op.per_batch;
  if (split == TpSplit::inner || sequence) op.elems /= t;
  return op;
}

// The Korthikanti et al. parts of a transformer sub-layer (activation_memory.hpp), read off its
// ops; false for a layer that is not one.
bool sublayer_parts(const ZooLayer& layer, SublayerActivations& parts) {
  const OpSpec* out_dropout = find_op(layer, "out_dropout");
  TransformerActivations x;
  x.dropout = out_dropout != nullptr && out_dropout->dropout > 0;
  if (layer.kind == "attention") {
    const OpSpec* core = find_op(layer, "attend");
    if (core == nullptr) return false;
    x.seq = static_cast<double>(core->seq);
    x.heads = static_cast<double>(core->heads);
    x.hidden = static_cast<double>(core->heads * core->head_dim);
    parts = attention_activations(x);
    return true;
  }
  if (layer.kind == "mlp") {
    const OpSpec* fc1 = find_op(layer, "fc1");
    if (fc1 == nullptr) return false;
    x.seq = fc1->rows;
    x.hidden = static_cast<double>(fc1->k);
    x.mlp = static_cast<double>(fc1->n);
    parts = mlp_activations(x);
    return true;
  }
  return false;
}

// Saved elements per sample of one shard of `layer` (tensor_parallel.hpp, "Activations").
double shard_saved(const ZooLayer& layer, const TensorParallel& tp) {
  const double t = tp.size;
  SublayerActivations parts;
  if (sublayer_parts(layer, parts)) {
    return layer.saved_elems * per_device_bytes(parts, tp) / per_device_bytes(parts, {});
  }
  if (layer.kind == "embedding") {
    return tp.sequence_parallel ? layer.saved_elems / t : layer.saved_elems;
  }
  if (const OpSpec* logits = find_op(layer, "loss.log_softmax");
      logits != nullptr && find_op(layer, "lm_head") != nullptr) {
    const double rest = layer.saved_elems - logits->elems;
    return (tp.sequence_parallel ? rest / t : rest) + logits->elems / t;
  }
  return layer.saved_elems;
}

ZooLayer shard_layer(const std::string& family, const ZooLayer& whole, const TensorParallel& tp) {
  ZooLayer l = whole;
  double params = static_cast<double>(whole.params), flops_cut = 0, flops_all = 0;
  l.ops.clear();
  for (const auto& op : whole.ops) {
    const OpSpec cut = shard_op(op, op_split(family, whole, op), tp);
    params -= op_params(op) - op_params(cut);
    flops_cut += op_flops(cut);
    flops_all += op_flops(op);
    l.ops.push_back(cut);
  }
  l.params = static_cast<int64_t>(params + 0.5);
  if (flops_all > 0) l.forward_flops = whole.forward_flops * flops_cut / flops_all;
  l.saved_elems = shard_saved(whole, tp);
  if (whole.saved_elems > 0)
    l.traffic_elems = whole.traffic_elems * l.saved_elems / whole.saved_elems;
  const bool sequence_output =
      whole.kind == "attention" || whole.kind == "mlp" || whole.kind == "embedding";
  if (tp.sequence_parallel && sequence_output) l.output_elems = whole.output_elems / tp.size;
  return l;
}

}  // namespace

TpSplit op_split(const std::string& family, const ZooLayer& layer, const OpSpec& op) {
  if (!splittable_family(family)) return TpSplit::none;
  if (layer.kind == "attention") {
    if (op.name == "qkv") return TpSplit::column;
    if (op.name == "attend") return TpSplit::heads;
    if (op.name == "proj") return TpSplit::row;
    return is_tail_op(op.name) ? TpSplit::sequence : TpSplit::none;
  }
  if (layer.kind == "mlp") {
    if (op.name == "fc1") return TpSplit::column;
    if (op.name == "act" || op.name == "dropout") return TpSplit::inner;
    if (op.name == "fc2") return TpSplit::row;
    return is_tail_op(op.name) ? TpSplit::sequence : TpSplit::none;
  }
  if (layer.kind == "embedding") {
    if (op.kind == OpKind::embedding) return TpSplit::vocab;
    const bool whole_sequence = op.kind == OpKind::elementwise && !op.per_batch && op.name != "cat";
    return whole_sequence ? TpSplit::sequence : TpSplit::none;
  }
  if (layer.kind == "head" && find_op(layer, "lm_head") != nullptr) {
    if (op.name == "lm_head") return TpSplit::column;
    if (op.name.rfind("loss.", 0) == 0) return TpSplit::inner;
    if (op.name == "ln_f") return TpSplit::sequence;
  }
  return TpSplit::none;
}

std::string tensor_parallel_refusal(const ZooModel& model, const TensorParallel& tp) {
  if (const std::string why = pipetwin::tensor_parallel_refusal(tp); !why.empty()) return why;
  if (tp.size == 1) return "";
  if (!splittable_family(model.family)) {
    return fmt::format(
        "{}: tensor parallelism splits the transformer families vit, bert and gpt2 "
        "as Megatron-LM does; {} has no split here",
        model.name, model.family);
  }
  for (const auto& layer : model.layers) {
    for (const auto& op : layer.ops) {
      const TpSplit split = op_split(model.family, layer, op);
      int64_t count = 0;
      std::string what;
      if (split == TpSplit::heads) count = op.heads, what = "attention heads";
      if (split == TpSplit::column) count = op.n, what = op.name + " output features";
      if (split == TpSplit::row) count = op.k, what = op.name + " input features";
      if (split == TpSplit::vocab) count = op.k, what = "vocabulary rows";
      if (count > 0 && count % tp.size != 0) {
        return fmt::format(
            "{}: {} {} of layer \"{}\" are not divisible by the tensor-parallel "
            "size {}",
            model.name, count, what, layer.name, tp.size);
      }
    }
  }
  return "";
}

ZooModel shard_model(const ZooModel& whole, const TensorParallel& tp, const std::string& origin) {
  if (const std::string why = tensor_parallel_refusal(whole, tp); !why.empty()) {
    throw InputError(fmt::format("{}: {}", origin, why));
  }
  if (tp == TensorParallel{}) return whole;
  ZooModel shard = whole;
  shard.tied_params = 0;
  for (size_t l = 0; l < whole.layers.size(); ++l) {
    shard.layers[l] = shard_layer(whole.family, whole.layers[l], tp);
  }
  for (auto& edge : shard.edges) {
    if (edge.tokens || edge.from < 0 || edge.from >= whole.num_layers()) continue;
    const auto from = static_cast<size_t>(edge.from);
    const double whole_out = whole.layers[from].output_elems;
    if (whole_out > 0) edge.elems *= shard.layers[from].output_elems / whole_out;
  }
  shard.description += fmt::format("; tensor-parallel shard ({})", describe(tp));
  return shard;
}

LayerCollectives layer_collectives(const ZooModel& whole, int l, const TensorParallel& tp,
                                   double elem) {
  LayerCollectives c;
  if (tp.size < 2) return c;
  const ZooLayer& layer = whole.layers[static_cast<size_t>(l)];
  const bool sp = tp.sequence_parallel;
  auto add = [elem](std::vector<TpCollective>& to, CollectiveKind kind, double elems) {
    to.push_back({kind, elems * elem});
  };
  const CollectiveKind reduce = sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce;
  if (layer.kind == "attention" || layer.kind == "mlp") {
    const double sh = layer.output_elems;
    if (sp) add(c.forward, CollectiveKind::kAllGather, sh);
    add(c.forward, reduce, sh);
    if (sp) add(c.backward, CollectiveKind::kAllGather, sh);
    add(c.backward, reduce, sh);
  } else if (layer.kind == "embedding") {
    const bool vocab = std::any_of(layer.ops.begin(), layer.ops.end(),
                                   [](const OpSpec& op) { return op.kind == OpKind::embedding; });
    if (vocab) add(c.forward, reduce, layer.output_elems);
  } else if (const OpSpec* ln = find_op(layer, "ln_f");
             ln != nullptr && find_op(layer, "lm_head")) {
    if (sp) add(c.forward, CollectiveKind::kAllGather, ln->elems);
    // The vocab-parallel loss: the logits' max, the target's logit and the sum of exponentials,
    // each an all-reduce of one float32 per token.
    const double tokens = find_op(layer, "lm_head")->rows;
    for (int i = 0; i < 3; ++i) c.forward.push_back({CollectiveKind::kAllReduce, tokens * 4.0});
    add(c.backward, reduce, ln->elems);
  } else if (const OpSpec* cls = find_op(layer, "cls"); cls != nullptr && sp) {
    add(c.forward, CollectiveKind::kAllGather, cls->elems);
    add(c.backward, CollectiveKind::kReduceScatter, cls->elems);
  }
  return c;
}

}  // namespace pipetwin::zoo
