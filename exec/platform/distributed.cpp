#include "exec/platform/distributed.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "core/error.hpp"

namespace pipetwin::exec {

namespace {

int env_int(const char* name, int fallback, int lo, int hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == 0) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  if (*end != 0 || x < lo || x > hi) {
    throw InputError(fmt::format(
        "environment variable {}: expected an integer in {}..{}, got \"{}\"", name, lo, hi, v));
  }
  return static_cast<int>(x);
}

}  // namespace

DistributedEnv DistributedEnv::from_environment() {
  DistributedEnv e;
  e.world_size = env_int("WORLD_SIZE", 1, 1, 1 << 16);
  e.rank = env_int("RANK", 0, 0, e.world_size - 1);
  e.local_rank = env_int("LOCAL_RANK", e.rank, 0, 1 << 16);
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
  e.master_port = env_int("MASTER_PORT", 29500, 1, 65535);
  if (e.world_size > 1 && std::getenv("MASTER_ADDR") == nullptr) {
    throw InputError("environment variable MASTER_ADDR: needed when WORLD_SIZE > 1");
  }
  return e;
}

bool built_with_gloo() {
#ifdef USE_C10D_GLOO
  return true;
#else
  return false;
#endif
}

Distributed::Distributed(const DistributedEnv& env, std::chrono::milliseconds timeout)
    : env_(env), timeout_(timeout) {
  if (!built_with_gloo()) {
    throw InputError(fmt::format(
        "rank {}: this pipetwin was built without Gloo (LibTorch's ProcessGroupGloo.hpp did not "
        "compile against the gloo headers at configure time); run in one process",
        env.rank));
  }
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(env.master_port);
  o.isServer = env.rank == 0;
  o.numWorkers = static_cast<size_t>(env.world_size);
  o.timeout = timeout;
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(env.master_addr, o);
  } catch (const std::exception& e) {
    throw std::runtime_error(
        fmt::format("rank {}: cannot reach the rendezvous at {}:{} within {} s: {}", env.rank,
                    env.master_addr, env.master_port, timeout.count() / 1000, e.what()));
  }
  world_ = make_group("world", env.rank, env.world_size);
}

Distributed::Distributed(Distributed& parent, const std::vector<int>& ranks,
                         const std::string& name)
    : env_(parent.env_), timeout_(parent.timeout_) {
  const auto pos = std::find(ranks.begin(), ranks.end(), parent.rank());
  if (pos == ranks.end()) throw std::logic_error("Distributed: this rank is not in the sub-job");
  env_.rank = static_cast<int>(pos - ranks.begin());
  env_.world_size = static_cast<int>(ranks.size());
  store_ = c10::make_intrusive<c10d::PrefixStore>(name, parent.store_);
  world_ = make_group("world", env_.rank, env_.world_size);
}

c10::intrusive_ptr<CommGroup> Distributed::make_group(const std::string& prefix, int rank,
                                                      int size) {
#ifndef USE_C10D_GLOO
  (void)prefix, (void)rank, (void)size;
  throw std::logic_error("Distributed::make_group: built without Gloo");
#else
  auto opts = c10d::ProcessGroupGloo::Options::create(timeout_);
  // As torch.distributed does: GLOO_SOCKET_IFNAME picks the interface; a loopback rendezvous
  // stays on loopback; otherwise the interface the host name resolves to.
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (env_.master_addr == "127.0.0.1" || env_.master_addr == "localhost") {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    opts->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>(prefix, store_);
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, opts);
#endif
}

CommGroup& Distributed::group(const std::vector<int>& ranks, const std::string& name) {
  auto it = groups_.find(name);
  if (it != groups_.end()) return *it->second;
  const auto pos = std::find(ranks.begin(), ranks.end(), env_.rank);
  if (pos == ranks.end()) throw std::logic_error("Distributed::group: this rank is not a member");
  auto pg = make_group(name, static_cast<int>(pos - ranks.begin()), static_cast<int>(ranks.size()));
  return *groups_.emplace(name, std::move(pg)).first->second;
}

void Distributed::barrier() {
  world_->barrier()->wait(timeout_);
}

}  // namespace pipetwin::exec
