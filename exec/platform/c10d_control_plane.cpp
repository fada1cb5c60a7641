#include "exec/platform/c10d_control_plane.hpp"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "exec/platform/c10d_transport.hpp"
#include "exec/platform/distributed.hpp"

namespace pipetwin::exec {

int C10dControlPlane::rank() const {
  return dist_.rank();
}

int C10dControlPlane::world_size() const {
  return dist_.world_size();
}

int C10dControlPlane::local_rank() const {
  return dist_.env().local_rank;
}

int C10dControlPlane::job_key() const {
  return dist_.env().master_port;
}

std::chrono::milliseconds C10dControlPlane::timeout() const {
  return dist_.timeout();
}

void C10dControlPlane::barrier() {
  dist_.barrier();
}

std::vector<double> C10dControlPlane::all_reduce_sum(std::vector<double> values) {
  if (values.empty()) return values;
  std::vector<at::Tensor> t{at::tensor(values, at::kDouble)};
  dist_.world().allreduce(t)->wait(dist_.timeout());
  const at::Tensor& r = t[0];
  return std::vector<double>(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
}

void C10dControlPlane::broadcast(at::Tensor& t, int root) {
  std::vector<at::Tensor> v{t};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.rootTensor = 0;
  o.timeout = dist_.timeout();
  dist_.world().broadcast(v, o)->wait(dist_.timeout());
}

std::string C10dControlPlane::key(int rank) const {
  return fmt::format("pipetwin/control/{}/{}", round_, rank);
}

std::vector<std::vector<uint8_t>> C10dControlPlane::all_gather(const std::vector<uint8_t>& mine) {
  dist_.store().set(key(dist_.rank()), mine);
  // Every rank has set its key once the barrier is passed; a dead peer fails it at once.
  dist_.barrier();
  std::vector<std::vector<uint8_t>> out;
  for (int r = 0; r < dist_.world_size(); ++r) out.push_back(dist_.store().get(key(r)));
  ++round_;
  return out;
}

std::vector<std::vector<uint8_t>> C10dControlPlane::gather(const std::vector<uint8_t>& mine,
                                                           int root) {
  const int64_t round = round_++;
  auto key_of = [round](int r) { return fmt::format("pipetwin/control/{}/{}", round, r); };
  dist_.store().set(key_of(dist_.rank()), mine);
  std::vector<std::vector<uint8_t>> out;
  if (dist_.rank() != root) return out;
  for (int r = 0; r < dist_.world_size(); ++r) {
    dist_.store().wait({key_of(r)}, dist_.timeout());
    out.push_back(dist_.store().get(key_of(r)));
  }
  return out;
}

std::unique_ptr<Transport> C10dControlPlane::make_transport(const TransportSetup& setup) {
  auto t = std::make_unique<C10dTransport>(dist_, setup.device_rank, *setup.abort);
  t->prepare_groups(setup.replica_sets);
  return t;
}

}  // namespace pipetwin::exec
