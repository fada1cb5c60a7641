// Tensor parallelism: a stage spread over a group of t devices, each holding a 1/t shard of its
// layers, as Megatron-LM splits a transformer (Shoeybi et al., "Megatron-LM: Training
// Multi-Billion Parameter Language Models Using Model Parallelism", 2019, Section 3) and, with
// sequence parallelism and selective activation recomputation, as Korthikanti et al. ("Reducing
// Activation Recomputation in Large Transformer Models", MLSys 2023; arXiv 2022) do.
//
// A profile of tensor-parallel size t describes ONE shard: its layers' times, bytes and
// parameters are one device's of the group (profiles/zoo/tensor_parallel.hpp makes it from the
// whole model), and every layer lists the collectives the group runs inside its forward and its
// backward (TpCollective: the kind and the bytes of the whole tensor per sample). A plan with
// tp = t runs such a profile; each schedule device is a group (core/plan.hpp).
//
// The collectives are priced on a ring over the group's link (core/collective.hpp's model, the
// topology's rates where the cluster has one), S bytes, t ranks, bandwidth B, latency alpha:
//   all-reduce       2(t-1)/t * S/B + 2(t-1) * alpha
//   all-gather       (t-1)/t * S/B + (t-1) * alpha   (each rank ends with S, holding S/t)
//   reduce-scatter   (t-1)/t * S/B + (t-1) * alpha   (each rank ends with its S/t of the sum)
// so a reduce-scatter and an all-gather cost what the all-reduce they replace does (Korthikanti
// et al., Section 4.2.2: sequence parallelism adds no communication).
//
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_io.hpp"

namespace pipetwin {

enum class CollectiveKind : uint8_t { kAllReduce, kAllGather, kReduceScatter };
const char* collective_name(CollectiveKind kind);  // "all_reduce", "all_gather", "reduce_scatter"
bool parse_collective(const std::string& name, CollectiveKind& out);

// One collective of a tensor-parallel group inside a layer's pass.
struct TpCollective {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  double bytes_per_sample = 0;  // the whole (unsharded) tensor, per sample of the micro-batch
};

// What a tensor-parallel profile is a shard of.
struct TensorParallel {
  int size = 1;                      // t: devices per group; 1: no tensor parallelism
  bool sequence_parallel = false;    // norms, dropout, residuals split over the sequence too
  bool selective_recompute = false;  // the attention core recomputed in the backward
  bool active() const { return size > 1; }
  bool operator==(const TensorParallel& o) const {
    return size == o.size && sequence_parallel == o.sequence_parallel &&
           selective_recompute == o.selective_recompute;
  }
  bool operator!=(const TensorParallel& o) const { return !(*this == o); }
};

// "t=2, sequence parallel, selective recompute" / "t=1".
std::string describe(const TensorParallel& tp);

// Bytes one rank sends for a collective of `bytes` over t ranks on a ring: 2(t-1)/t * bytes for an
// all-reduce, (t-1)/t * bytes for an all-gather or a reduce-scatter; 0 for t = 1.
double ring_bytes_sent(CollectiveKind kind, int t, double bytes);
// Its time on a ring of t ranks over links of `bandwidth` bytes/s and `latency` s (above).
double ring_collective_s(CollectiveKind kind, int t, double bytes, double bandwidth,
                         double latency);

// JSON: {"size": t, "sequence_parallel": b, "selective_recompute": b}; collective lists as
// [{"kind": "all_reduce", "bytes_per_sample": x}, ...]. Errors name the field.
TensorParallel tensor_parallel_from_json(const JsonView& j);
Json tensor_parallel_to_json(const TensorParallel& tp);
std::vector<TpCollective> collectives_from_json(const JsonView& j);
Json collectives_to_json(const std::vector<TpCollective>& list);
// The one-line refusal of a tensor-parallel setting on its own ("" when it is sound): t < 1, or
// sequence parallelism without tensor parallelism (it splits the sequence over the group).
// Selective recomputation is sound at t = 1 too (Korthikanti et al., Section 5).
std::string tensor_parallel_refusal(const TensorParallel& tp);

}  // namespace pipetwin
