#include "exec/train/state_exchange.hpp"

#include <map>
#include <optional>
#include <stdexcept>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/platform/control_plane.hpp"
#include "exec/runtime/session.hpp"
#include "exec/runtime/stage.hpp"

namespace pipetwin::exec {

namespace {

at::ScalarType dtype_named(const std::string& name) {
  for (at::ScalarType t : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong, at::kInt,
                           at::kShort, at::kChar, at::kByte, at::kBool}) {
    if (name == c10::toString(t)) return t;
  }
  throw std::logic_error("state exchange: unknown dtype " + name);
}

Json header_of(const StageState& st) {
  Json list = Json::array();
  for (const auto& t : st.tensors) {
    list.push_back({{"name", t.name},
                    {"role", t.role},
                    {"shape", t.value.sizes().vec()},
                    {"dtype", std::string(c10::toString(t.value.scalar_type()))}});
  }
  return {{"stage", st.stage},
          {"optimizer_steps", st.optimizer_steps},
          {"loss_scale", st.loss_scale},
          {"loss_scale_growth_tracker", st.loss_scale_growth_tracker},
          {"tensors", list}};
}

// Stage `stage`'s state, sent by `owner` (which passes `mine`) to every rank.
StageState broadcast_stage(ControlPlane& control, int owner, const StageState* mine) {
  const std::string text = mine ? header_of(*mine).dump() : std::string();
  const std::vector<uint8_t> bytes =
      control.broadcast_bytes(std::vector<uint8_t>(text.begin(), text.end()), owner);
  const Json h = Json::parse(std::string(bytes.begin(), bytes.end()));
  StageState st;
  st.stage = h.at("stage").get<int>();
  st.optimizer_steps = h.at("optimizer_steps").get<int64_t>();
  st.loss_scale = h.at("loss_scale").get<double>();
  st.loss_scale_growth_tracker = h.at("loss_scale_growth_tracker").get<int>();
  // One flat buffer per dtype, the tensors in header order.
  std::map<std::string, std::vector<size_t>> by_dtype;
  const auto& list = h.at("tensors");
  for (size_t i = 0; i < list.size(); ++i) {
    by_dtype[list[i].at("dtype").get<std::string>()].push_back(i);
  }
  st.tensors.resize(list.size());
  for (const auto& [dtype, members] : by_dtype) {
    std::vector<int64_t> numel;
    int64_t total = 0;
    for (size_t i : members) {
      const auto shape = list[i].at("shape").get<std::vector<int64_t>>();
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      numel.push_back(n);
      total += n;
    }
    at::Tensor flat = at::empty({total}, at::TensorOptions().dtype(dtype_named(dtype)));
    if (mine) {
      int64_t off = 0;
      for (size_t k = 0; k < members.size(); ++k) {
        flat.narrow(0, off, numel[k]).copy_(mine->tensors[members[k]].value.reshape({-1}));
        off += numel[k];
      }
    }
    if (total > 0) control.broadcast(flat, owner);
    int64_t off = 0;
    for (size_t k = 0; k < members.size(); ++k) {
      const auto& e = list[members[k]];
      st.tensors[members[k]] = {
          e.at("name").get<std::string>(), e.at("role").get<std::string>(),
          flat.narrow(0, off, numel[k]).view(e.at("shape").get<std::vector<int64_t>>())};
      off += numel[k];
    }
  }
  return st;
}

}  // namespace

StageState gather_layer_state(PipelineSession& session, ControlPlane& control,
                              const std::function<void()>& after_first_stage) {
  StageState all;
  all.stage = -1;
  const int stages = session.shape().num_stages;
  for (int s = 0; s < stages; ++s) {
    const StageRuntime* rt = session.runtime(0, s);
    // One rank alone broadcasts to itself: the flat buffers are then the copy the new plan's
    // stages restore from.
    const int owner = session.rank_of_device(session.device_of(0, s));
    std::optional<StageState> mine;
    if (owner == session.rank()) mine = capture_stage(0, *rt, session.model());
    StageState st;
    try {
      st = broadcast_stage(control, owner, mine ? &*mine : nullptr);
    } catch (const std::exception& e) {
      throw RunFailure(
          fmt::format("sending stage {}'s layers from rank {}: {}", s, owner, e.what()));
    }
    if (s > 0 && st.optimizer_steps != all.optimizer_steps) {
      throw std::logic_error(
          fmt::format("state exchange: stage {} made {} optimizer steps, stage "
                      "0 {}",
                      s, st.optimizer_steps, all.optimizer_steps));
    }
    all.optimizer_steps = st.optimizer_steps;
    for (auto& t : st.tensors) all.tensors.push_back(std::move(t));
    if (s == 0 && after_first_stage) after_first_stage();
  }
  return all;
}

}  // namespace pipetwin::exec
