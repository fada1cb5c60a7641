// Tests of the discrete-event engine alone (sim/engine.hpp): FIFO streams, dependencies at end
// and at start + offset, rendezvous groups, determinism, deadlock detection.
#include "sim/engine.hpp"

#include <gtest/gtest.h>

namespace pipetwin::sim {
namespace {

// A small builder for task graphs.
struct G {
  TaskGraph g;
  std::vector<std::vector<int32_t>> streams;
  std::vector<std::vector<std::pair<int32_t, double>>> deps;
  std::vector<std::vector<int32_t>> groups;

  int task(int stream, double duration) {
    const int id = static_cast<int>(g.duration.size());
    g.duration.push_back(duration);
    g.stream.push_back(stream);
    g.group.push_back(-1);
    if (static_cast<int>(streams.size()) <= stream) streams.resize(static_cast<size_t>(stream) + 1);
    streams[static_cast<size_t>(stream)].push_back(id);
    deps.emplace_back();
    return id;
  }
  void dep(int after, int before, double offset = -1) {
    deps[static_cast<size_t>(after)].push_back({before, offset});
  }
  void group(std::vector<int32_t> members) {
    for (int32_t m : members) g.group[static_cast<size_t>(m)] = static_cast<int32_t>(groups.size());
    groups.push_back(std::move(members));
  }
  const TaskGraph& build() {
    g.num_streams = static_cast<int>(streams.size());
    g.stream_begin.assign(1, 0);
    for (const auto& s : streams) {
      for (int32_t t : s) g.stream_tasks.push_back(t);
      g.stream_begin.push_back(static_cast<int32_t>(g.stream_tasks.size()));
    }
    g.dep_begin.assign(1, 0);
    for (const auto& d : deps) {
      for (const auto& [p, off] : d) {
        g.dep_pred.push_back(p);
        g.dep_offset.push_back(off);
      }
      g.dep_begin.push_back(static_cast<int32_t>(g.dep_pred.size()));
    }
    g.group_begin.assign(1, 0);
    for (const auto& m : groups) {
      for (int32_t t : m) g.group_members.push_back(t);
      g.group_begin.push_back(static_cast<int32_t>(g.group_members.size()));
    }
    g.prepare();
    return g;
  }
};

TEST(Engine, StreamRunsTasksBackToBackInOrder) {
  G b;
  const int t0 = b.task(0, 1.0), t1 = b.task(0, 2.0), t2 = b.task(0, 0.5);
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[t0], 0);
  EXPECT_DOUBLE_EQ(s[t1], 1);
  EXPECT_DOUBLE_EQ(s[t2], 3);
  EXPECT_DOUBLE_EQ(e[t2], 3.5);
}

TEST(Engine, StreamsRunConcurrentlyAndDependenciesDelay) {
  G b;
  const int a = b.task(0, 2.0);
  const int c = b.task(1, 1.0);  // independent: starts at 0
  const int d = b.task(1, 1.0);  // waits for a
  b.dep(d, a);
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[c], 0);
  EXPECT_DOUBLE_EQ(s[d], 2);
}

TEST(Engine, FifoHeadBlocksLaterReadyTasks) {
  // The second task of stream 1 is ready at once but must wait behind the first.
  G b;
  const int a = b.task(0, 5.0);
  const int head = b.task(1, 1.0);
  const int later = b.task(1, 1.0);
  b.dep(head, a);
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[head], 5);
  EXPECT_DOUBLE_EQ(s[later], 6);
}

TEST(Engine, OffsetDependencyFiresPartWayThroughPredecessor) {
  G b;
  const int backward = b.task(0, 10.0);
  const int bucket = b.task(1, 1.0);
  b.dep(bucket, backward, 4.0);  // ready 4 s into the backward
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[bucket], 4);
  EXPECT_DOUBLE_EQ(e[bucket], 5);
}

TEST(Engine, OffsetBeyondDurationIsClampedToTheEnd) {
  G b;
  const int p = b.task(0, 2.0);
  const int q = b.task(1, 1.0);
  b.dep(q, p, 7.0);
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[q], 2);
}

