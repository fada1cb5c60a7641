// InProcessTransport: devices are threads of one process.
//
// A send posts the tensor in the receiver's mailbox; the receiver copies it into memory it owns
// (what a device-to-device copy does, and what the memory tracker then attributes to it). The
// all-reduce is a rendezvous: every participant deposits its tensors, the sum is formed in device
// order, and each participant copies it back. All waits honour the AbortSignal.
//
// Thread-safety: thread-safe.
#pragma once

#include <map>
#include <mutex>
#include <tuple>

#include "exec/platform/abort.hpp"
#include "exec/platform/transport.hpp"
#include "exec/platform/waiters.hpp"

namespace pipetwin::exec {

class InProcessTransport : public Transport {
 public:
  explicit InProcessTransport(AbortSignal& abort) : abort_(abort) {}

  void send(const at::Tensor& t, int from, int to, int64_t tag) override;
  at::Tensor recv(int from, int to, int64_t tag, const at::Tensor& like) override;
  void wait_posted(int from, int to, int64_t tag) override;
  void allreduce_sum(std::vector<at::Tensor>& tensors, const std::vector<int>& devices, int me,
                     int64_t tag) override;

 private:
  struct Round {
    std::map<int, std::vector<at::Tensor>> inputs;  // by device
    std::vector<at::Tensor> sum;
    size_t departed = 0;
  };
  AbortSignal& abort_;
  std::mutex mu_;
  Waiters waiters_;  // receivers and all-reduce participants
  std::map<std::tuple<int, int, int64_t>, at::Tensor> mailbox_;
  std::map<std::pair<int64_t, int>, Round> rounds_;  // (tag, first device)
};

}  // namespace pipetwin::exec
