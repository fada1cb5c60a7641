#include "exec/platform/control_plane.hpp"

#include <cstring>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/platform/c10d_control_plane.hpp"
#include "exec/platform/inprocess_control_plane.hpp"

namespace pipetwin::exec {

std::vector<double> ControlPlane::values_of(int root, const std::vector<double>& values) {
  // A sum in which only `root` contributes: exact, and one collective.
  return all_reduce_sum(rank() == root ? values : std::vector<double>(values.size(), 0.0));
}

std::vector<uint8_t> ControlPlane::broadcast_bytes(const std::vector<uint8_t>& mine, int root) {
  if (world_size() == 1) return mine;
  at::Tensor size = at::tensor({static_cast<int64_t>(mine.size())}, at::kLong);
  broadcast(size, root);
  at::Tensor bytes = at::empty({size.item<int64_t>()}, at::kByte);
  if (rank() == root && !mine.empty())
    std::memcpy(bytes.data_ptr<uint8_t>(), mine.data(), mine.size());
  if (bytes.numel() > 0) broadcast(bytes, root);
  const uint8_t* p = bytes.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + bytes.numel());
}

void ControlPlane::agree(std::exception_ptr failure, const std::string& what, bool input_error) {
  std::string msg;
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      msg = e.what();
    } catch (...) {
      msg = "unknown error";
    }
  }
  const std::string me = who();
  auto fail = [input_error](const std::string& text) {
    if (input_error) throw InputError(text);
    throw RunFailure(text);
  };
  if (world_size() == 1) {
    if (!failure) return;
    if (input_error) std::rethrow_exception(failure);
    fail(fmt::format("{} failed: {}", what, msg));
  }
  // A leading byte tells a failure with an empty message from a success.
  const std::string tagged = failure ? "!" + msg : std::string();
  const std::vector<uint8_t> mine(tagged.begin(), tagged.end());
  std::vector<std::vector<uint8_t>> all;
  try {
    all = all_gather(mine);
  } catch (const std::exception& e) {
    throw RunFailure(fmt::format("{}{}: waiting for the other ranks: {}", me, what, e.what()));
  }
  if (failure) fail(fmt::format("{}{} failed: {}", me, what, msg));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    fail(fmt::format("{}{} failed on rank {}: {}", me, what, r,
                     std::string(all[r].begin() + 1, all[r].end())));
  }
}

std::string ControlPlane::who() const {
  return world_size() > 1 ? fmt::format("rank {}: ", rank()) : std::string();
}

std::unique_ptr<ControlPlane> make_control_plane(Distributed* dist) {
  if (dist) return std::make_unique<C10dControlPlane>(*dist);
  return std::make_unique<InProcessControlPlane>();
}

}  // namespace pipetwin::exec
