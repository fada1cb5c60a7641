// Schedule generators and validation (core/schedule/): every generator yields a valid schedule
// for every shape; orders match the papers; broken schedules are rejected with a clear error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "test_util.hpp"

namespace pipetwin {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> letters(const std::vector<Action>& list, bool compute_only = true) {
  std::vector<std::string> out;
  for (const auto& a : list) {
    if (compute_only && stream_of(a.op) != StreamKind::kCompute) continue;
    out.push_back(std::string(op_letter(a.op)) + std::to_string(a.micro_batch));
  }
  return out;
}

TEST(Schedules, EveryGeneratorValidatesForEveryShape) {
  for (const auto& info : schedule_catalog()) {
    for (int K : {1, 2, 3, 4}) {
      for (int M : {1, 2, 5}) {
        for (int dp : {1, 2}) {
          for (Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast}) {
            const PipelineShape sh = test::shape_for(info.name, K, M, 3, dp, ck);
            if (!schedule_refusal(info.name, sh).empty()) continue;  // e.g. zbv with M < 2K - 1
            const Schedule s = make_schedule(info.name, sh);
            EXPECT_NO_THROW(CompiledSchedule(s, info.name))
                << info.name << " K=" << K << " M=" << M << " dp=" << dp;
          }
        }
      }
    }
  }
}

TEST(Schedules, GPipeFollowsTorchgpipeOrder) {
  // Device j: F1..Fm, then B_m, F'_{m-1}, B_{m-1}, ..., F'_1, B_1; no recompute of the last.
  const Schedule s = make_gpipe(test::pipeline_shape(2, 4, 1, 1, Checkpoint::kExceptLast));
  EXPECT_THAT(letters(s.devices[0]), ::testing::ElementsAre("F0", "F1", "F2", "F3", "B3", "R2",
                                                            "B2", "R1", "B1", "R0", "B0", "U-1"));
}

TEST(Schedules, OneFOneBWarmsUpWithKMinusOneMinusSForwards) {
  const Schedule s = make_1f1b(test::pipeline_shape(3, 5));
  EXPECT_THAT(letters(s.devices[0]), ::testing::ElementsAre("F0", "F1", "F2", "B0", "F3", "B1",
                                                            "F4", "B2", "B3", "B4", "U-1"));
  EXPECT_THAT(letters(s.devices[2]), ::testing::ElementsAre("F0", "B0", "F1", "B1", "F2", "B2",
                                                            "F3", "B3", "F4", "B4", "U-1"));
}

TEST(Schedules, PipeDreamFirstDeviceLoadsKMiniBatches) {
  const int K = 4;
  const Schedule s = make_pipedream(test::pipeline_shape(K, 1, 8));
  for (int st = 0; st < K; ++st) {
    const auto l = letters(s.devices[static_cast<size_t>(st)]);
    for (int i = 0; i < K - st; ++i) EXPECT_EQ(l[static_cast<size_t>(i)][0], 'F') << "stage " << st;
    EXPECT_EQ(l[static_cast<size_t>(K - st)], "B0") << "stage " << st;
  }
}

TEST(Schedules, PipeDreamBackwardReadsItsForwardsVersion) {
  const Schedule s = make_pipedream(test::pipeline_shape(3, 1, 9));
  std::map<int, int> fwd;
  for (const auto& a : s.devices[0]) {
    if (a.op == Op::kForward) fwd[a.micro_batch] = a.version;
    if (a.op == Op::kBackward) {
      EXPECT_EQ(a.version, fwd[a.micro_batch]);
    }
  }
}

TEST(Schedules, FtpipeRecomputesOnAllStagesButTheLast) {
  const int K = 3;
  const Schedule s = make_ftpipe_async(test::pipeline_shape(K, 2, 3));
  for (int st = 0; st < K; ++st) {
    int recomputes = 0;
    for (const auto& a : s.devices[static_cast<size_t>(st)]) recomputes += a.op == Op::kRecompute;
    EXPECT_EQ(recomputes, st == K - 1 ? 0 : 6) << "stage " << st;
  }
  EXPECT_FALSE(s.stashes_weights);
}

