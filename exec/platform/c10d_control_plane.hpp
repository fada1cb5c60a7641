// C10dControlPlane: the control plane (exec/platform/control_plane.hpp) of a c10d job, over a
// Distributed (exec/platform/distributed.hpp). Sums and broadcasts go over the world group
// (Gloo), so a peer that dies makes them fail at once rather than at the timeout; bytes go
// through the rendezvous store under keys numbered by collective, and an all-gather ends with a
// world-group barrier, so every key is in place before any rank reads. Its Transport is a
// C10dTransport with one process group per stage's replica set.
//
// Thread-safety: as Distributed: one thread per rank issues the collectives, in the same order on
// every rank.
#pragma once

#include "exec/platform/control_plane.hpp"

namespace pipetwin::exec {

class C10dControlPlane : public ControlPlane {
 public:
  explicit C10dControlPlane(Distributed& dist) : dist_(dist) {}

  int rank() const override;
  int world_size() const override;
  int local_rank() const override;
  int job_key() const override;
  bool multi_process() const override { return true; }
  std::chrono::milliseconds timeout() const override;

  void barrier() override;
  std::vector<double> all_reduce_sum(std::vector<double> values) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine) override;
  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine, int root) override;
  std::unique_ptr<Transport> make_transport(const TransportSetup& setup) override;

 private:
  std::string key(int rank) const;

  Distributed& dist_;
  int64_t round_ = 0;  // byte collectives so far: numbers their store keys
};

}  // namespace pipetwin::exec