TEST(Engine, RendezvousMembersStartTogether) {
  G b;
  const int producer = b.task(0, 3.0);
  const int send = b.task(1, 2.0);
  const int busy = b.task(2, 4.0);  // keeps the receiver's stream busy until 4
  const int recv = b.task(2, 2.0);
  b.dep(send, producer);
  b.group({send, recv});
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[busy], 0);
  EXPECT_DOUBLE_EQ(s[send], 4);  // producer done at 3, receiver free at 4
  EXPECT_DOUBLE_EQ(s[recv], 4);
  EXPECT_DOUBLE_EQ(e[recv], 6);
}

TEST(Engine, EqualTimesAreDeterministic) {
  G b;
  for (int i = 0; i < 50; ++i) b.task(i % 5, 1.0);
  const TaskGraph& g = b.build();
  std::vector<double> s1, e1, s2, e2;
  Engine().run(g, s1, e1);
  Engine().run(g, s2, e2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(e1, e2);
}

TEST(Engine, DeadlockIsReported) {
  G b;
  const int x = b.task(0, 1.0);
  const int y = b.task(1, 1.0);
  b.dep(x, y);
  b.dep(y, x);
  std::vector<double> s, e;
  EXPECT_THROW(Engine().run(b.build(), s, e), DeadlockError);
}

TEST(Engine, ReusableAcrossRuns) {
  G b;
  const int a = b.task(0, 1.0);
  const int c = b.task(1, 1.0);
  b.dep(c, a);
  const TaskGraph& g = b.build();
  Engine engine;
  std::vector<double> s, e;
  engine.run(g, s, e);
  engine.run(g, s, e);
  EXPECT_DOUBLE_EQ(e[c], 2);
}

}  // namespace
}  // namespace pipetwin::sim

