// Compiled schedules (core/schedule/compiled.hpp) and the event queue (sim/event_queue.hpp), as
// rebuilt for sweep speed: the linked dependencies and rendezvous groups equal the rules
// of compiled.hpp recomputed here by brute force over the action lists — for every generator, with
// data parallelism, gradient buckets, checkpointing, skip edges and several stages per device —
// the lookup tables name the right actions, a skipped deadlock check gives the engine's stall
// and then the compiler's own error, and the queue pops in (time, push order).
#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "sim/event_queue.hpp"
#include "sim_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin {
namespace {

using Dep = std::pair<int, int>;  // (pred, from_layer)

// The first action of replica `rep` matching `pred`, or -1.
template <class Pred>
int find(const CompiledSchedule& cs, int rep, Pred pred) {
  for (int id = 0; id < cs.num_actions(); ++id) {
    if (cs.replica(id) == rep && pred(cs.action(id))) return id;
  }
  return -1;
}

int find_op(const CompiledSchedule& cs, int rep, Op op, int stage, int mb) {
  return find(cs, rep, [&](const Action& b) {
    return b.op == op && b.stage == stage && b.micro_batch == mb;
  });
}

// The Backward of (stage, mb), or its BackwardInput when split.
int find_input_backward(const CompiledSchedule& cs, int rep, int stage, int mb) {
  const int b = find_op(cs, rep, Op::kBackward, stage, mb);
  return b >= 0 ? b : find_op(cs, rep, Op::kBackwardInput, stage, mb);
}

// The Backward of (stage, mb), or its BackwardWeight when split: what produces weight gradients.
int find_weight_backward(const CompiledSchedule& cs, int rep, int stage, int mb) {
  const int b = find_op(cs, rep, Op::kBackward, stage, mb);
  return b >= 0 ? b : find_op(cs, rep, Op::kBackwardWeight, stage, mb);
}

int find_recv(const CompiledSchedule& cs, int rep, Payload p, int stage, int peer, int mb) {
  return find(cs, rep, [&](const Action& b) {
    return b.op == Op::kRecv && b.payload == p && b.stage == stage && b.peer_stage == peer &&
           b.micro_batch == mb;
  });
}

// compiled.hpp's table of dependencies, in its order, then the control dependencies.
std::vector<Dep> expected_deps(const CompiledSchedule& cs, int id) {
  const auto& sh = cs.shape();
  const Action& a = cs.action(id);
  const int rep = cs.replica(id), local = cs.device(id) % sh.devices_per_replica;
  const int s = a.stage, j = a.micro_batch;
  std::vector<Dep> out;
  auto data = [&](Op op, Payload p, int stage, int peer) {
    const int same_device =
        op == Op::kForward ? find_op(cs, rep, op, peer, j) : find_input_backward(cs, rep, peer, j);
    out.emplace_back(
        sh.device_of(peer) == local ? same_device : find_recv(cs, rep, p, stage, peer, j), -1);
  };
  switch (a.op) {
    case Op::kForward:
      for (const auto& e : sh.edges) {
        if (e.to == s) data(Op::kForward, Payload::kActivation, s, e.from);
      }
      break;
    case Op::kRecompute:
      out.emplace_back(find_op(cs, rep, Op::kForward, s, j), -1);
      break;
    case Op::kBackwardWeight:
      out.emplace_back(find_op(cs, rep, Op::kBackwardInput, s, j), -1);
      break;
    case Op::kBackward:
    case Op::kBackwardInput:
      out.emplace_back(find_op(cs, rep, Op::kForward, s, j), -1);
      if (find_op(cs, rep, Op::kRecompute, s, j) >= 0) {
        out.emplace_back(find_op(cs, rep, Op::kRecompute, s, j), -1);
      }
      for (const auto& e : sh.edges) {
        if (e.from == s) data(Op::kBackward, Payload::kGradient, s, e.to);
      }
      break;
    case Op::kSend:
      out.emplace_back(a.payload == Payload::kActivation ? find_op(cs, rep, Op::kForward, s, j)
                                                         : find_input_backward(cs, rep, s, j),
                       -1);
      break;
    case Op::kAllReduce:
      out.emplace_back(find_weight_backward(cs, rep, s, j),
                       sh.buckets.empty() ? -1 : sh.buckets[s][a.bucket].first_layer);
      break;
    case Op::kOptimizerStep:
      for (int k = 0; k < cs.num_actions(); ++k) {
        const Action& b = cs.action(k);
        if (b.op == Op::kAllReduce && cs.replica(k) == rep && b.stage == s && b.step == a.step) {
          out.emplace_back(k, -1);
        }
      }
      break;
    case Op::kRecv:
      break;
  }
  for (const auto& c : cs.schedule().control) {
    if (cs.id(c.after) == id) out.emplace_back(cs.id(c.before), -1);
  }
  return out;
}

// The members a rendezvous group of `id` must have: a recv and its send; every replica's
// all-reduce of one bucket and step.
std::vector<int> expected_group(const CompiledSchedule& cs, int id) {
  const Action& a = cs.action(id);
  std::vector<int> out;
  for (int k = 0; k < cs.num_actions(); ++k) {
    const Action& b = cs.action(k);
    const bool match =
        a.op == Op::kAllReduce
            ? b.op == Op::kAllReduce && b.stage == a.stage && b.step == a.step &&
                  b.bucket == a.bucket
            : (b.op == Op::kSend || b.op == Op::kRecv) && cs.replica(k) == cs.replica(id) &&
                  b.payload == a.payload && b.micro_batch == a.micro_batch &&
                  ((b.stage == a.stage && b.peer_stage == a.peer_stage && b.op == a.op) ||
                   (b.stage == a.peer_stage && b.peer_stage == a.stage && b.op != a.op));
    if (match) out.push_back(k);
  }
  return out;
}

void expect_linked_by_the_rules(const CompiledSchedule& cs, const std::string& what) {
  for (int id = 0; id < cs.num_actions(); ++id) {
    std::vector<Dep> have;
    for (const auto& d : cs.deps(id)) have.emplace_back(d.pred, d.from_layer);
    ASSERT_EQ(have, expected_deps(cs, id)) << what << ": " << describe(cs.action(id));
    const Op op = cs.action(id).op;
    const bool grouped = op == Op::kSend || op == Op::kRecv || op == Op::kAllReduce;
    ASSERT_EQ(cs.group(id) >= 0, grouped) << what << ": " << describe(cs.action(id));
    if (!grouped) continue;
    std::vector<int> members(cs.group_members(cs.group(id)).begin(),
                             cs.group_members(cs.group(id)).end());
    std::sort(members.begin(), members.end());
    ASSERT_EQ(members, expected_group(cs, id)) << what << ": " << describe(cs.action(id));
  }
}

PipelineShape shape(int K, int M, int N, int dp, Checkpoint ck) {
  PipelineShape s = test::pipeline_shape(K, M, N, dp, ck);
  for (int k = 0; k < K; ++k) {
    // Two buckets per stage; the second (earlier layers) ready at the end of backward.
    s.buckets.push_back({{10 * k + 5, 10 * k + 9, 100}, {10 * k, 10 * k + 4, 50}});
  }
  return s;
}

TEST(CompiledSchedule, DependenciesAndGroupsFollowTheRulesForEveryGenerator) {
  for (const auto& info : schedule_catalog()) {
    for (int dp : {1, 2}) {
      for (Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast}) {
        // Three stages, or two devices of two chunks for the V shapes (with M = 2D).
        PipelineShape sh = shape(default_virtual_stages(info.name) == 2 ? 4 : 3, 4, 3, dp, ck);
        ASSERT_TRUE(test::place_for(info.name, sh)) << info.name;
        ASSERT_TRUE(schedule_refusal(info.name, sh).empty()) << info.name;
        const CompiledSchedule cs(make_schedule(info.name, sh), info.name);
        expect_linked_by_the_rules(
            cs, fmt::format("{} dp={} ck={}", info.name, dp, checkpoint_name(ck)));
      }
    }
  }
}

