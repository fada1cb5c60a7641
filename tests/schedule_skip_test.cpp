// Skip connections in the schedule IR (core/schedule/transfer_order.hpp): stage graphs
// whose edges jump over stages (U-Net's skips, T5's encoder output feeding every decoder stage)
// must not deadlock under any schedule, and every skipped tensor must travel once per
// micro-batch, straight from its producer stage to its consumer stage (torchgpipe Section 3.3.1,
// portals), its gradient once straight back.
#include <map>
#include <set>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "test_util.hpp"
#include "core/schedule/transfer_order.hpp"

namespace pipetwin {
namespace {

// A chain of K stages plus skips: U-Net-like (stage i -> stage K-1-i, the encoder half feeding the
// mirrored decoder half) and, with `span`, every stage s -> s + span + 1 (the skip jumps over
// `span` stages).
PipelineShape skip_shape(int K, int M, int span, bool unet, int N = 2,
                         Checkpoint ck = Checkpoint::kNone, int dp = 1) {
  PipelineShape sh;
  sh.num_stages = K;
  sh.micro_batches = M;
  sh.iterations = N;
  sh.checkpoint = ck;
  sh.replicas = dp;
  std::set<std::pair<int, int>> edges;
  for (int s = 0; s + 1 < K; ++s) edges.insert({s, s + 1});
  for (int s = 0; span > 0 && s + span + 1 < K; ++s) edges.insert({s, s + span + 1});
  for (int i = 0; unet && i < K - 1 - i; ++i) edges.insert({i, K - 1 - i});
  for (const auto& [a, b] : edges) sh.edges.push_back({a, b, 1.0});
  return sh;
}

// T5-like: encoder stages 0..E-1 in a chain, the last encoder stage feeds every decoder stage.
PipelineShape encoder_decoder_shape(int K, int E, int M) {
  PipelineShape sh;
  sh.num_stages = K;
  sh.micro_batches = M;
  sh.iterations = 2;
  for (int s = 0; s + 1 < K; ++s) sh.edges.push_back({s, s + 1, 1.0});
  for (int d = E + 1; d < K; ++d) sh.edges.push_back({E - 1, d, 1.0});
  return sh;
}

using TransferId = std::tuple<int, int, int, int, int>;  // replica, payload, from, to, mb

// Checks that every cross-device stage edge carries exactly one Send and one Recv per micro-batch
// and direction, on the producer's and the consumer's device, and nothing else travels.
void expect_direct_transfers(const Schedule& s, const std::string& what) {
  const auto& sh = s.shape;
  const int per = sh.devices_per_replica, J = sh.micro_batches * sh.iterations;
  std::map<TransferId, int> sends, recvs;
  for (int d = 0; d < s.num_devices(); ++d) {
    for (const auto& a : s.devices[static_cast<size_t>(d)]) {
      if (a.op != Op::kSend && a.op != Op::kRecv) continue;
      const bool act = a.payload == Payload::kActivation;
      const bool sending = a.op == Op::kSend;
      const int from = (act == sending) ? a.stage : a.peer_stage;
      const int to = (act == sending) ? a.peer_stage : a.stage;
      // The side that holds the tensor first: producer for activations, consumer for gradients.
      const int here = sending ? (act ? from : to) : (act ? to : from);
      EXPECT_EQ(sh.device_of(here), d % per) << what << ": " << describe(a) << " on device " << d;
      ++(sending ? sends : recvs)[{d / per, static_cast<int>(a.payload), from, to, a.micro_batch}];
    }
  }
  size_t expected = 0;
  for (const auto& e : sh.edges) {
    if (sh.device_of(e.from) == sh.device_of(e.to)) continue;
    for (int r = 0; r < sh.replicas; ++r) {
      for (int mb = 0; mb < J; ++mb) {
        for (Payload p : {Payload::kActivation, Payload::kGradient}) {
          const TransferId id{r, static_cast<int>(p), e.from, e.to, mb};
          EXPECT_EQ(sends[id], 1) << what << ": edge " << e.from << "->" << e.to << " mb " << mb;
          EXPECT_EQ(recvs[id], 1) << what << ": edge " << e.from << "->" << e.to << " mb " << mb;
          ++expected;
        }
      }
    }
  }
  EXPECT_EQ(sends.size(), expected) << what;
  EXPECT_EQ(recvs.size(), expected) << what;
}

TEST(ScheduleSkip, EveryScheduleRunsWithSkipsSpanningOneTwoAndThreeStages) {
  for (const auto& info : schedule_catalog()) {
    for (int K : {3, 4, 5, 8}) {
      for (int span : {1, 2, 3}) {
        if (span + 1 >= K) continue;
        for (int M : {1, 2, 3, 8}) {
          for (Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast}) {
            const std::string what = info.name + " K=" + std::to_string(K) +
                                     " span=" + std::to_string(span) + " M=" + std::to_string(M);
            PipelineShape sh = skip_shape(K, M, span, false, 2, ck);
            if (!test::place_for(info.name, sh)) continue;
            const Schedule s = make_schedule(info.name, sh);
            EXPECT_NO_THROW(CompiledSchedule(s, what)) << what;
            expect_direct_transfers(s, what);
          }
        }
      }
    }
  }
}

TEST(ScheduleSkip, EveryScheduleRunsUNetAndEncoderDecoderGraphs) {
  for (const auto& info : schedule_catalog()) {
    for (int K = 2; K <= 8; ++K) {
      for (int M : {1, 4}) {
        for (int dp : {1, 2}) {
          const std::string what = info.name + " unet K=" + std::to_string(K) +
                                   " M=" + std::to_string(M) + " dp=" + std::to_string(dp);
          PipelineShape sh = skip_shape(K, M, 0, true, 2, Checkpoint::kExceptLast, dp);
          if (!test::place_for(info.name, sh)) continue;
          const Schedule s = make_schedule(info.name, sh);
          EXPECT_NO_THROW(CompiledSchedule(s, what)) << what;
          expect_direct_transfers(s, what);
        }
      }
      for (int E = 1; E < K; ++E) {
        const std::string what =
            info.name + " t5 K=" + std::to_string(K) + " E=" + std::to_string(E);
        PipelineShape sh = encoder_decoder_shape(K, E, 4);
        if (!test::place_for(info.name, sh)) continue;
        const Schedule s = make_schedule(info.name, sh);
        EXPECT_NO_THROW(CompiledSchedule(s, what)) << what;
        expect_direct_transfers(s, what);
      }
    }
  }
}

TEST(ScheduleSkip, SeveralStagesPerDeviceWithSkips) {
  for (const std::string name : {"naive", "gpipe"}) {
    PipelineShape sh = skip_shape(6, 4, 2, true);
    sh.stage_device = {0, 1, 2, 0, 1, 2};
    const Schedule s = make_schedule(name, sh);
    EXPECT_NO_THROW(CompiledSchedule(s, name)) << name;
    expect_direct_transfers(s, name);
  }
}

// FTPipe's asynchronous pipeline on Mixed-pipe placements (several stages per GPU, Section 4.1):
// every device interleaves its stages, nothing deadlocks, the last stage never recomputes.
TEST(ScheduleSkip, FtpipeAsyncRunsSeveralStagesPerDevice) {
  for (int M : {1, 2, 5}) {
    PipelineShape sh = skip_shape(6, M, 2, true, 3);
    sh.stage_device = {0, 1, 2, 0, 1, 2};
    const Schedule s = make_ftpipe_async(sh);
    EXPECT_NO_THROW(CompiledSchedule(s, "ftpipe-async")) << "M=" << M;
    expect_direct_transfers(s, "ftpipe-async M=" + std::to_string(M));
    for (int d = 0; d < 3; ++d) {
      std::set<int> stages;
      for (const auto& a : s.devices[static_cast<size_t>(d)]) {
        stages.insert(a.stage);
        EXPECT_FALSE(a.op == Op::kRecompute && a.stage == 5) << describe(a);
      }
      EXPECT_EQ(stages, (std::set<int>{d, d + 3}));
    }
  }
}

// "For a stage of depth d, FTPipe first computes d+1 forward passes" (Section 4): depth is the
// longest path to the loss, not the stage's index. Diamond 0 -> {1, 2} -> 3: stage 1 has depth 1.
TEST(ScheduleSkip, AsynchronousWarmUpFollowsStageDepth) {
  PipelineShape sh;
  sh.num_stages = 4;
  sh.micro_batches = 1;
  sh.iterations = 8;
  sh.edges = {{0, 1, 1.0}, {0, 2, 1.0}, {1, 3, 1.0}, {2, 3, 1.0}};
  const Schedule s = make_ftpipe_async(sh);
  EXPECT_NO_THROW(CompiledSchedule(s, "diamond"));
  const std::vector<int> depth = {2, 1, 1, 0};
  for (int st = 0; st < 4; ++st) {
    int forwards = 0;
    for (const auto& a : s.devices[static_cast<size_t>(st)]) {
      if (a.op == Op::kBackward || a.op == Op::kRecompute) break;
      forwards += a.op == Op::kForward;
    }
    EXPECT_EQ(forwards, depth[static_cast<size_t>(st)] + 1) << "stage " << st;
  }
}

// The issue-5 repro in miniature: stages 0 -> 1 -> 2 plus the skip 0 -> 2. Stage 2's backward
// produces the gradients for stage 1 and stage 0 at once; stage 1 needs its gradient first (stage
// 0 needs stage 1's), so stage 2 sends to stage 1 first, and stage 0 takes the gradient of stage 2
// (produced first) before the one of stage 1.
TEST(ScheduleSkip, GradientsLeaveInTheOrderTheyAreNeededAndArriveInTheOrderTheyAreMade) {
  const Schedule s = make_gpipe(skip_shape(3, 2, 1, false, 1));
  auto transfers = [&](int device, Op op) {
    std::vector<std::string> out;
    for (const auto& a : s.devices[static_cast<size_t>(device)]) {
      if (a.op == op && a.payload == Payload::kGradient) out.push_back(describe(a));
    }
    return out;
  };
  EXPECT_THAT(transfers(2, Op::kSend),
              ::testing::ElementsAre("S grad s2->s1 mb1", "S grad s2->s0 mb1", "S grad s2->s1 mb0",
                                     "S grad s2->s0 mb0"));
  EXPECT_THAT(transfers(0, Op::kRecv),
              ::testing::ElementsAre("V grad s2->s0 mb1", "V grad s1->s0 mb1", "V grad s2->s0 mb0",
                                     "V grad s1->s0 mb0"));
}

// On a plain chain the builder keeps the generator's order: every Recv sits right before the
// compute action that consumes it.
TEST(ScheduleSkip, PlainChainsKeepTheGeneratorsTransferOrder) {
  PipelineShape chain;
  chain.num_stages = 4;
  chain.micro_batches = 5;
  chain.iterations = 2;
  chain.normalize("chain");
  EXPECT_TRUE(is_plain_chain(chain));
  EXPECT_FALSE(is_plain_chain(skip_shape(4, 1, 1, false)));
  for (const auto& info : schedule_catalog()) {
    if (info.name == "ddg" || info.name == "feature-replay") continue;  // lock-step receives
    PipelineShape sh = chain;
    if (!test::place_for(info.name, sh) || !is_plain_chain(sh)) continue;  // the V shapes
    const Schedule s = make_schedule(info.name, sh);
    for (const auto& list : s.devices) {
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].op != Op::kRecv) continue;
        size_t j = i;
        while (j < list.size() && list[j].op == Op::kRecv) ++j;
        ASSERT_LT(j, list.size()) << info.name;
        EXPECT_EQ(list[j].micro_batch, list[i].micro_batch)
            << info.name << " " << describe(list[i]);
        if (list[i].payload == Payload::kActivation) {
          EXPECT_EQ(list[j].op, Op::kForward) << info.name << " " << describe(list[i]);
        } else {
          EXPECT_TRUE(is_input_backward(list[j].op)) << info.name << " " << describe(list[i]);
        }
      }
    }
  }
}

