// C10dTransport: devices spread over processes, connected by c10d process groups.
//
// Each global schedule device is hosted by one rank. Messages between devices of the same rank
// go through an in-process mailbox; between ranks through the world group's send/recv (Gloo on
// CPU), with the message tag as c10d tag. The all-reduce of a stage first sums the replicas a
// rank hosts (in-process, in device order), then all-reduces one tensor per rank over a group of
// exactly the ranks that host the stage, and hands the result back to the local replicas.
//
// Thread-safety: thread-safe for send/recv; allreduce_sum of one group must be called from one
// thread per rank in the same order on every rank (the executor's collective stream does so).
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "exec/platform/abort.hpp"
#include "exec/platform/distributed.hpp"
#include "exec/platform/inprocess_transport.hpp"

namespace pipetwin::exec {

class C10dTransport : public Transport {
 public:
  // device_rank[d]: the rank hosting global device d.
  C10dTransport(Distributed& dist, std::vector<int> device_rank, AbortSignal& abort);

  // Creates the process groups the all-reduces over `device_sets` need. Every rank must call it
  // with the same list, before any all-reduce.
  void prepare_groups(const std::vector<std::vector<int>>& device_sets);

  void send(const at::Tensor& t, int from, int to, int64_t tag) override;
  at::Tensor recv(int from, int to, int64_t tag, const at::Tensor& like) override;
  void wait_posted(int from, int to, int64_t tag) override {
    if (rank_of(from) == rank_of(to)) local_.wait_posted(from, to, tag);
  }
  void allreduce_sum(std::vector<at::Tensor>& tensors, const std::vector<int>& devices, int me,
                     int64_t tag) override;

 private:
  int rank_of(int device) const { return device_rank_[static_cast<size_t>(device)]; }

  Distributed& dist_;
  std::vector<int> device_rank_;
  AbortSignal& abort_;
  InProcessTransport local_;
  std::map<std::vector<int>, CommGroup*> groups_;  // by sorted device set
};

// The c10d tag of a message: c10d tags are 32-bit; throws if `tag` does not fit.
int c10d_tag(int64_t tag);

}  // namespace pipetwin::exec