TEST(CompiledSchedule, SkipEdgesAndSeveralStagesPerDeviceFollowTheRules) {
  PipelineShape skip = shape(4, 2, 2, 2, Checkpoint::kNone);
  skip.edges = {{0, 1, 1}, {1, 2, 1}, {2, 3, 1}, {0, 3, 1}, {1, 3, 1}};
  for (const char* name : {"gpipe", "1f1b", "pipedream"}) {
    expect_linked_by_the_rules(CompiledSchedule(make_schedule(name, skip), name), name);
  }
  PipelineShape folded = shape(4, 3, 2, 1, Checkpoint::kAlways);
  folded.stage_device = {0, 1, 1, 0};
  for (const char* name : {"gpipe", "naive"}) {
    expect_linked_by_the_rules(CompiledSchedule(make_schedule(name, folded), name), name);
  }
}

TEST(CompiledSchedule, LookupTablesNameTheActions) {
  const PipelineShape sh = shape(3, 4, 2, 2, Checkpoint::kExceptLast);
  const CompiledSchedule cs(make_gpipe(sh), "gpipe");
  int recomputes = 0;
  for (int id = 0; id < cs.num_actions(); ++id) {
    const Action& a = cs.action(id);
    const int rep = cs.replica(id);
    if (a.op == Op::kForward) {
      EXPECT_EQ(cs.forward_of(rep, a.stage, a.micro_batch), id);
    }
    if (a.op == Op::kBackward) {
      EXPECT_EQ(cs.backward_of(rep, a.stage, a.micro_batch), id);
    }
    if (a.op == Op::kRecompute) {
      EXPECT_EQ(cs.recompute_of(rep, a.stage, a.micro_batch), id);
      ++recomputes;
    }
  }
  // except_last: every micro-batch but the last of each mini-batch, on every stage and replica.
  EXPECT_EQ(recomputes, 2 * 3 * 2 * (4 - 1));
  for (int step = 0; step < 2; ++step) {
    EXPECT_EQ(cs.recompute_of(1, 2, step * 4 + 3), -1);
  }
}

