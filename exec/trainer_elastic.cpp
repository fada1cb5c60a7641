// Trainer: the elastic parts — gradient norms for the freeze algorithm, the policy's decisions
// and the transitions that carry them out (exec/trainer.hpp "Elastic training").
#include <chrono>
#include <cstdio>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/autocast.hpp"
#include "exec/distributed.hpp"
#include "exec/fault.hpp"
#include "exec/session.hpp"
#include "exec/state_exchange.hpp"
#include "exec/train_data.hpp"
#include "exec/trainer.hpp"
#include "exec/trainer_progress.hpp"

namespace pipetwin::exec {

ExecOptions Trainer::session_options() const {
  ExecOptions o = options_.exec;
  o.track_gradient_norms = elastic_ != nullptr;
  return o;
}

void Trainer::replace_session(const Plan& plan) {
  auto next = std::make_unique<PipelineSession>(plan, session_options(), dist_, data_->train);
  session_ = std::move(next);
  session_warm_ = false;
  plan_ = plan;
  fingerprint_ = plan_fingerprint(plan_, precision_tag(options_.exec.precision()));
}

void Trainer::collect_gradient_norms(int64_t steps) {
  // Squared norms per (step, profile layer) from replica 0's stages on this rank, summed over the
  // ranks (each layer of replica 0 lives on exactly one rank), so every rank sees every layer.
  const size_t P = static_cast<size_t>(plan_.profile.num_layers());
  std::vector<double> table(static_cast<size_t>(steps) * P, 0.0);
  for (const auto& [d, stages] : session_->hosted()) {
    for (const auto& [s, rt] : stages) {
      if (!rt->spec().track_gradient_norms) continue;
      const auto norms = rt->take_gradient_norms();
      if (static_cast<int64_t>(norms.size()) != steps) {
        throw std::logic_error(
            fmt::format("stage {}: {} gradient norm records for {} steps", s, norms.size(), steps));
      }
      const auto& layers = rt->spec().layers;
      for (size_t k = 0; k < norms.size(); ++k) {
        for (size_t i = 0; i < layers.size(); ++i) {
          table[k * P + static_cast<size_t>(layers[i])] += norms[k][i];
        }
      }
    }
  }
  table = sum_over_ranks(std::move(table));
  for (int64_t k = 0; k < steps; ++k) {
    const auto first = table.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(k) * P);
    elastic_->observe(elastic_->transformer_norms(
        std::vector<double>(first, first + static_cast<std::ptrdiff_t>(P))));
  }
}

std::optional<Transition> Trainer::elastic_decision(bool epoch_end) {
  const Progress& p = *progress_;
  if (!elastic_->due(p.step, epoch_end, p.epoch)) return std::nullopt;
  const int frozen = elastic_->freeze_step();
  if (dist_) {
    // Every rank applied Equation 1 to the same all-reduced norms; rank 0's count is the one.
    const double zero = 0;
    const int agreed = static_cast<int>(
        sum_over_ranks({dist_->rank() == 0 ? static_cast<double>(frozen) : zero})[0]);
    if (agreed != frozen) {
      throw RunFailure(fmt::format(
          "rank {}: freeze step {} after step {}: this rank computed {} frozen layers, rank 0 {}",
          dist_->rank(), elastic_->T(), p.step, frozen, agreed));
    }
  }
  if (frozen == p.frozen_layers) return std::nullopt;
  return elastic_->transition(frozen);
}

void Trainer::agree_on_position(const Plan& next) const {
  // What AutoDP's message group carries to new replicas (Figure 7: "epoch number and learning
  // rate ..., the boundary of frozen layers, and pipeline GPU range"): here every rank keeps it
  // itself, by the same arithmetic; before moving any state the ranks check that they agree
  // with rank 0 on it and on the plan they are about to build.
  if (!dist_) return;
  const Progress& p = *progress_;
  const uint64_t fp = fnv1a64(plan_fingerprint(next, precision_tag(options_.exec.precision())));
  const std::vector<double> mine = {static_cast<double>(p.step),
                                    static_cast<double>(p.epoch),
                                    static_cast<double>(p.epoch_sample),
                                    p.lr,
                                    static_cast<double>(p.frozen_layers),
                                    static_cast<double>(fp >> 32),
                                    static_cast<double>(fp & 0xffffffffULL)};
  const std::vector<double> rank0 =
      sum_over_ranks(dist_->rank() == 0 ? mine : std::vector<double>(mine.size(), 0.0));
  if (rank0 != mine) {
    throw std::runtime_error(fmt::format(
        "this rank is at step {}, epoch {}, sample {}, lr {}, {} frozen layers, plan {:x}; rank 0 "
        "at step {}, epoch {}, sample {}, lr {}, {} frozen layers, plan {:x}",
        p.step, p.epoch, p.epoch_sample, p.lr, p.frozen_layers, fp, rank0[0], rank0[1], rank0[2],
        rank0[3], rank0[4],
        (static_cast<uint64_t>(rank0[5]) << 32) | static_cast<uint64_t>(rank0[6])));
  }
}

void Trainer::carry_out(const Transition& t) {
  Progress& p = *progress_;
  const auto start = std::chrono::steady_clock::now();
  const int rank = session_->rank();
  const std::string what = fmt::format(
      "elastic transition after step {} (K {} -> {}, dp {} -> {}, frozen layers {} -> "
      "{})",
      p.step, plan_.num_stages(), t.plan.num_stages(), plan_.dp, t.plan.dp, p.frozen_layers,
      t.frozen_layers);
  try {
    agree_on_position(t.plan);
    const Fault fault = Fault::from_environment();
    StageState all =
        gather_layer_state(*session_, dist_, [&] { fault.at_transition(rank, p.step); });
    replace_session(t.plan);
    for (const auto& [d, stages] : session_->hosted()) {
      for (const auto& [s, rt] : stages) {
        all.stage = s;
        restore_stage(all, *rt, session_->model(), what);
      }
    }
  } catch (const std::exception& e) {
    throw RunFailure(
        fmt::format("{}{}: {}", dist_ ? fmt::format("rank {}: ", rank) : "", what, e.what()));
  }
  set_learning_rate();
  set_cache(cache_wanted(t));  // AutoCache at the new boundary (Section 3.4)
  if (t.frozen_layers != p.frozen_layers) {
    p.frozen_layers = t.frozen_layers;
    p.freeze.push_back({static_cast<int>(p.epoch), static_cast<long>(p.epoch_sample),
                        static_cast<long>(p.step), t.frozen_layers});
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  p.transition_s += seconds;
  if (options_.verbose && rank == 0) {
    std::printf("step %lld: K=%d dp=%d M=%d frozen=%d%s  (transition %.2f s)\n",
                static_cast<long long>(p.step), plan_.num_stages(), plan_.dp, plan_.chunks,
                p.frozen_layers, p.cache ? " cache" : "", seconds);
    std::fflush(stdout);
  }
}

}  // namespace pipetwin::exec
