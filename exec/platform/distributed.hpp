// Distributed set-up: torchrun-style environment rendezvous and c10d process groups.
//
// A process learns its place from the variables torchrun and SLURM set — RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT — connects to the TCPStore that rank 0 serves, and joins a
// Gloo process group (NCCL on GPU builds) over all ranks. Further groups (one per set of ranks
// that all-reduce together) are built on prefixed views of the same store. Every operation has a
// timeout, so a dead or silent peer ends in an error, never a hang.
//
// Thread-safety: a Distributed is built once per process; its process groups are thread-safe
// for point-to-point use; each group's collectives must be issued from one thread in the same
// order on all its ranks (the executor gives every stage its own group and collective thread).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "models/torch_compat.hpp"
#include PIPETWIN_C10D_GROUP_HEADER

namespace pipetwin::exec {

// What collectives and point-to-point messages go through: the Gloo process group of LibTorch
// 1.13, the Gloo backend of 2.x (models/torch_compat.hpp).
using CommGroup = PIPETWIN_C10D_GROUP;

struct DistributedEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  // Reads the torchrun variables; a missing or malformed one is an InputError naming it.
  // With none set: a single process (rank 0 of 1).
  static DistributedEnv from_environment();
  bool distributed() const { return world_size > 1; }
};

// Whether this build has c10d's Gloo process group (exec/CMakeLists.txt): without it a
// Distributed cannot be built, and the CLI refuses --nproc and WORLD_SIZE > 1.
bool built_with_gloo();

class Distributed {
 public:
  // Connects to the rendezvous and joins the world group; throws an InputError in a build
  // without Gloo.
  Distributed(const DistributedEnv& env, std::chrono::milliseconds timeout);
  // A sub-job of `parent`: its ranks `ranks` (sorted, containing the parent's rank) numbered
  // 0..n-1 in that order, with a world group of their own and the parent's store under the prefix
  // `name` (a tensor-parallel slice, exec/platform/tp_comm.hpp). Every rank in `ranks` builds it;
  // it lives no longer than `parent`.
  Distributed(Distributed& parent, const std::vector<int>& ranks, const std::string& name);

  const DistributedEnv& env() const { return env_; }
  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  CommGroup& world() { return *world_; }
  c10d::Store& store() { return *store_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // The process group `name` over `ranks` (sorted, containing this rank), created on first use;
  // every rank in `ranks` must ask for it in the same order. `name` identifies the group (two
  // groups may span the same ranks) and keys its part of the store.
  CommGroup& group(const std::vector<int>& ranks, const std::string& name);
  // Blocks until every rank arrives (or the timeout passes).
  void barrier();

 private:
  c10::intrusive_ptr<CommGroup> make_group(const std::string& prefix, int rank, int size);

  DistributedEnv env_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<CommGroup> world_;
  std::map<std::string, c10::intrusive_ptr<CommGroup>> groups_;  // by name
};

}  // namespace pipetwin::exec
