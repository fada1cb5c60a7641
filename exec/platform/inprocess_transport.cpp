#include "exec/platform/inprocess_transport.hpp"

#include <ATen/ATen.h>

#include "exec/platform/cuda_device.hpp"

namespace pipetwin::exec {

void InProcessTransport::send(const at::Tensor& t, int from, int to, int64_t tag) {
  Waiters::Woken woken;
  std::shared_ptr<void> ready = record_ready(t);
  {
    std::lock_guard<std::mutex> lock(mu_);
    mailbox_[{from, to, tag}] = Posted{t, std::move(ready)};
    woken = waiters_.collect();
  }
  Waiters::notify(woken);
}

void InProcessTransport::wait_posted(int from, int to, int64_t tag) {
  std::unique_lock<std::mutex> lock(mu_);
  const auto key = std::make_tuple(from, to, tag);
  waiters_.wait(
      abort_, lock, [&] { return mailbox_.count(key) != 0; },
      "a tensor from device " + std::to_string(from) + " (tag " + std::to_string(tag) + ")");
}

at::Tensor InProcessTransport::recv(int from, int to, int64_t tag, const at::Tensor& like) {
  Posted posted;
  {
    std::unique_lock<std::mutex> lock(mu_);
    const auto key = std::make_tuple(from, to, tag);
    waiters_.wait(
        abort_, lock, [&] { return mailbox_.count(key) != 0; },
        "a tensor from device " + std::to_string(from) + " (tag " + std::to_string(tag) + ")");
    posted = std::move(mailbox_[key]);
    mailbox_.erase(key);
  }
  use_when_ready(posted.ready, posted.tensor);
  // The copy a device-to-device transfer makes, into memory of the receiving device.
  at::Tensor out = at::empty_like(like, at::MemoryFormat::Contiguous);
  out.copy_(posted.tensor);
  return out;
}

void InProcessTransport::allreduce_sum(std::vector<at::Tensor>& tensors,
                                       const std::vector<int>& devices, int me, int64_t tag) {
  const auto key = std::make_pair(tag, devices.front());
  std::shared_ptr<void> mine = tensors.empty() ? nullptr : record_ready(tensors.front());
  std::unique_lock<std::mutex> lock(mu_);
  Round& round = rounds_[key];
  round.inputs[me] = tensors;
  round.ready[me] = std::move(mine);
  if (round.inputs.size() == devices.size()) {
    // Last to arrive forms the sum, in device order, once every input is made.
    std::vector<at::Tensor> sum;
    for (const auto& [device, list] : round.inputs) {
      for (const auto& t : list) use_when_ready(round.ready[device], t);
      if (sum.empty()) {
        for (const auto& t : list) sum.push_back(t.clone());
      } else {
        for (size_t i = 0; i < list.size(); ++i) sum[i].add_(list[i].to(sum[i].device()));
      }
    }
    round.sum_ready = sum.empty() ? nullptr : record_ready(sum.front());
    round.sum = std::move(sum);
    Waiters::notify(waiters_.collect());  // (under the lock: the round is erased by the last)
  }
  waiters_.wait(
      abort_, lock, [&] { return !rounds_[key].sum.empty(); },
      "the all-reduce of tag " + std::to_string(tag));
  Round& done = rounds_[key];
  for (size_t i = 0; i < tensors.size(); ++i) {
    use_when_ready(done.sum_ready, done.sum[i]);  // the sum goes with the round: recorded here
    tensors[i].copy_(done.sum[i]);
  }
  if (++done.departed == devices.size()) rounds_.erase(key);
}

}  // namespace pipetwin::exec
