#include "exec/platform/tp_comm.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin::exec {

namespace {

// Gloo reads host memory (c10d_transport.cpp): a GPU tensor goes through a host copy.
at::Tensor on_host(const at::Tensor& t) {
  return t.is_cuda() ? t.to(at::kCPU).contiguous() : t.contiguous();
}

}  // namespace

// ---- C10dTpComm ------------------------------------------------------------------------------

C10dTpComm::C10dTpComm(CommGroup& group, std::chrono::milliseconds timeout)
    : group_(group), timeout_(timeout) {}

int C10dTpComm::rank() const {
  return group_.getRank();
}

int C10dTpComm::size() const {
  return group_.getSize();
}

void C10dTpComm::all_reduce(at::Tensor& t, Op op) {
  std::vector<at::Tensor> buf{on_host(t)};
  c10d::AllreduceOptions o;
  o.reduceOp = op == Op::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  o.timeout = timeout_;
  group_.allreduce(buf, o)->wait(timeout_);
  if (buf[0].data_ptr() != t.data_ptr()) t.copy_(buf[0]);
}

at::Tensor C10dTpComm::all_gather(const at::Tensor& t, int64_t dim) {
  std::vector<at::Tensor> in{on_host(t)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < size(); ++r) out[0].push_back(at::empty_like(in[0]));
  c10d::AllgatherOptions o;
  o.timeout = timeout_;
  group_.allgather(out, in, o)->wait(timeout_);
  return at::cat(out[0], dim).to(t.device());
}

at::Tensor C10dTpComm::reduce_scatter(const at::Tensor& t, int64_t dim) {
  at::Tensor sum = t.clone(at::MemoryFormat::Contiguous);
  all_reduce(sum, Op::kSum);
  const int64_t n = sum.size(dim) / size();
  return sum.narrow(dim, rank() * n, n).contiguous();
}

// ---- in-process ------------------------------------------------------------------------------

void InProcessTpGroup::barrier(std::unique_lock<std::mutex>& lock) {
  const int64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  if (!cv_.wait_for(lock, std::chrono::seconds(60), [&] { return generation_ != gen; }))
    throw std::runtime_error("InProcessTpGroup: a rank did not arrive within 60 s");
}

std::vector<at::Tensor> InProcessTpGroup::exchange(int rank, const at::Tensor& mine) {
  std::unique_lock<std::mutex> lock(mu_);
  slots_[static_cast<size_t>(rank)] = mine.clone(at::MemoryFormat::Contiguous);
  barrier(lock);
  std::vector<at::Tensor> all = slots_;
  barrier(lock);  // nobody overwrites a slot before every rank has read them all
  return all;
}

void InProcessTpComm::all_reduce(at::Tensor& t, Op op) {
  const auto all = group_->exchange(rank_, t);
  at::Tensor acc = all[0].clone();
  for (size_t r = 1; r < all.size(); ++r)
    acc = op == Op::kMax ? at::maximum(acc, all[r]) : acc.add_(all[r]);
  t.copy_(acc);
}

at::Tensor InProcessTpComm::all_gather(const at::Tensor& t, int64_t dim) {
  return at::cat(group_->exchange(rank_, t), dim);
}

at::Tensor InProcessTpComm::reduce_scatter(const at::Tensor& t, int64_t dim) {
  at::Tensor sum = t.clone(at::MemoryFormat::Contiguous);
  all_reduce(sum, Op::kSum);
  const int64_t n = sum.size(dim) / size();
  return sum.narrow(dim, rank_ * n, n).contiguous();
}

// ---- job layout ------------------------------------------------------------------------------

TensorParallelJob join_tensor_parallel(Distributed& dist, int t, int groups) {
  if (dist.world_size() != groups * t) {
    throw InputError(fmt::format(
        "--nproc: tensor parallelism {} x {} schedule devices (dp x devices per replica) needs {} "
        "ranks, the job has {}",
        t, groups, groups * t, dist.world_size()));
  }
  TensorParallelJob job;
  job.tp_rank = dist.rank() % t;
  const int group = dist.rank() / t;
  std::vector<int> slice, members;
  for (int g = 0; g < groups; ++g) slice.push_back(g * t + job.tp_rank);
  for (int k = 0; k < t; ++k) members.push_back(group * t + k);
  job.slice = std::make_unique<Distributed>(dist, slice, fmt::format("tp-slice{}", job.tp_rank));
  job.comm = std::make_shared<C10dTpComm>(dist.group(members, fmt::format("tp-group{}", group)),
                                          dist.timeout());
  return job;
}

}  // namespace pipetwin::exec
