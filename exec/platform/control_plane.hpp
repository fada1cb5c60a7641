// ControlPlane: how the ranks of a job agree, as Transport (exec/platform/transport.hpp) is how
// their devices move tensors — the small, infrequent traffic between windows: barriers, sums of
// counters, broadcasts of state, gathers of timelines, and agreement on whether every rank's
// part of a step succeeded. The executor and the trainer talk to this interface alone
// (docs/design.md "Platform behind an interface"), in the spirit of LevelDB's Env: one job's
// wiring behind one object, and a fake for tests. Implementations:
//   InProcessControlPlane  one rank alone (every collective returns at once), or several ranks
//                          as threads of this process sharing memory (tests)
//   C10dControlPlane       the ranks of a c10d job: the world group (Gloo) for sums and
//                          broadcasts, the rendezvous store for bytes
//                          (exec/platform/distributed.hpp)
// A control plane also makes the Transport its ranks' devices use (make_transport), so a session
// that is handed one gets a matching data plane unless it is handed a Transport too.
//
// Every collective must be called by every rank, in the same order, from one thread per rank
// (the trainer's or the session's); it waits at most timeout() for the others, and a peer that
// dies or times out makes it throw, so a job never hangs on its control plane.
//
// Thread-safety: one thread per rank calls the collectives; rank(), world_size(), local_rank(),
// job_key() and timeout() may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "exec/platform/abort.hpp"
#include "exec/platform/transport.hpp"

namespace pipetwin::exec {

class Distributed;

// What a Transport of a session needs to know (PipelineSession builds it).
struct TransportSetup {
  AbortSignal* abort = nullptr;  // the session's: a failure anywhere stops every wait
  std::vector<int> device_rank;  // global schedule device -> the rank hosting it
  // Per stage, the devices holding its replicas (sorted): the sets that all-reduce together.
  std::vector<std::vector<int>> replica_sets;
};
using TransportFactory = std::function<std::unique_ptr<Transport>(const TransportSetup&)>;

class ControlPlane {
 public:
  virtual ~ControlPlane() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  // The rank's index among the ranks of its machine (torchrun's LOCAL_RANK).
  virtual int local_rank() const = 0;
  // A number that tells this job's files on a machine from another job's (0: the only job).
  virtual int job_key() const = 0;
  // Whether the ranks are separate processes (files shared between them must be created by one
  // and opened by the others; single-process checks differ).
  virtual bool multi_process() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;

  // Blocks until every rank arrives.
  virtual void barrier() = 0;
  // The element-wise sum over the ranks of `values` (the same length on every rank), added in
  // rank order.
  virtual std::vector<double> all_reduce_sum(std::vector<double> values) = 0;
  // `t` on `root` copied into `t` on every rank (same shape and dtype everywhere, host memory).
  virtual void broadcast(at::Tensor& t, int root) = 0;
  // Every rank's `mine`, by rank, on every rank.
  virtual std::vector<std::vector<uint8_t>> all_gather(const std::vector<uint8_t>& mine) = 0;
  // Every rank's `mine`, by rank, on `root`; the other ranks return at once with nothing.
  virtual std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine, int root) = 0;

  // The Transport between the devices of this job's ranks: in-process copies, or c10d.
  virtual std::unique_ptr<Transport> make_transport(const TransportSetup& setup) = 0;

  // Algorithms over the operations above (control_plane.cpp).

  // Rank `root`'s `values` on every rank (the same length everywhere).
  std::vector<double> values_of(int root, const std::vector<double>& values);
  // Rank `root`'s bytes on every rank; the others pass anything (ignored).
  std::vector<uint8_t> broadcast_bytes(const std::vector<uint8_t>& mine, int root);
  // Every rank says whether its part of `what` succeeded; if any failed, every rank throws:
  // the failing rank its own message, the others RunFailure (InputError if `input_error`) with
  // the first failing rank's. One rank alone rethrows an InputError as it is.
  void agree(std::exception_ptr failure, const std::string& what, bool input_error);
  // "rank R: " where several ranks run, else "": the prefix of this rank's error messages.
  std::string who() const;
};

// The control plane of a process: C10dControlPlane over `dist`, or a single in-process rank
// where `dist` is null.
std::unique_ptr<ControlPlane> make_control_plane(Distributed* dist);

}  // namespace pipetwin::exec
