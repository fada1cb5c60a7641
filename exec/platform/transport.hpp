// Transport: how tensors move between the executor's devices.
//
// The executor talks to one interface (docs/design.md "Platform behind an interface"):
// point-to-point send/recv between global schedule devices, identified by a tag unique per message,
// and a sum all-reduce among the devices that hold replicas of one stage. Implementations:
//   InProcessTransport  devices are threads of this process: mailboxes and a rendezvous
//   C10dTransport       devices spread over processes: c10d process groups (Gloo on CPU, NCCL on
//                       GPU), in-process mailboxes between devices of the same process
// Tests swap them freely.
//
// Thread-safety: implementations are thread-safe; each device's send and recv streams call them
// from their own threads.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipetwin::exec {

class Transport {
 public:
  virtual ~Transport() = default;
  // Sends `t` from device `from` to device `to`. The transport may keep a reference to `t`; the
  // caller must not modify it afterwards.
  virtual void send(const at::Tensor& t, int from, int to, int64_t tag) = 0;
  // Receives the tensor sent with `tag`; `like` gives shape, dtype and device of the result.
  virtual at::Tensor recv(int from, int to, int64_t tag, const at::Tensor& like) = 0;
  // Blocks until the message `tag` has been posted by its sender, where the transport can tell
  // (in-process); returns at once otherwise. Lets the executor time a transfer from its start.
  virtual void wait_posted(int from, int to, int64_t tag) {
    (void)from;
    (void)to;
    (void)tag;
  }
  // In-place sum of `tensors` over `devices` (sorted global ids); each participant calls it once
  // with its own device `me` and the same tag. The sum is deterministic: added in device order.
  virtual void allreduce_sum(std::vector<at::Tensor>& tensors, const std::vector<int>& devices,
                             int me, int64_t tag) = 0;
};

}  // namespace pipetwin::exec
