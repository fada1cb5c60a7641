#include "core/schedule/virtual_stages.hpp"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace pipetwin {

StageLayout stage_layout_of(const std::string& schedule) {
  if (schedule == "zbv" || schedule == "dualpipev") return StageLayout::kVShape;
  if (schedule == "interleaved-1f1b") return StageLayout::kInterleaved;
  return StageLayout::kOnePerDevice;
}

int default_virtual_stages(const std::string& schedule) {
  return stage_layout_of(schedule) == StageLayout::kVShape ? 2 : 1;
}

std::vector<int> virtual_stage_layout(StageLayout layout, int devices, int v,
                                      const std::string& schedule) {
  if (devices < 1) throw InputError(fmt::format("devices must be positive ({} < 1)", devices));
  if (v < 1) throw InputError(fmt::format("virtual stages must be positive ({} < 1)", v));
  if (layout == StageLayout::kVShape && v != 2) {
    throw InputError(fmt::format(
        "schedule {} runs two model chunks per device in a V (--virtual-stages 2, not {})",
        schedule, v));
  }
  if (layout == StageLayout::kOnePerDevice && v != 1 && !schedule.empty()) {
    throw InputError(fmt::format(
        "schedule {} runs one stage per device (--virtual-stages {}: use interleaved-1f1b, "
        "zbv or dualpipev for several)",
        schedule, v));
  }
  std::vector<int> device(static_cast<size_t>(devices * v));
  for (int s = 0; s < devices * v; ++s) {
    const int chunk = s / devices, d = s % devices;
    device[static_cast<size_t>(s)] =
        layout == StageLayout::kVShape && chunk == 1 ? devices - 1 - d : d;
  }
  return device;
}

namespace {

std::string layout_refusal(const PipelineShape& shape, StageLayout layout,
                           const std::string& schedule) {
  const int devices = shape.devices_per_replica;
  const int v = shape.num_stages / devices;
  const bool fits =
      shape.num_stages == v * devices && (layout == StageLayout::kVShape         ? v == 2
                                          : layout == StageLayout::kOnePerDevice ? v == 1
                                                                                 : true);
  if (fits && shape.stage_device == virtual_stage_layout(layout, devices, v, "")) return "";
  const char* want =
      layout == StageLayout::kVShape ? "a V: two per device, device d holding stages d and 2D-1-d"
      : layout == StageLayout::kInterleaved ? "interleaved: stage s on device s mod D"
                                            : "one per device";
  return fmt::format(
      "schedule {}: needs its stages placed {} (stage devices [{}]; plan with "
      "--virtual-stages)",
      schedule, want, fmt::join(shape.stage_device, ", "));
}

}  // namespace

std::string schedule_refusal(const std::string& schedule, const PipelineShape& raw) {
  PipelineShape shape = raw;
  shape.normalize("schedule " + schedule);
  const StageLayout layout = stage_layout_of(schedule);
  const int D = shape.devices_per_replica, M = shape.micro_batches;
  if (shape.replicates_stages()) {
    // Stage replicas deal micro-batches round-robin from orders written per stage; schedules
    // that order a device by control edges (ddg, feature-replay) or place two stages on one
    // device (the virtual-stage layouts) have no such per-stage order to deal from.
    static const char* const kReplicable[] = {"naive",        "gpipe", "1f1b", "pipedream",
                                              "ftpipe-async", "zb-h1", "zb-h2"};
    if (std::find(std::begin(kReplicable), std::end(kReplicable), schedule) ==
        std::end(kReplicable)) {
      return fmt::format(
          "schedule {}: cannot replicate stages unevenly (stage replicas [{}]); naive, gpipe, "
          "1f1b, pipedream, ftpipe-async, zb-h1 and zb-h2 can",
          schedule, fmt::join(shape.stage_replicas, ", "));
    }
  }
  // A chain of replicated stages is laid out one stage per device group, in stage order.
  const bool replicated_chain =
      shape.replicates_stages() && shape.one_stage_per_device() &&
      std::is_sorted(shape.stage_device.begin(), shape.stage_device.end());
  if (layout != StageLayout::kOnePerDevice ||
      ((schedule == "zb-h1" || schedule == "zb-h2") && !replicated_chain)) {
    std::string why = layout_refusal(shape, layout, schedule);
    if (!why.empty()) return why;
  }
  if (schedule == "1f1b" && !shape.one_stage_per_device()) {
    return "schedule 1f1b: needs one stage per device (this plan puts several stages on one "
           "device; use gpipe)";
  }
  if (schedule == "zbv" && M < 2 * D - 1) {
    return fmt::format(
        "schedule zbv: needs at least 2D - 1 = {} micro-batches on {} devices "
        "(M = {})",
        2 * D - 1, D, M);
  }
  if (schedule == "dualpipev" && M < 2 * D) {
    return fmt::format(
        "schedule dualpipev: needs at least 2D = {} micro-batches on {} devices "
        "(M = {})",
        2 * D, D, M);
  }
  if (schedule == "interleaved-1f1b" && shape.num_stages > D && M % D != 0) {
    return fmt::format(
        "schedule interleaved-1f1b: micro-batches must be a multiple of the {} "
        "devices (M = {})",
        D, M);
  }
  return "";
}

void require_runnable(const std::string& schedule, const PipelineShape& shape) {
  const std::string why = schedule_refusal(schedule, shape);
  if (!why.empty()) throw InputError(why);
}

PipelineShape lay_out_stages(const std::string& schedule, PipelineShape shape, int devices, int v) {
  shape.num_stages = devices * v;
  shape.stage_device = virtual_stage_layout(stage_layout_of(schedule), devices, v, schedule);
  shape.devices_per_replica = devices;
  return shape;
}

}  // namespace pipetwin
