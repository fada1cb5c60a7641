#include "models/tensor_parallel.hpp"

#include <cstdint>
#include <limits>

#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <torch/autograd.h>

#include "core/error.hpp"
#include "models/dropout.hpp"

namespace pipetwin::models {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The communicator rides in the autograd context as an integer (ctx->saved_data holds IValues).
int64_t handle(TpComm& comm) {
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(&comm));
}
TpComm& comm_of(AutogradContext* ctx) {
  return *reinterpret_cast<TpComm*>(static_cast<intptr_t>(ctx->saved_data["comm"].toInt()));
}

at::Tensor summed(const at::Tensor& x, TpComm& comm) {
  at::Tensor y = x.clone(at::MemoryFormat::Contiguous);
  comm.all_reduce(y, TpComm::Op::kSum);
  return y;
}

// This rank's chunk of `x` along `dim` (a copy, so the saved graph does not hold the whole).
at::Tensor own_chunk(const at::Tensor& x, int64_t dim, TpComm& comm) {
  const int64_t n = x.size(dim) / comm.size();
  return x.narrow(dim, comm.rank() * n, n).clone(at::MemoryFormat::Contiguous);
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return x;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {summed(grad[0], comm_of(ctx)), at::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, int64_t comm) {
    return summed(x, *reinterpret_cast<TpComm*>(static_cast<intptr_t>(comm)));
  }
  static variable_list backward(AutogradContext*, variable_list grad) {
    return {grad[0], at::Tensor()};
  }
};

// Sequence parallelism's pair over dimension 1 (Korthikanti et al., Section 4.2.2).
struct GatherFromSequence : torch::autograd::Function<GatherFromSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return reinterpret_cast<TpComm*>(static_cast<intptr_t>(comm))->all_gather(x, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {comm_of(ctx).reduce_scatter(grad[0], 1), at::Tensor()};
  }
};

struct ReduceScatterToSequence : torch::autograd::Function<ReduceScatterToSequence> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return reinterpret_cast<TpComm*>(static_cast<intptr_t>(comm))->reduce_scatter(x, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {comm_of(ctx).all_gather(grad[0], 1), at::Tensor()};
  }
};

struct GatherReplicated : torch::autograd::Function<GatherReplicated> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t comm) {
    ctx->saved_data["comm"] = comm;
    return reinterpret_cast<TpComm*>(static_cast<intptr_t>(comm))->all_gather(x, 1);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {own_chunk(grad[0], 1, comm_of(ctx)), at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_tp(const at::Tensor& x, TpComm& comm) {
  return CopyToTp::apply(x, handle(comm));
}
at::Tensor reduce_from_tp(const at::Tensor& x, TpComm& comm) {
  return ReduceFromTp::apply(x, handle(comm));
}
at::Tensor gather_from_sequence(const at::Tensor& x, TpComm& comm) {
  return GatherFromSequence::apply(x, handle(comm));
}
at::Tensor reduce_scatter_to_sequence(const at::Tensor& x, TpComm& comm) {
  return ReduceScatterToSequence::apply(x, handle(comm));
}
at::Tensor gather_replicated(const at::Tensor& x, TpComm& comm) {
  return GatherReplicated::apply(x, handle(comm));
}

at::Tensor shard_of(const at::Tensor& full, int64_t dim, int rank, int size,
                    const std::string& field) {
  const int64_t n = full.size(dim);
  if (n % size != 0) {
    throw InputError(fmt::format("tensor parallelism: {} ({}) not divisible by the group size {}",
                                 field, n, size));
  }
  const int64_t part = n / size;
  return full.narrow(dim, rank * part, part).clone(at::MemoryFormat::Contiguous);
}

at::Tensor sliced_dropout(const at::Tensor& x, double p, uint64_t site, bool training,
                          at::IntArrayRef full, int64_t dim, int64_t start) {
  if (!training || p == 0) return x;
  // keyed_dropout(ones) is the scaled mask itself (ones * noise), drawn at the full shape.
  const at::Tensor mask = keyed_dropout(at::ones(full, x.options()), p, site, true);
  return x * mask.narrow(dim, start, x.size(dim));
}

at::Tensor vocab_parallel_embedding(const at::Tensor& shard, const at::Tensor& ids, int64_t start) {
  const int64_t rows = shard.size(0);
  const at::Tensor outside = (ids < start).logical_or(ids >= start + rows);
  const at::Tensor local = (ids - start).masked_fill(outside, 0);
  return at::embedding(shard, local).masked_fill(outside.unsqueeze(-1), 0);
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                                        TpComm& comm) {
  const int64_t cols = logits.size(-1), start = comm.rank() * cols;
  at::Tensor max;
  {
    // The shift cancels in the loss and its gradient; it only keeps exp() in range.
    at::NoGradGuard no_grad;
    max = std::get<0>(logits.max(-1)).contiguous();
    comm.all_reduce(max, TpComm::Op::kMax);
  }
  const at::Tensor shifted = logits - max.unsqueeze(-1);
  const at::Tensor sum_exp = reduce_from_tp(shifted.exp().sum(-1), comm);
  const at::Tensor outside = (target < start).logical_or(target >= start + cols);
  const at::Tensor local = (target - start).masked_fill(outside, 0);
  const at::Tensor picked =
      shifted.gather(-1, local.unsqueeze(-1)).squeeze(-1).masked_fill(outside, 0);
  return sum_exp.log() - reduce_from_tp(picked, comm);
}

at::Tensor vocab_parallel_argmax(const at::Tensor& logits, TpComm& comm) {
  at::NoGradGuard no_grad;
  const int64_t start = comm.rank() * logits.size(-1);
  const auto [local_max, local_index] = logits.max(-1);
  at::Tensor global_max = local_max.contiguous();
  comm.all_reduce(global_max, TpComm::Op::kMax);
  // The smallest global index holding the maximum, as the maximum of minus the index.
  const double none = -static_cast<double>(std::numeric_limits<int32_t>::max());
  at::Tensor candidate =
      at::where(local_max == global_max, -(local_index + start).to(at::kDouble),
                at::full_like(local_max, none, local_max.options().dtype(at::kDouble)))
          .contiguous();
  comm.all_reduce(candidate, TpComm::Op::kMax);
  return (-candidate).to(at::kLong);
}

}  // namespace pipetwin::models