// The rule itself on hand-made lists: a deadlocking order is repaired, a sound one on a chain is
// left alone, and control dependencies follow the actions they name.
TEST(ScheduleSkip, OrderTransfersRepairsADeadlockingOrder) {
  PipelineShape sh = skip_shape(3, 1, 1, false, 1);
  sh.normalize("skip");
  auto act = [](Op op, Payload p, int stage, int peer) {
    return Action{op, p, stage, 0, peer, -1, 0, -1};
  };
  const Action F0{Op::kForward, Payload::kNone, 0, 0, -1, -1, 0, 0};
  const Action F1{Op::kForward, Payload::kNone, 1, 0, -1, -1, 0, 0};
  const Action F2{Op::kForward, Payload::kNone, 2, 0, -1, -1, 0, 0};
  Action B0 = F0, B1 = F1, B2 = F2;
  B0.op = B1.op = B2.op = Op::kBackward;
  const auto A = Payload::kActivation, G = Payload::kGradient;
  std::vector<std::vector<Action>> lists = {
      {F0, act(Op::kSend, A, 0, 1), act(Op::kSend, A, 0, 2), act(Op::kRecv, G, 0, 1),
       act(Op::kRecv, G, 0, 2), B0},
      {act(Op::kRecv, A, 1, 0), F1, act(Op::kSend, A, 1, 2), act(Op::kRecv, G, 1, 2), B1,
       act(Op::kSend, G, 1, 0)},
      {act(Op::kRecv, A, 2, 0), act(Op::kRecv, A, 2, 1), F2, B2, act(Op::kSend, G, 2, 0),
       act(Op::kSend, G, 2, 1)},
  };
  auto compile = [&](const std::vector<std::vector<Action>>& l) {
    Schedule s;
    s.kind = "hand";
    s.shape = sh;
    s.devices = l;
    for (auto& list : s.devices) {
      for (auto& a : list) {
        if (a.op == Op::kForward || a.op == Op::kBackward) a.version = 0;
      }
    }
    for (int st = 0; st < 3; ++st) {
      s.devices[static_cast<size_t>(st)].push_back(
          Action{Op::kOptimizerStep, Payload::kNone, st, -1, -1, -1, 0, 1});
    }
    return CompiledSchedule(s, "hand");
  };
  EXPECT_THROW(compile(lists), InputError);              // the order as written deadlocks
  std::vector<ControlDep> control = {{{2, 2}, {2, 5}}};  // F s2 before S grad s2->s1
  EXPECT_TRUE(order_transfers_by_ideal_time(sh, lists, control));
  EXPECT_NO_THROW(compile(lists));
  EXPECT_EQ(describe(lists[2][4]), "S grad s2->s1 mb0");
  EXPECT_EQ(describe(lists[2][5]), "S grad s2->s0 mb0");
  // The control dependency still names the same two actions, now at their new places.
  EXPECT_EQ(control[0].before.index, 2);
  EXPECT_EQ(control[0].after.index, 4);
}

}  // namespace
}  // namespace pipetwin
