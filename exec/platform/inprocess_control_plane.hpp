// InProcessControlPlane: the control plane (exec/platform/control_plane.hpp) of ranks that are
// threads of one process — one rank alone (the default of a single-process run: every
// collective returns at once), or a world of several, one object per rank sharing a hub, so
// tests can run the control plane's algorithms without processes.
//
// Each collective is a round: every rank deposits its part under the round's number (its own
// count of collectives so far, the same on every rank since all call them in the same order),
// waits until all have, reads what it needs, and the last to read frees the round. A rank that
// does not come within the timeout makes the others throw RunFailure.
//
// Its Transport is an InProcessTransport: for one rank alone it connects every device. Ranks of
// a world built here are threads, and their sessions need one shared transport, which the caller
// injects (PipelineSession's TransportFactory).
//
// Thread-safety: the objects of one world may be used from different threads, each by one.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "exec/platform/control_plane.hpp"

namespace pipetwin::exec {

class InProcessControlPlane : public ControlPlane {
 public:
  // One rank alone.
  InProcessControlPlane();
  // `world` ranks, element r for rank r; every one waits at most `timeout` for the others.
  static std::vector<std::unique_ptr<InProcessControlPlane>> make_world(
      int world, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  ~InProcessControlPlane() override;

  int rank() const override { return rank_; }
  int world_size() const override;
  int local_rank() const override { return rank_; }
  int job_key() const override { return 0; }
  bool multi_process() const override { return false; }
  std::chrono::milliseconds timeout() const override;

  void barrier() override;
  std::vector<double> all_reduce_sum(std::vector<double> values) override;
  void broadcast(at::Tensor& t, int root) override;
  std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine) override;
  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine, int root) override;
  std::unique_ptr<Transport> make_transport(const TransportSetup& setup) override;

 private:
  class Hub;
  struct Part;
  InProcessControlPlane(std::shared_ptr<Hub> hub, int rank);
  // One round: deposits this rank's part and returns every rank's.
  std::vector<Part> exchange(Part mine);

  std::shared_ptr<Hub> hub_;
  int rank_ = 0;
  int64_t round_ = 0;  // collectives this rank has called
};

}  // namespace pipetwin::exec