TEST(CompiledSchedule, ControlDependencyOnAMissingActionIsAnError) {
  Schedule s = make_gpipe(shape(2, 2, 1, 1, Checkpoint::kNone));
  s.control.push_back({{0, 0}, {0, 99}});
  try {
    CompiledSchedule cs(s, "sched.json");
    FAIL() << "accepted a control dependency on action 99";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(),
                ::testing::HasSubstr("sched.json: control dependency on action 99 of device 0"));
  }
}

// GPipe K=2, M=3 whose second device receives activation 1 before activation 0, while the first
// sends 0 before 1: it can never run.
TEST(CompiledSchedule, SkippedProgressCheckLeavesTheStallToTheEngine) {
  testing::PlanSpec spec;
  spec.stages = 2;
  spec.chunks = 3;
  const PlanContext ctx(testing::synthetic_plan(spec), 1);
  Schedule s = make_gpipe(ctx.shape);
  auto& dev1 = s.devices[1];
  auto recv = [&](int mb) {
    return std::find_if(dev1.begin(), dev1.end(),
                        [&](const Action& a) { return a.op == Op::kRecv && a.micro_batch == mb; });
  };
  std::iter_swap(recv(0), recv(1));
  std::string compiler_error;
  try {
    CompiledSchedule checked(s, "sched");
  } catch (const InputError& e) {
    compiler_error = e.what();
  }
  EXPECT_THAT(compiler_error, ::testing::HasSubstr("sched: schedule deadlocks after"));
  CompiledSchedule unchecked(s, "sched", false);  // no throw
  sim::PipelineSimulator simulator(ctx, unchecked);
  std::vector<double> start, end;
  EXPECT_THROW(simulator.run_engine(start, end), sim::DeadlockError);
  try {
    unchecked.check_progress("sched");
    FAIL() << "check_progress passed a deadlocking schedule";
  } catch (const InputError& e) {
    EXPECT_EQ(e.what(), compiler_error);
  }
}

TEST(EventQueue, PopsByTimeThenPushOrder) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> time(0, 20);  // many equal times
  sim::EventQueue q;
  std::vector<std::pair<double, int>> pushed;  // (time, push order)
  int order = 0;
  std::vector<std::pair<double, int>> popped;
  for (int round = 0; round < 200; ++round) {
    // Interleave pushes and pops, as a simulation does; pushes never go back in time.
    const double now = popped.empty() ? 0 : popped.back().first;
    for (int k = 0; k < 1 + round % 5; ++k) {
      const double t = now + time(rng);
      q.push(t, order, 0);
      pushed.emplace_back(t, order++);
    }
    for (int k = 0; k < round % 4 && !q.empty(); ++k) {
      const sim::Event e = q.pop();
      popped.emplace_back(e.time, e.id);
    }
  }
  while (!q.empty()) {
    const sim::Event e = q.pop();
    popped.emplace_back(e.time, e.id);
  }
  ASSERT_EQ(popped.size(), pushed.size());
  for (size_t k = 1; k < popped.size(); ++k) {
    EXPECT_TRUE(popped[k - 1] < popped[k]) << "pop " << k;
  }
}

TEST(EventQueue, SignedZerosTieAndNegativeTimesComeFirst) {
  sim::EventQueue q;
  q.push(0.0, 0, 0);
  q.push(-0.0, 1, 0);  // equal to 0.0: after it, in push order
  q.push(2.5, 2, 0);
  q.push(-1.0, 3, 0);
  q.push(1e-300, 4, 0);
  std::vector<int> ids;
  while (!q.empty()) ids.push_back(q.pop().id);
  EXPECT_EQ(ids, (std::vector<int>{3, 0, 1, 4, 2}));
}

}  // namespace
}  // namespace pipetwin