TEST(Schedules, DataParallelInsertsOneAllReducePerBucketBeforeEachStep) {
  PipelineShape sh = test::pipeline_shape(2, 4, 3, 2);
  sh.buckets = {{{0, 0, 10}, {0, 0, 5}}, {{1, 1, 7}}};
  const Schedule s = make_gpipe(sh);
  ASSERT_EQ(s.num_devices(), 4);
  for (int d = 0; d < 4; ++d) {
    const auto& list = s.devices[static_cast<size_t>(d)];
    int ar = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].op != Op::kAllReduce) continue;
      ++ar;
      // All-reduces sit right before the optimizer step (possibly after other all-reduces).
      size_t j = i;
      while (list[j].op == Op::kAllReduce) ++j;
      EXPECT_EQ(list[j].op, Op::kOptimizerStep);
    }
    EXPECT_EQ(ar, (d % 2 == 0 ? 2 : 1) * 3) << "device " << d;
  }
  EXPECT_NO_THROW(CompiledSchedule(s, "dp"));
}

TEST(Schedules, SeveralStagesPerDevice) {
  PipelineShape sh = test::pipeline_shape(4, 3, 2);
  sh.stage_device = {0, 1, 0, 1};
  EXPECT_NO_THROW(CompiledSchedule(make_gpipe(sh), "gpipe"));
  EXPECT_NO_THROW(CompiledSchedule(make_naive(sh), "naive"));
  EXPECT_THROW(make_1f1b(sh), InputError);
  EXPECT_THROW(make_pipedream(sh), InputError);
}

TEST(Schedules, UnknownScheduleNameListsTheKnownOnes) {
  try {
    make_schedule("zero-bubble", test::pipeline_shape(2, 2));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown schedule \"zero-bubble\""));
    EXPECT_THAT(e.what(), HasSubstr("gpipe"));
  }
}

TEST(Schedules, JsonRoundTrip) {
  PipelineShape sh = test::pipeline_shape(3, 2, 2, 2);
  const Schedule s = make_ddg(sh);
  const Json doc = schedule_to_json(s);
  const Schedule back = schedule_from_json(JsonView(doc, "s.json"));
  ASSERT_EQ(back.num_devices(), s.num_devices());
  for (int d = 0; d < s.num_devices(); ++d) {
    EXPECT_EQ(letters(back.devices[static_cast<size_t>(d)], false),
              letters(s.devices[static_cast<size_t>(d)], false));
  }
  EXPECT_EQ(back.control.size(), s.control.size());
  EXPECT_NO_THROW(CompiledSchedule(back, "s.json"));
}