namespace pipetwin::sim {
namespace {

TEST(EngineSharing, TasksSlowEachOtherOnlyWhileBothRun) {
  // Two streams sharing one core: alone a task takes its duration, together 1.5x as long.
  G b;
  const int a = b.task(0, 4.0);
  const int c = b.task(1, 2.0);
  b.g.stream_share = {0, 0};
  b.g.shared_duration = {6.0, 3.0};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  // Both start at 0 at the shared rates; c finishes its 3 s of shared work at 3, by which time a
  // has done 3/6 of its work; the remaining half runs alone: 0.5 * 4 = 2 more seconds.
  EXPECT_DOUBLE_EQ(e[c], 3.0);
  EXPECT_DOUBLE_EQ(e[a], 5.0);
}

TEST(EngineSharing, EachFurtherCoRunnerAddsAsMuchAgain) {
  // Four streams of one GPU, each task 1 s alone and 2 s beside one other (fair share of a
  // saturated device): four together take 1 + 3 x (2 - 1) = 4 s each, the device's total work;
  // a task after them runs alone again.
  G b;
  std::vector<int> t;
  for (int s = 0; s < 4; ++s) t.push_back(b.task(s, 1.0));
  const int after = b.task(0, 1.0);
  b.g.stream_share = {0, 0, 0, 0};
  b.g.shared_duration = {2.0, 2.0, 2.0, 2.0, 2.0};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  for (int id : t) EXPECT_DOUBLE_EQ(e[id], 4.0);
  EXPECT_DOUBLE_EQ(e[after], 5.0);
}

TEST(EngineSharing, ThreeThenTwoCarryTheWorkOver) {
  // Tasks of 1, 2 and 2 s alone (2, 4, 4 s beside one other): with three running each takes
  // 3x its alone time, so the first is done at 3 s, when the others have done 3/6 of their work;
  // the rest runs two at a time (4 s each): 2 more seconds.
  G b;
  const int x = b.task(0, 1.0);
  const int y = b.task(1, 2.0);
  const int z = b.task(2, 2.0);
  b.g.stream_share = {0, 0, 0};
  b.g.shared_duration = {2.0, 4.0, 4.0};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(e[x], 3.0);
  EXPECT_DOUBLE_EQ(e[y], 5.0);
  EXPECT_DOUBLE_EQ(e[z], 5.0);
}

TEST(EngineSharing, UnsharedStreamsAreUnaffected) {
  G b;
  const int a = b.task(0, 4.0);
  const int c = b.task(1, 2.0);
  b.g.stream_share = {0, -1};
  b.g.shared_duration = {6.0, 3.0};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(e[a], 4.0);
  EXPECT_DOUBLE_EQ(e[c], 2.0);
}

TEST(EngineSharing, TasksOnOneCoreTakeTurns) {
  // Two streams on one core (more stages than vCPUs): 2 s and 4 s of work, each at half speed
  // while both run, whatever their shared duration beside another core. The first is done at
  // 4 s; the other has 2 s left alone: done at 6 s, the core's total work.
  G b;
  const int a = b.task(0, 2.0);
  const int c = b.task(1, 4.0);
  b.g.stream_share = {0, 0};
  b.g.stream_core = {0, 0};
  b.g.shared_duration = {3.0, 6.0};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(e[a], 4.0);
  EXPECT_DOUBLE_EQ(e[c], 6.0);
}

TEST(EngineSharing, TurnsOnACoreAndContentionFromTheOtherMultiply) {
  // Cores 0 and 1 slow each other (1 s alone, 1.5 s beside a busy other core). Core 0 runs two
  // tasks in turns, core 1 one: core 1's task counts one busy core, 1.5 s; core 0's tasks take
  // 2 x 1.5 = 3 s while core 1 is busy, so by 1.5 s they have done half their work, and the
  // other half alone on core 0, in turns, takes 2 x 0.5 = 1 s more.
  G b;
  const int x = b.task(0, 1.0);
  const int y = b.task(1, 1.0);
  const int z = b.task(2, 1.0);
  b.g.stream_share = {0, 0, 0};
  b.g.stream_core = {0, 0, 1};
  b.g.shared_duration = {1.5, 1.5, 1.5};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(e[z], 1.5);
  EXPECT_DOUBLE_EQ(e[x], 2.5);
  EXPECT_DOUBLE_EQ(e[y], 2.5);
}

TEST(EngineSharing, SequentialTasksRunAtFullSpeed) {
  G b;
  const int a = b.task(0, 4.0);
  const int c = b.task(1, 2.0);
  b.dep(c, a);
  b.g.stream_share = {0, 0};
  b.g.shared_duration = {6.0, 3.0};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(e[a], 4.0);
  EXPECT_DOUBLE_EQ(e[c], 6.0);
}

}  // namespace
}  // namespace pipetwin::sim

