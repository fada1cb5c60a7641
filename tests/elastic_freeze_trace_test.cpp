// core/elastic/freeze_trace: the trace the executor writes and the simulator replays.
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/elastic/freeze_trace.hpp"
#include "tests/test_util.hpp"

namespace pipetwin::elastic {
namespace {

using test::input_error;

TEST(FreezeTrace, AlphaBoundTraceForVitB16) {
  // Equation 3 at alpha = 1/3, L = 12, a freeze step at every epoch start from epoch 1:
  // 4, 6, 8, 9, 10, 10, 11, 11, 11 — an event where the count changes.
  const FreezeTrace t = bound_trace(12, 1.0 / 3, 10, 1);
  std::vector<std::pair<int, int>> got;
  for (const auto& e : t.events) got.emplace_back(e.epoch, e.frozen_layers);
  EXPECT_THAT(got, ::testing::ElementsAre(std::pair(1, 4), std::pair(2, 6), std::pair(3, 8),
                                          std::pair(4, 9), std::pair(5, 10), std::pair(7, 11)));
  EXPECT_EQ(t.frozen_at(0, 500), 0);
  EXPECT_EQ(t.frozen_at(6, 0), 10);
  EXPECT_EQ(t.frozen_at(9, 0), 11);
  // Every second epoch: T = 1 at epoch 2, T = 2 at epoch 4, ...
  const FreezeTrace t2 = bound_trace(12, 1.0 / 3, 7, 2);
  ASSERT_EQ(t2.events.size(), 3u);
  EXPECT_EQ(t2.events[1].epoch, 4);
  EXPECT_EQ(t2.events[1].frozen_layers, 6);
}

TEST(FreezeTrace, AlphaBoundOverTheRun) {
  // Ten freeze intervals over 10 epochs are the per-epoch trace.
  const FreezeTrace per_epoch = bound_trace_over_run(12, 1.0 / 3, 10, 500, 10);
  const FreezeTrace reference = bound_trace(12, 1.0 / 3, 10, 1);
  ASSERT_EQ(per_epoch.events.size(), reference.events.size());
  for (size_t i = 0; i < reference.events.size(); ++i) {
    EXPECT_EQ(per_epoch.events[i].epoch, reference.events[i].epoch);
    EXPECT_EQ(per_epoch.events[i].sample, 0);
    EXPECT_EQ(per_epoch.events[i].frozen_layers, reference.events[i].frozen_layers);
  }
  // Over 3 epochs of 1000 samples, step T after 300 T samples: L = 24, alpha = 1/3 gives
  // floor(24 (1 - (2/3)^T)) = 8, 13, 16, 19, 20, 21, 22, 23, 23 (the last repeats: no event).
  const FreezeTrace squad = bound_trace_over_run(24, 1.0 / 3, 3, 1000, 10);
  std::vector<std::tuple<int, long, int>> got;
  for (const auto& e : squad.events) got.emplace_back(e.epoch, e.sample, e.frozen_layers);
  EXPECT_THAT(got, ::testing::ElementsAre(std::tuple(0, 300L, 8), std::tuple(0, 600L, 13),
                                          std::tuple(0, 900L, 16), std::tuple(1, 200L, 19),
                                          std::tuple(1, 500L, 20), std::tuple(1, 800L, 21),
                                          std::tuple(2, 100L, 22), std::tuple(2, 400L, 23)));
  squad.validate("test");
  EXPECT_EQ(input_error([] { bound_trace_over_run(24, 1.0 / 3, 3, 1000, 0); }),
            "alpha bound: epochs, samples and freeze steps must be positive (3, 1000, 0 given)");
  EXPECT_EQ(input_error([] { bound_trace_over_run(24, 1.5, 3, 1000, 10); }),
            "alpha bound: alpha must be in (0, 1) (1.5 given)");
}

TEST(FreezeTrace, MidEpochEventsTakeEffectAtTheirSample) {
  FreezeTrace t;
  t.layers = 4;
  t.events = {{0, 300, 3, 1}, {1, 0, 10, 2}, {1, 700, 17, 3}};
  EXPECT_EQ(t.frozen_at(0, 299), 0);
  EXPECT_EQ(t.frozen_at(0, 300), 1);
  EXPECT_EQ(t.frozen_at(1, 0), 2);
  EXPECT_EQ(t.frozen_at(1, 699), 2);
  EXPECT_EQ(t.frozen_at(1, 700), 3);
  EXPECT_EQ(t.frozen_at(5, 0), 3);
}

TEST(FreezeTrace, JsonRoundTrip) {
  test::TempDir dir;
  FreezeTrace t;
  t.model = "bert:tiny";
  t.layers = 2;
  t.alpha = 0.25;
  t.events = {{1, 0, 40, 1}, {2, 128, 90, 2}};
  save_freeze_trace(t, dir.file("t.json"));
  const FreezeTrace u = load_freeze_trace(dir.file("t.json"));
  EXPECT_EQ(u.model, "bert:tiny");
  EXPECT_EQ(u.layers, 2);
  EXPECT_DOUBLE_EQ(u.alpha, 0.25);
  ASSERT_EQ(u.events.size(), 2u);
  EXPECT_EQ(u.events[1].epoch, 2);
  EXPECT_EQ(u.events[1].sample, 128);
  EXPECT_EQ(u.events[1].step, 90);
  EXPECT_EQ(u.events[1].frozen_layers, 2);
}

std::string load_error(const std::string& events, const std::string& extra = "") {
  test::TempDir dir;
  test::write_text(dir.file("t.json"), R"({"format": "pipetwin.freeze_trace", "version": 1, )" +
                                           extra + R"("layers": 4, "events": )" + events + "}");
  const std::string path = dir.file("t.json");
  std::string msg = input_error([&] { load_freeze_trace(path); });
  const auto at = msg.find("t.json");
  return at == std::string::npos ? msg : msg.substr(at);
}

TEST(FreezeTraceErrors, NameTheFileAndField) {
  EXPECT_EQ(load_error(R"([{"epoch": 1, "frozen_layers": 3}, {"epoch": 2, "frozen_layers": 2}])"),
            "t.json: events[1]: frozen_layers must not decrease (2 after 3)");
  EXPECT_EQ(load_error(R"([{"epoch": 2, "frozen_layers": 1}, {"epoch": 1, "frozen_layers": 2}])"),
            "t.json: events[1]: events must be in time order at distinct points (epoch 1 sample 0 "
            "follows epoch 2 sample 0)");
  EXPECT_EQ(load_error(R"([{"epoch": 1, "frozen_layers": 5}])"),
            "t.json: events[0]: frozen_layers must be in 0..4 (5 given)");
  EXPECT_EQ(load_error(R"([{"epoch": -1, "frozen_layers": 1}])"),
            "t.json: events[0]: epoch must not be negative (-1 given)");
  EXPECT_EQ(load_error(R"([{"epoch": 1, "frozen": 1}])"),
            "t.json: events[0].frozen: unknown field (known: epoch, sample, step, frozen_layers)");
  EXPECT_EQ(load_error("[]", R"("alpha": 1.5, )"), "t.json: alpha: must be in [0, 1) (1.5 given)");
}

}  // namespace
}  // namespace pipetwin::elastic
