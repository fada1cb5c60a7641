#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/limits.hpp"
#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

const std::vector<ScheduleInfo>& schedule_catalog() {
  static const std::vector<ScheduleInfo> catalog = {
      {"naive", false, "naive model parallel: one micro-batch in flight (EPFL 2.1)"},
      {"gpipe", false, "GPipe, torchgpipe clock-cycle order, optional checkpointing"},
      {"1f1b", false, "PipeDream-Flush: one forward one backward, flush per mini-batch"},
      {"pipedream", true, "PipeDream: asynchronous 1F1B with weight stashing (EPFL 2.4)"},
      {"ddg", true, "delayed gradients, lock-step forward, stashed weights (EPFL 2.2)"},
      {"feature-replay", true, "delayed gradients with recompute on current weights (EPFL 2.3)"},
      {"ftpipe-async", true, "FTPipe asynchronous pipeline, recompute on all but the last stage"},
      {"interleaved-1f1b", false, "1F1B over v model chunks per device (Megatron-LM, SC'21)"},
      {"zb-h1", false, "zero bubble H1: split backward, W deferred, 1F1B's memory (Qi et al.)",
       true},
      {"zb-h2", false, "zero bubble H2: more warm-up, about twice 1F1B's memory (Qi et al.)", true},
      {"zbv", false, "zero bubble V: two chunks per device in a V, 1F1B's memory (Qi et al.)",
       true},
      {"dualpipev", false, "DeepSeek-V3's DualPipe, V form: F&B of two micro-batches paired", true},
  };
  return catalog;
}

const ScheduleInfo& schedule_info(const std::string& name) {
  for (const auto& info : schedule_catalog()) {
    if (info.name == name) return info;
  }
  std::string known;
  for (const auto& info : schedule_catalog()) known += (known.empty() ? "" : ", ") + info.name;
  throw InputError(fmt::format("unknown schedule \"{}\" (known: {})", name, known));
}

Schedule make_schedule(const std::string& name, const PipelineShape& shape) {
  schedule_info(name);
  check_action_limit(name, shape);  // before generating anything (limits.hpp)
  if (shape.replicates_stages()) require_runnable(name, shape);
  if (name == "naive") return make_naive(shape);
  if (name == "gpipe") return make_gpipe(shape);
  if (name == "1f1b") return make_1f1b(shape);
  if (name == "pipedream") return make_pipedream(shape);
  if (name == "ddg") return make_ddg(shape);
  if (name == "feature-replay") return make_feature_replay(shape);
  if (name == "interleaved-1f1b") return make_interleaved_1f1b(shape);
  if (name == "zb-h1") return make_zb_h1(shape);
  if (name == "zb-h2") return make_zb_h2(shape);
  if (name == "zbv") return make_zbv(shape);
  if (name == "dualpipev") return make_dualpipev(shape);
  return make_ftpipe_async(shape);
}

}  // namespace pipetwin
