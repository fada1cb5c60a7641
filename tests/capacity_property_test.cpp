// The capacity search against exhaustive enumeration (studies/capacity.hpp): on random small
// models and the test catalog's small clusters, every layout of the space `pipetwin plan` accepts
// — K from 1 to the devices, dp, M from K to micro-batch 1, every checkpoint mode, the
// memory-aware partitioners, the schedules and their virtual stages — is planned memory-aware and
// simulated here, one by one, with the planner's public API. The search, which skips layouts by
// lower bounds and stands in for the planner where it can predict it, must find a plan as fast
// (within the budget when one is given) and as cheap as the best enumerated, and say "does not
// fit" exactly where nothing enumerated fits.
#include <cmath>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "capacity_test_util.hpp"
#include "core/schedule/schedule.hpp"
#include "profiles/model_source.hpp"
#include "sim/planner.hpp"
#include "studies/capacity.hpp"
#include "studies/sweep/evaluate.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

using test::TempDir;
using test_capacity::Catalogue;

struct Best {
  bool found = false;
  double fastest_s = std::numeric_limits<double>::infinity();  // within the budget
  double cheapest = std::numeric_limits<double>::infinity();   // cost
};

// Every layout of `cluster`'s space, planned and simulated: the fastest and the cheapest that fit.
Best enumerate(const CapacityRequest& q, const std::string& cluster_name, double price) {
  const Cluster cluster = load_cluster(cluster_name, *q.catalog);
  const Profile profile = resolve_profile(q.model, "", cluster.device, q.precision);
  const int D = cluster.num_devices(), L = profile.num_layers(), B = q.batch;
  const double steps = q.epochs * std::ceil(q.samples / q.batch);
  Best best;
  for (int k = 1; k <= std::min(D, L); ++k) {
    for (int dp = 1; k * dp <= D; ++dp) {
      if (B % dp != 0) continue;
      for (const ScheduleCandidate& s : schedule_candidates(q.schedules, k, L, 0)) {
        if (s.virtual_stages * k > L) continue;
        for (const std::string& partitioner : q.partitioners) {
          for (Checkpoint ck : q.checkpoints) {
            for (int m = k; m <= B / dp; ++m) {
              if ((B / dp) % m != 0) continue;
              PlanRequest r;
              r.model = q.model;
              r.profile = profile;
              r.cluster = cluster;
              r.catalog = q.catalog;
              r.stages = k;
              r.dp = dp;
              r.schedule = s.schedule;
              r.virtual_stages = s.virtual_stages;
              r.partitioner = partitioner;
              r.checkpoint = ck;
              r.batch_size = B;
              r.chunks = m;
              const ResolvedRequest resolved = resolve_request(r);
              if (!resolved.error.empty() || !resolved.refusal(m).empty()) continue;
              Evaluation e;
              try {
                e = evaluate_plan(make_plan(r), 0, false);
              } catch (const InputError&) {
                continue;  // no partition fits
              }
              if (!e.ok() || !e.fits) continue;
              const double cost = steps * e.iteration_time_s / 3600 * e.physical_units * price;
              best.found = true;
              if (q.budget <= 0 || cost <= q.budget)
                best.fastest_s = std::min(best.fastest_s, e.iteration_time_s);
              best.cheapest = std::min(best.cheapest, cost);
            }
          }
        }
      }
    }
  }
  return best;
}

// 2..5 layers of random speed and per-micro-batch overhead (so that M matters), activations and
// parameters sized so that the 1 GiB test devices fit some layouts and not others.
std::string random_model(std::mt19937& rng) {
  std::uniform_int_distribution<int> layers(2, 5);
  std::uniform_real_distribution<double> u(0, 1);
  const int L = layers(rng);
  auto list = [&](double lo, double hi) {
    std::string out;
    for (int l = 0; l < L; ++l)
      out += fmt::format("{}{:.3f}", l ? "/" : "", lo + (hi - lo) * u(rng));
    return out;
  };
  const double scale = u(rng) < 0.5 ? 1 : 4;  // some models fit nowhere
  return fmt::format(
      "uniform:layers={},fwd_ms={},overhead_ms={},act_kb={},saved_kb={},param_kb={},"
      "optimizer_kb={},opt_ms={}",
      L, list(0.2, 2), list(0, 1), list(100, 20000), list(1000, 40000 * scale),
      list(0, 120000 * scale), list(0, 120000 * scale), list(0, 0.5));
}

TEST(CapacityProperty, AsGoodAsExhaustiveEnumeration) {
  TempDir dir;
  const Catalogue cat(dir);
  std::mt19937 rng(45);
  const std::vector<std::string> clusters = {"slow1", "pair", "quad", "streams"};
  int fitting = 0, not_fitting = 0;
  for (int trial = 0; trial < 6; ++trial) {
    CapacityRequest q = cat.request(random_model(rng), clusters);
    q.schedules = trial % 2 ? std::vector<std::string>{"gpipe", "1f1b", "zb-h2", "zbv"}
                            : std::vector<std::string>{"1f1b", "interleaved-1f1b", "dualpipev"};
    std::vector<Best> best;
    for (const std::string& name : clusters)
      best.push_back(enumerate(q, name, q.prices.per_gpu_hour.at(name)));
    if (trial >= 3 && best[2].found) q.budget = best[2].cheapest * 1.2;  // quad's, within 20%
    if (q.budget > 0) {
      best.clear();
      for (const std::string& name : clusters)
        best.push_back(enumerate(q, name, q.prices.per_gpu_hour.at(name)));
    }
    const CapacityReport r = plan_capacity(q);
    for (size_t i = 0; i < clusters.size(); ++i) {
      const ClusterCapacity& c = r.clusters[i];
      const Best& b = best[i];
      const std::string what = fmt::format("{} on {} (budget {})", q.model, c.cluster, q.budget);
      ASSERT_EQ(c.fits, b.found) << what << ": " << c.note;
      if (!b.found) {
        EXPECT_NE(c.note.find("does not fit"), std::string::npos) << what << ": " << c.note;
        ++not_fitting;
        continue;
      }
      ++fitting;
      EXPECT_TRUE(c.note.find("does not fit") == std::string::npos) << what;
      ASSERT_TRUE(c.cheapest.found) << what;
      EXPECT_NEAR(c.cheapest.cost, b.cheapest, 1e-9 * b.cheapest) << what;
      ASSERT_EQ(c.fastest.found, std::isfinite(b.fastest_s)) << what;
      if (c.fastest.found) {
        EXPECT_NEAR(c.fastest.iteration_time_s, b.fastest_s, 1e-9 * b.fastest_s) << what;
      }
    }
  }
  // The seeds give both kinds of cluster.
  EXPECT_GT(fitting, 4);
  EXPECT_GT(not_fitting, 0);
}

}  // namespace
}  // namespace pipetwin::sim
