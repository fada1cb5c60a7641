#include "exec/platform/c10d_transport.hpp"

#include <algorithm>
#include <limits>

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace pipetwin::exec {

int c10d_tag(int64_t tag) {
  if (tag < 0 || tag > std::numeric_limits<int>::max()) {
    throw std::runtime_error(fmt::format("message tag {} does not fit c10d's 32-bit tags", tag));
  }
  return static_cast<int>(tag);
}

C10dTransport::C10dTransport(Distributed& dist, std::vector<int> device_rank, AbortSignal& abort)
    : dist_(dist), device_rank_(std::move(device_rank)), abort_(abort), local_(abort) {}

void C10dTransport::prepare_groups(const std::vector<std::vector<int>>& device_sets) {
  // One process group per device set (a stage's replicas), even when two sets span the same
  // ranks: the collective streams of different stages issue all-reduces concurrently, and Gloo
  // matches the collectives of one group by their order, which threads do not keep.
  for (auto devices : device_sets) {
    std::sort(devices.begin(), devices.end());
    std::vector<int> ranks;
    for (int d : devices) ranks.push_back(rank_of(d));
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    if (ranks.size() < 2 || groups_.count(devices)) continue;
    if (std::find(ranks.begin(), ranks.end(), dist_.rank()) == ranks.end()) continue;
    std::string name = "allreduce";
    for (int d : devices) name += ".d" + std::to_string(d);
    groups_[devices] = &dist_.group(ranks, name);
  }
}

namespace {

// Gloo moves host memory: it reads and writes a tensor's bytes through its data pointer over TCP,
// so a GPU tensor (two processes sharing one GPU, the one-GPU machine's case) is staged through
// host memory. The copy to the host waits for the calling thread's stream, and the copy back
// is ordered on it, so the stream order the executor relies on holds.
at::Tensor on_host(const at::Tensor& t) {
  return t.is_cuda() ? t.to(at::kCPU).contiguous() : t.contiguous();
}

}  // namespace

void C10dTransport::send(const at::Tensor& t, int from, int to, int64_t tag) {
  if (rank_of(from) == rank_of(to)) {
    local_.send(t, from, to, tag);
    return;
  }
  abort_.check();
  std::vector<at::Tensor> buf{on_host(t)};
  auto work = dist_.world().send(buf, rank_of(to), c10d_tag(tag));
  work->wait(abort_.timeout());
}

at::Tensor C10dTransport::recv(int from, int to, int64_t tag, const at::Tensor& like) {
  if (rank_of(from) == rank_of(to)) return local_.recv(from, to, tag, like);
  abort_.check();
  std::vector<at::Tensor> buf{at::empty(like.sizes(), like.options().device(at::kCPU))};
  auto work = dist_.world().recv(buf, rank_of(from), c10d_tag(tag));
  work->wait(abort_.timeout());
  return like.is_cuda() ? buf[0].to(like.device()) : buf[0];
}

void C10dTransport::allreduce_sum(std::vector<at::Tensor>& tensors, const std::vector<int>& devices,
                                  int me, int64_t tag) {
  std::vector<int> ranks, local;
  for (int d : devices) {
    ranks.push_back(rank_of(d));
    if (rank_of(d) == dist_.rank()) local.push_back(d);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  // Sum the local replicas first.
  if (local.size() > 1) local_.allreduce_sum(tensors, local, me, tag);
  if (ranks.size() == 1) return;
  // One local replica (the lowest) talks to the other ranks; the rest receive its result.
  const bool leader = me == local.front();
  const int64_t share_tag = -1 - tag;  // a tag no point-to-point message uses
  if (leader) {
    std::vector<int> key = devices;
    std::sort(key.begin(), key.end());
    auto it = groups_.find(key);
    if (it == groups_.end()) throw std::logic_error("C10dTransport: all-reduce group not prepared");
    CommGroup* group = it->second;
    std::vector<at::Tensor> flat{on_host(at::cat(
        [&] {
          std::vector<at::Tensor> parts;
          for (auto& t : tensors) parts.push_back(t.reshape({-1}));
          return parts;
        }(),
        0))};
    group->allreduce(flat)->wait(abort_.timeout());
    int64_t offset = 0;
    for (auto& t : tensors) {
      t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
    for (size_t i = 1; i < local.size(); ++i) {
      for (size_t k = 0; k < tensors.size(); ++k) {
        local_.send(tensors[k], me, local[i], share_tag * 1024 - static_cast<int64_t>(k));
      }
    }
  } else {
    for (size_t k = 0; k < tensors.size(); ++k) {
      tensors[k].copy_(
          local_.recv(local.front(), me, share_tag * 1024 - static_cast<int64_t>(k), tensors[k]));
    }
  }
}

}  // namespace pipetwin::exec
