#include "exec/platform/inprocess_control_plane.hpp"

#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/platform/inprocess_transport.hpp"

namespace pipetwin::exec {

struct InProcessControlPlane::Part {
  std::vector<uint8_t> bytes;
  at::Tensor tensor;
};

class InProcessControlPlane::Hub {
 public:
  Hub(int world, std::chrono::milliseconds timeout) : world_(world), timeout_(timeout) {}

  int world() const { return world_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  std::vector<Part> exchange(int64_t number, int rank, Part mine) {
    std::unique_lock<std::mutex> lock(mu_);
    Round& round = rounds_[number];
    if (round.parts.empty()) round.parts.resize(static_cast<size_t>(world_));
    round.parts[static_cast<size_t>(rank)] = std::move(mine);
    ++round.in;
    cv_.notify_all();
    const bool all = cv_.wait_for(lock, timeout_, [&] { return round.in == world_; });
    if (!all) {
      // Leave the round to the late ranks: they find it complete or time out themselves.
      throw RunFailure(fmt::format("rank {}: collective {}: {} of {} ranks came within {} ms", rank,
                                   number, round.in, world_, timeout_.count()));
    }
    std::vector<Part> parts = round.parts;
    if (++round.out == world_) rounds_.erase(number);
    return parts;
  }

 private:
  struct Round {
    std::vector<Part> parts;
    int in = 0, out = 0;
  };
  const int world_;
  const std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, Round> rounds_;
};

InProcessControlPlane::InProcessControlPlane()
    : hub_(std::make_shared<Hub>(1, std::chrono::seconds(60))) {}

InProcessControlPlane::InProcessControlPlane(std::shared_ptr<Hub> hub, int rank)
    : hub_(std::move(hub)), rank_(rank) {}

InProcessControlPlane::~InProcessControlPlane() = default;

std::vector<std::unique_ptr<InProcessControlPlane>> InProcessControlPlane::make_world(
    int world, std::chrono::milliseconds timeout) {
  if (world < 1) throw std::invalid_argument("InProcessControlPlane: world must be positive");
  auto hub = std::make_shared<Hub>(world, timeout);
  std::vector<std::unique_ptr<InProcessControlPlane>> out;
  for (int r = 0; r < world; ++r)
    out.push_back(std::unique_ptr<InProcessControlPlane>(new InProcessControlPlane(hub, r)));
  return out;
}

int InProcessControlPlane::world_size() const {
  return hub_->world();
}

std::chrono::milliseconds InProcessControlPlane::timeout() const {
  return hub_->timeout();
}

std::vector<InProcessControlPlane::Part> InProcessControlPlane::exchange(Part mine) {
  if (hub_->world() == 1) return {std::move(mine)};
  return hub_->exchange(round_++, rank_, std::move(mine));
}

void InProcessControlPlane::barrier() {
  exchange({});
}

std::vector<double> InProcessControlPlane::all_reduce_sum(std::vector<double> values) {
  Part mine;
  mine.bytes.resize(values.size() * sizeof(double));
  if (!values.empty()) std::memcpy(mine.bytes.data(), values.data(), mine.bytes.size());
  const std::vector<Part> parts = exchange(std::move(mine));
  std::vector<double> sum(values.size(), 0.0);
  for (const Part& p : parts) {  // in rank order
    if (p.bytes.size() != values.size() * sizeof(double)) {
      throw std::logic_error("InProcessControlPlane: all_reduce_sum lengths differ between ranks");
    }
    for (size_t i = 0; i < sum.size(); ++i) {
      double x;
      std::memcpy(&x, p.bytes.data() + i * sizeof(double), sizeof(double));
      sum[i] += x;
    }
  }
  return sum;
}

void InProcessControlPlane::broadcast(at::Tensor& t, int root) {
  if (hub_->world() == 1) return;
  Part mine;
  if (rank_ == root) mine.tensor = t.clone();  // the root may change `t` once it returns
  const std::vector<Part> parts = exchange(std::move(mine));
  if (rank_ != root) t.copy_(parts[static_cast<size_t>(root)].tensor);
}

std::vector<std::vector<uint8_t>> InProcessControlPlane::all_gather(
    const std::vector<uint8_t>& mine) {
  std::vector<std::vector<uint8_t>> out;
  for (Part& p : exchange({mine, {}})) out.push_back(std::move(p.bytes));
  return out;
}

std::vector<std::vector<uint8_t>> InProcessControlPlane::gather(const std::vector<uint8_t>& mine,
                                                                int root) {
  // Threads share memory: the other ranks wait for the round too, which a gather allows.
  std::vector<std::vector<uint8_t>> out = all_gather(mine);
  if (rank_ != root) out.clear();
  return out;
}

std::unique_ptr<Transport> InProcessControlPlane::make_transport(const TransportSetup& setup) {
  return std::make_unique<InProcessTransport>(*setup.abort);
}

}  // namespace pipetwin::exec
