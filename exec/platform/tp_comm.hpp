// The tensor-parallel group's collectives (models/tensor_parallel.hpp's TpComm) over the wires of
// exec/platform/, and the layout of a tensor-parallel c10d job.
//
//   C10dTpComm       a c10d process group (Gloo on CPU) of the group's t ranks. A reduce-scatter
//                    is an all-reduce and this rank's chunk of it (LibTorch 1.13's Gloo has no
//                    reduce-scatter; the ring cost model of core/tensor_parallel.hpp counts the
//                    reduce-scatter's bytes, this sends the all-reduce's). GPU tensors are staged
//                    through host memory, as C10dTransport does.
//   InProcessTpComm  t threads of one process sharing an InProcessTpGroup (tests): every
//                    collective is an exchange of clones, the sums added in rank order.
//
// Job layout (TensorParallelJob): with tensor-parallel size t, a job of dp x devices_per_replica
// x t ranks runs one schedule device per group of t consecutive ranks:
//     rank = (replica * devices_per_replica + device) * t + tp_rank.
// The ranks with one tp_rank form a "slice", a job of dp x devices_per_replica ranks on its own
// (a sub-view of the Distributed, its rank the schedule device's index): a slice runs the whole
// pipeline on its shards as a run without tensor parallelism would — stage-to-stage transfers
// between the same tp_rank of adjacent groups, the data-parallel all-reduce over the same
// (stage, tp_rank) of every replica — and a group's t ranks meet in the TpComm inside the layers.
// Rank 0 of slice 0 is rank 0 of the job, which reports.
//
// Thread-safety: a TpComm's collectives are issued by one thread at a time per rank, in the same
// order on every rank of the group; an InProcessTpGroup is shared by its t threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "exec/platform/distributed.hpp"
#include "models/tensor_parallel.hpp"

namespace pipetwin::exec {

class C10dTpComm : public models::TpComm {
 public:
  // `group`: the t ranks of this rank's tensor-parallel group, this rank at `rank` in it.
  C10dTpComm(CommGroup& group, std::chrono::milliseconds timeout);
  int rank() const override;
  int size() const override;
  void all_reduce(at::Tensor& t, Op op) override;
  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override;
  at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) override;

 private:
  CommGroup& group_;
  std::chrono::milliseconds timeout_;
};

// What the t threads of an in-process group share.
class InProcessTpGroup {
 public:
  explicit InProcessTpGroup(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  int size() const { return size_; }
  // Every rank's `mine` (cloned), by rank; blocks until all t have called.
  std::vector<at::Tensor> exchange(int rank, const at::Tensor& mine);

 private:
  void barrier(std::unique_lock<std::mutex>& lock);

  int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<at::Tensor> slots_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

class InProcessTpComm : public models::TpComm {
 public:
  InProcessTpComm(std::shared_ptr<InProcessTpGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  void all_reduce(at::Tensor& t, Op op) override;
  at::Tensor all_gather(const at::Tensor& t, int64_t dim) override;
  at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim) override;

 private:
  std::shared_ptr<InProcessTpGroup> group_;
  int rank_;
};

// This rank's place in a tensor-parallel c10d job (above).
struct TensorParallelJob {
  int tp_rank = 0;
  std::unique_ptr<Distributed> slice;    // the ranks of this tp_rank, one per schedule device
  std::shared_ptr<models::TpComm> comm;  // this rank's tensor-parallel group
};
// Joins the job's slice and tensor-parallel group: every rank of `dist` calls it; InputError when
// the world is not `groups` x t ranks.
TensorParallelJob join_tensor_parallel(Distributed& dist, int t, int groups);

}  // namespace pipetwin::exec