// Broken schedules: edit a valid one and check the error.
class BrokenSchedule : public ::testing::Test {
 protected:
  Schedule s = make_gpipe(test::pipeline_shape(2, 3));
  std::vector<Action>& dev(int d) { return s.devices[static_cast<size_t>(d)]; }
  size_t find(int d, Op op, int mb) {
    for (size_t i = 0; i < dev(d).size(); ++i) {
      if (dev(d)[i].op == op && dev(d)[i].micro_batch == mb) return i;
    }
    ADD_FAILURE() << "no such action";
    return 0;
  }
  std::string error() {
    try {
      CompiledSchedule c(s, "sched.json");
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(BrokenSchedule, MissingBackward) {
  dev(1).erase(dev(1).begin() + static_cast<long>(find(1, Op::kBackward, 1)));
  EXPECT_THAT(error(),
              HasSubstr("sched.json: device 1: stage 1 micro-batch 1 is never backwarded"));
}

TEST_F(BrokenSchedule, DuplicateForward) {
  dev(0).push_back(dev(0)[find(0, Op::kForward, 2)]);
  EXPECT_THAT(error(), HasSubstr("micro-batch 2 forwarded twice on stage 0"));
}

TEST_F(BrokenSchedule, BackwardBeforeForward) {
  std::swap(dev(1)[find(1, Op::kForward, 0)], dev(1)[find(1, Op::kBackward, 0)]);
  EXPECT_THAT(error(), HasSubstr("backward before its forward"));
}

TEST_F(BrokenSchedule, WrongVersion) {
  dev(0)[find(0, Op::kForward, 1)].version = 3;
  EXPECT_THAT(error(), HasSubstr("declares weight version 3 but the order gives 0"));
}

TEST_F(BrokenSchedule, StageOnTheWrongDevice) {
  dev(0)[find(0, Op::kForward, 1)].stage = 1;
  EXPECT_THAT(error(), HasSubstr("stage 1 lives on device 1 of its replica, not 0"));
}

TEST_F(BrokenSchedule, SendWithoutRecv) {
  for (size_t i = 0; i < dev(1).size(); ++i) {
    if (dev(1)[i].op == Op::kRecv && dev(1)[i].micro_batch == 2) {
      dev(1).erase(dev(1).begin() + static_cast<long>(i));
      break;
    }
  }
  EXPECT_THAT(error(), ::testing::AnyOf(HasSubstr("needs a recv of its input activation"),
                                        HasSubstr("no matching recv on the peer")));
}

TEST_F(BrokenSchedule, CrossedReceivesDeadlock) {
  // Device 1 receives activation 1 before activation 0, while device 0 sends 0 before 1.
  size_t r0 = 0, r1 = 0;
  for (size_t i = 0; i < dev(1).size(); ++i) {
    if (dev(1)[i].op == Op::kRecv && dev(1)[i].micro_batch == 0) r0 = i;
    if (dev(1)[i].op == Op::kRecv && dev(1)[i].micro_batch == 1) r1 = i;
  }
  std::swap(dev(1)[r0], dev(1)[r1]);
  EXPECT_THAT(error(), HasSubstr("schedule deadlocks"));
}

TEST_F(BrokenSchedule, OptimizerStepBeforeBackward) {
  const size_t u = dev(0).size() - 1;
  ASSERT_EQ(dev(0)[u].op, Op::kOptimizerStep);
  const Action step = dev(0)[u];
  dev(0).pop_back();
  dev(0).insert(dev(0).begin() + 1, step);
  EXPECT_THAT(error(), ::testing::AnyOf(HasSubstr("optimizer step before the backward"),
                                        HasSubstr("declares weight version")));
}

// A split backward (BackwardInput I, BackwardWeight W) broken in each way compiling catches.
class BrokenSplit : public BrokenSchedule {
 protected:
  void SetUp() override { s = make_zb_h1(test::pipeline_shape(2, 3)); }
};

TEST_F(BrokenSplit, ZbH1CompilesAndRoundTripsThroughJson) {
  EXPECT_EQ(error(), "");
  const Schedule back = schedule_from_json(JsonView(schedule_to_json(s), "s.json"));
  EXPECT_EQ(letters(back.devices[1], false), letters(s.devices[1], false));
  // The last stage defers its W's: F0 I0 F1 I1 W0 F2 I2 W1 W2 on stage 1 of 2.
  EXPECT_THAT(letters(s.devices[1]),
              ::testing::ElementsAre("F0", "I0", "F1", "I1", "W0", "F2", "I2", "W1", "W2", "U-1"));
}

TEST_F(BrokenSplit, WeightHalfWithoutItsInputHalf) {
  dev(1)[find(1, Op::kBackwardInput, 1)].op = Op::kBackward;
  EXPECT_THAT(error(), HasSubstr("weight backward without an input backward"));
}

TEST_F(BrokenSplit, InputHalfWithoutItsWeightHalf) {
  dev(0).erase(dev(0).begin() + static_cast<long>(find(0, Op::kBackwardWeight, 2)));
  EXPECT_THAT(error(), HasSubstr("input-gradient backward without its weight backward"));
}

TEST_F(BrokenSplit, WeightHalfBeforeItsInputHalf) {
  const size_t w = find(1, Op::kBackwardWeight, 0);
  const Action moved = dev(1)[w];
  dev(1).erase(dev(1).begin() + static_cast<long>(w));
  dev(1).insert(dev(1).begin(), moved);
  EXPECT_THAT(error(), HasSubstr("weight backward before its input backward"));
}

TEST_F(BrokenSplit, OptimizerStepBeforeAWeightHalf) {
  const size_t u = dev(1).size() - 1;
  ASSERT_EQ(dev(1)[u].op, Op::kOptimizerStep);
  std::swap(dev(1)[u], dev(1)[u - 1]);  // the step before the last W
  EXPECT_THAT(error(), HasSubstr("optimizer step before the backward of micro-batch 2"));
}

TEST(ScheduleJson, BadFieldsNameTheField) {
  Json doc = schedule_to_json(make_gpipe(test::pipeline_shape(2, 2)));
  doc["devices"][0][1]["op"] = "fly";
  try {
    schedule_from_json(JsonView(doc, "s.json"));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("s.json: devices[0][1].op: unknown op \"fly\""));
  }
  Json doc2 = schedule_to_json(make_gpipe(test::pipeline_shape(2, 2)));
  doc2["devices"].erase(1);
  EXPECT_THROW(schedule_from_json(JsonView(doc2, "s.json")), InputError);
}

}  // namespace
}  // namespace pipetwin