namespace pipetwin::sim {
namespace {

// Cold starts: stream 1's task waits for stream 0's; the extra is piecewise linear in the wait
// through (0, 0), (0.5 s, 0.1 s), (2 s, 0.4 s), flat after.
G cold_pair(double first, double second) {
  G b;
  const int a = b.task(0, first);
  const int c = b.task(1, second);
  b.dep(c, a);
  b.g.cold_waits = {0.5, 2.0};
  b.g.cold_extra = {0.1, 0.4, 0.1, 0.4};
  return b;
}

TEST(EngineCold, ExtraInterpolatesInTheWait) {
  G b = cold_pair(1.0, 2.0);  // waited 1 s: 0.1 + (1 - 0.5) / 1.5 * 0.3 = 0.2
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(e[0], 1.0);  // the first task of a stream that starts at 0 waited nothing
  EXPECT_DOUBLE_EQ(s[1], 1.0);
  EXPECT_NEAR(e[1], 3.2, 1e-12);
}

TEST(EngineCold, ShortWaitsScaleFromZeroAndLongOnesAreFlat) {
  {
    G b = cold_pair(0.25, 2.0);  // half the first wait: half its extra
    std::vector<double> s, e;
    Engine().run(b.build(), s, e);
    EXPECT_NEAR(e[1] - s[1], 2.05, 1e-12);
  }
  {
    G b = cold_pair(5.0, 2.0);  // beyond the last wait: its extra
    std::vector<double> s, e;
    Engine().run(b.build(), s, e);
    EXPECT_NEAR(e[1] - s[1], 2.4, 1e-12);
  }
}

TEST(EngineCold, BackToBackTasksPayNothing) {
  G b;
  const int a = b.task(0, 1.0);
  const int c = b.task(0, 2.0);
  b.g.cold_waits = {0.5};
  b.g.cold_extra = {0.3, 0.3};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(e[a], 1.0);
  EXPECT_DOUBLE_EQ(e[c], 3.0);
}

TEST(EngineCold, SharedTaskIsStretchedByTheSameFactor) {
  // Streams 1 and 2 share a core. Task d (stream 2: 2 s alone, 4 s shared) starts at 0 and runs
  // alone for 1 s, half its work. Task c (stream 1: 2 s alone, 3 s shared) waits 1 s for a, so
  // its cold extra is 0.2 s alone: factor 1.1, 2.2 s alone, 3.3 s shared; it shares from t = 1.
  G b;
  const int a = b.task(0, 1.0);
  const int c = b.task(1, 2.0);
  const int d = b.task(2, 2.0);
  b.dep(c, a);
  b.g.stream_share = {-1, 0, 0};
  b.g.shared_duration = {1.0, 3.0, 4.0};
  b.g.cold_waits = {0.5, 2.0};
  b.g.cold_extra = {0, 0, 0.1, 0.4, 0, 0};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  // d: half its work left at t = 1, shared rate 1/4 per s: ends at 1 + 2 = 3. c: by t = 3 it did
  // 2 / 3.3 of its work; the rest alone at 2.2 s per task: 2.2 * (1 - 2 / 3.3).
  EXPECT_DOUBLE_EQ(e[d], 3.0);
  EXPECT_NEAR(e[c], 3.0 + 2.2 * (1 - 2 / 3.3), 1e-12);
}

TEST(EngineCold, WrongNumberOfFiguresIsAnError) {
  G b = cold_pair(1.0, 2.0);
  b.g.cold_extra.pop_back();
  std::vector<double> s, e;
  EXPECT_THROW(Engine().run(b.build(), s, e), std::invalid_argument);
}

}  // namespace
}  // namespace pipetwin::sim

namespace pipetwin::sim {
namespace {

TEST(EngineLock, TasksHoldingOneLockRunOneAtATime) {
  // Backward passes of two stream sets of one GPU (one autograd thread): the second waits for the
  // first; a task without the lock on a third stream runs beside both.
  G b;
  const int x = b.task(0, 2.0);
  const int y = b.task(1, 3.0);
  const int free = b.task(2, 1.0);
  b.g.lock = {0, 0, -1};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[x], 0.0);
  EXPECT_DOUBLE_EQ(s[y], 2.0);
  EXPECT_DOUBLE_EQ(e[y], 5.0);
  EXPECT_DOUBLE_EQ(s[free], 0.0);
}

TEST(EngineLock, WaitersStartInTheOrderTheyBecameReady) {
  // Holder 0..4 on stream 0; stream 2's task is ready at 1, stream 1's at 2: stream 2's goes
  // first when the lock is released, stream 1's after it; other locks do not interfere.
  G b;
  const int holder = b.task(0, 4.0);
  const int gate1 = b.task(3, 2.0), late = b.task(1, 1.0);
  const int gate2 = b.task(4, 1.0), early = b.task(2, 1.0);
  const int other = b.task(5, 1.0);
  b.dep(late, gate1);
  b.dep(early, gate2);
  b.g.lock = {0, -1, 0, -1, 0, 1};
  std::vector<double> s, e;
  Engine().run(b.build(), s, e);
  EXPECT_DOUBLE_EQ(s[early], 4.0);
  EXPECT_DOUBLE_EQ(s[late], 5.0);
  EXPECT_DOUBLE_EQ(s[other], 0.0);
  EXPECT_DOUBLE_EQ(e[holder], 4.0);
}

TEST(EngineLock, ALockInARendezvousIsRefused) {
  G b;
  const int a = b.task(0, 1.0), c = b.task(1, 1.0);
  b.group({a, c});
  b.g.lock = {0, -1};
  std::vector<double> s, e;
  EXPECT_THROW(Engine().run(b.build(), s, e), std::invalid_argument);
}

}  // namespace
}  // namespace pipetwin::sim
