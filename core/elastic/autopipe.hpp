// AutoPipe: elastic pipelining (PipeTransformer Section 3.2, Algorithm 1).
//
// Algorithm 1, as implemented here:
//   m_partition (lines 3-10): "F_frozen = Sequential(); model size S_frozen = 0 ... for layer
//     index = L_frozen to L do f_ATT_i, f_MLP_i <- f_i; F_pipe.append(f_ATT_i) ...". The frozen
//     layers go to F_frozen, which lives "in the first device of a pipeline"; every active
//     sub-layer (a profile layer: profiles already list attention and MLP separately, see
//     transformer_layers.hpp) goes to F_pipe with its parameter size.
//   load_balance (lines 11-24): for partition k = 0..K-1: mean = S_total / (K - k);
//     var = np.var(S_pipe[L_assigned:]) / (K - k); add sub-layers to partition k while
//     "criterion = B_S[k] + S_k < mean + var" (but see "<=" below), subtracting each from
//     S_total.
//   compression (lines 25-33): "B_L, B_S = load_balance(F_pipe, S_pipe, K/2); ...
//     M_GPU(T) = max(B_S) // Equation 2; if M_GPU(T) < M_GPU(0) then K = K/2".
//   chunks (line 35): "Pipe(F_pipe, chunks = get_optimal_chunks(K))", M searched "by
//     enumerating M values ranging from K to 6K" (Section 3.2.3) with a cost the caller gives.
//
// Details the pseudo-code leaves open (it is garbled in the paper's two-column print), and what
// we chose:
//  - Sizes are in millions of parameters (param_bytes / bytes per element / 1e6), as in the
//    appendix's "12 million parameters". The unit matters: `var` is in size squared and is
//    added to `mean`; in bytes it would dwarf the mean and put every layer on the first device.
//  - The frozen layers weigh lambda_frozen (default 1/6, "the memory footprint ratio of a frozen
//    layer over the same active layer") times their size and are preassigned to partition 0:
//    line 19's "B_S - S_frozen (1 - lambda_frozen) + S_k" and line 28's correction of B_S[0]
//    both amount to counting F_frozen at lambda_frozen in partition 0. S_total starts with that
//    weight, so the first mean accounts for it.
//  - A sub-layer joins while criterion <= mean + var, not "<": with "<", equal sub-layers
//    (var = 0) could never fill a partition up to the mean, and 12 equal layers over 4
//    partitions would split 2, 2, 2, 6 instead of 3, 3, 3, 3.
//  - Every partition gets at least one sub-layer (Pipe partitions cannot be empty) and leaves
//    one for each later partition; the last partition takes what remains. The printed loop
//    would leave the last partition empty when its final sub-layer equals mean + var exactly.
//  - Equation 2 in the text reads "compress the pipeline if M_GPU(T) <= M_GPU(0)"; the
//    pseudo-code has "<". We follow the equation (<=), and halve K while it holds ("AutoPipe will
//    always attempt to divide the pipeline length K by 2"). When fewer active sub-layers than K
//    remain, K is halved regardless. M_GPU(0) is max(B_S) of the partition at T = 0 (no frozen
//    layers, initial K).
//  - Chunk candidates are the M in [K, 6K] that divide the per-replica batch (micro-batches must
//    be equal); if none does, the largest divisor below 6K.
//
// Thread-safety: free functions are pure; AutoPipe is a value type, not thread-safe to mutate.
#pragma once

#include <functional>
#include <vector>

#include "core/elastic/transformer_layers.hpp"
#include "core/partition/autopipe_balance.hpp"
#include "core/profile.hpp"

namespace pipetwin::elastic {

inline constexpr double kDefaultLambdaFrozen = 1.0 / 6.0;

// Lines 25-33: the compressed K (halving while Equation 2 holds against `initial_memory`).
int compressed_length(const SubLayers& sub, int K, double initial_memory, double lambda_frozen);

// M candidates for pipeline length K and a per-replica batch (see above).
std::vector<int> chunk_candidates(int K, int batch);
// get_optimal_chunks: the candidate with the lowest cost (ties: the smaller M).
int choose_chunks(int K, int batch, const std::function<double(int)>& cost);

// Algorithm 1 driven by freeze notifications, as a trainer or the simulator uses it.
class AutoPipe {
 public:
  // Partitions the model at T = 0 over `initial_K` devices and records M_GPU(0).
  AutoPipe(const Profile& profile, int initial_K, double lambda_frozen = kDefaultLambdaFrozen);

  // A freeze notification: re-partitions with `frozen` transformer layers frozen, halving K
  // while Equation 2 holds (K never grows back). InputError when every layer would be frozen
  // (the Pipe needs an active layer).
  const PipelineLayout& on_freeze(int frozen);
  // The layout of `frozen` transformer layers frozen on K partitions as it stands, without
  // compression (K given, not searched); the same InputErrors as on_freeze, and K < 1.
  PipelineLayout layout_for(int frozen, int K) const;
  // Takes the state layout_for(frozen, K) as the current one, from which the next freeze
  // notification compresses: a state read back from a checkpoint, or a pipeline shortened to the
  // devices a job has left.
  const PipelineLayout& restore(int frozen, int K);

  const PipelineLayout& layout() const { return layout_; }
  const TransformerLayers& transformer_layers() const { return tl_; }
  double initial_memory() const { return initial_memory_; }
  double lambda_frozen() const { return lambda_; }

 private:
  // m_partition with `frozen` transformer layers frozen; InputError when nothing stays active.
  SubLayers active(int frozen) const;

  std::vector<double> sizes_;  // m_size of every profile layer
  TransformerLayers tl_;
  double lambda_;
  double initial_memory_ = 0;
  PipelineLayout layout_;
};

}  // namespace pipetwin::elastic
