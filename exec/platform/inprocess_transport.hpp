// InProcessTransport: devices are threads of one process.
//
// A send posts the tensor in the receiver's mailbox; the receiver copies it into memory it owns
// (what a device-to-device copy does, and what the memory tracker then attributes to it). On a GPU
// neither side's host waits: the send posts, with the tensor, the point of its stream where the
// tensor is made, and the receiver's stream waits for that point before its copy
// (exec/platform/cuda_device.hpp's record_ready and use_when_ready). The
// all-reduce is a rendezvous: every participant deposits its tensors, the sum is formed in device
// order, and each participant copies it back; on a GPU the streams order these steps by the same
// events, without a host wait. All waits honour the AbortSignal.
//
// Thread-safety: thread-safe.
#pragma once

#include <map>
#include <memory>
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
    std::map<int, std::shared_ptr<void>> ready;     // by device: its stream past its inputs
    std::vector<at::Tensor> sum;
    std::shared_ptr<void> sum_ready;  // the summing stream past the sum
    size_t departed = 0;
  };
  AbortSignal& abort_;
  std::mutex mu_;
  Waiters waiters_;  // receivers and all-reduce participants
  struct Posted {
    at::Tensor tensor;
    std::shared_ptr<void> ready;  // the sender's stream past making it (GPU), or null
  };
  std::map<std::tuple<int, int, int64_t>, Posted> mailbox_;
  std::map<std::pair<int64_t, int>, Round> rounds_;  // (tag, first device)
};

}  // namespace pipetwin::exec
