#include "core/schedule/limits.hpp"

#include <atomic>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/generators.hpp"

namespace pipetwin {

namespace {

constexpr double kDefaultLimit = 2e7;
constexpr double kBytesPerAction = 260;       // compiled + simulated (see the header)
constexpr double kSecondsPerAction = 2.3e-6;  // on this project's 2-core CI machine class

double initial_limit() {
  const char* env = std::getenv("PIPETWIN_MAX_ACTIONS");
  if (env == nullptr || *env == '\0') return kDefaultLimit;
  char* end = nullptr;
  const double v = std::strtod(env, &end);
  if (end == env || *end != '\0' || !(v >= 0)) {
    throw InputError(fmt::format(
        "PIPETWIN_MAX_ACTIONS: expected a non-negative number of actions, got \"{}\"", env));
  }
  return v;
}

std::atomic<double>& limit_cell() {
  static std::atomic<double> cell{initial_limit()};
  return cell;
}

}  // namespace

double estimated_actions(const std::string& schedule, const PipelineShape& shape) {
  const double K = shape.num_stages, M = shape.micro_batches;
  const bool recompute = shape.checkpoint != Checkpoint::kNone || schedule == "feature-replay" ||
                         schedule == "ftpipe-async";
  const double edges = shape.edges.empty() ? K - 1 : static_cast<double>(shape.edges.size());
  // All-reduces and optimizer steps: one per bucket and one per stage copy within a replica.
  double buckets = 0, steps = 0;
  for (int s = 0; s < shape.num_stages; ++s) {
    const bool listed = static_cast<size_t>(s) < shape.stage_replicas.size();
    const int r = listed ? shape.stage_replicas[static_cast<size_t>(s)] : 1;
    steps += r;
    if (shape.replicas * r < 2) continue;
    const bool bucketed = static_cast<size_t>(s) < shape.buckets.size();
    buckets += r * (bucketed && !shape.buckets[static_cast<size_t>(s)].empty()
                        ? static_cast<double>(shape.buckets[static_cast<size_t>(s)].size())
                        : 1);
  }
  // Split backwards (zb-h1, zb-h2, zbv, dualpipev) take one more compute action per micro-batch.
  const bool split = schedule_info(schedule).splits_backward;
  const double per_iteration =
      K * M * ((recompute ? 3 : 2) + (split ? 1 : 0)) + edges * M * 4 + steps + buckets;
  return per_iteration * static_cast<double>(shape.replicas) *
         static_cast<double>(shape.iterations);
}

double action_limit() {
  return limit_cell().load();
}

void set_action_limit(double actions) {
  if (!(actions >= 0)) {
    throw InputError(fmt::format("--max-actions must be non-negative ({} given)", actions));
  }
  limit_cell().store(actions);
}

void check_action_limit(const std::string& schedule, const PipelineShape& shape) {
  const double limit = action_limit();
  const double n = estimated_actions(schedule, shape);
  if (limit <= 0 || n <= limit) return;
  throw InputError(fmt::format(
      "schedule {}: K={}, M={}, dp={}, {} iterations is about {:.2g} actions (~{:.3g} GiB of "
      "memory, ~{:.2g} s to simulate), over the limit of {:.2g}: simulate fewer iterations or "
      "micro-batches, or raise the limit (--max-actions, PIPETWIN_MAX_ACTIONS; 0: none)",
      schedule, shape.num_stages, shape.micro_batches, shape.replicas, shape.iterations, n,
      n * kBytesPerAction / (1024.0 * 1024 * 1024), n * kSecondsPerAction, limit));
}

}  // namespace pipetwin
