// The liveness walk (core/schedule/liveness.hpp): what a device holds after each action — graphs
// and inputs of micro-batches in flight, the weight versions they pin, received tensors held
// ahead of use — against what each schedule's paper says it keeps.
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "core/schedule/compiled.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/liveness.hpp"
#include "core/schedule/weight_versions.hpp"
#include "test_util.hpp"

namespace pipetwin {
namespace {

CompiledSchedule compile(const std::string& schedule, const PipelineShape& shape) {
  return CompiledSchedule(make_schedule(schedule, shape), schedule);
}

// List index of the last action of `device` with op `op` on `stage` (-1: none).
int last_index(const CompiledSchedule& cs, int device, Op op, int stage) {
  const auto& list = cs.schedule().devices[static_cast<size_t>(device)];
  int last = -1;
  for (size_t i = 0; i < list.size(); ++i)
    if (list[i].op == op && list[i].stage == stage) last = static_cast<int>(i);
  return last;
}

TEST(Liveness, CheckpointedForwardsKeepInputsUntilTheRecomputeRebuildsTheGraph) {
  // torchgpipe except_last: after the last forward, stage 0 holds M inputs, a graph only for the
  // last micro-batch; the others pin version 0 (their recompute reads it) without a graph.
  const int K = 3, M = 4;
  const CompiledSchedule cs =
      compile("gpipe", test::pipeline_shape(K, M, 1, 1, Checkpoint::kExceptLast));
  const Liveness lv(cs);
  const LiveSet after_forwards = expected_after(lv, 0, last_index(cs, 0, Op::kForward, 0));
  ASSERT_EQ(after_forwards.micro_batches.size(), static_cast<size_t>(M));
  for (const LiveMicroBatch& m : after_forwards.micro_batches) {
    EXPECT_EQ(m.forward, cs.forward_of(0, 0, m.micro_batch));
    EXPECT_EQ(m.freed_by, cs.backward_of(0, 0, m.micro_batch));
    EXPECT_EQ(m.pinned_version, 0);
    const bool last = m.micro_batch == M - 1;
    EXPECT_EQ(m.built_by, last ? m.forward : -1) << "mb " << m.micro_batch;
    EXPECT_EQ(m.graph_version, last ? 0 : -1);
  }
  ASSERT_EQ(after_forwards.versions.size(), 1u);
  EXPECT_EQ(after_forwards.versions[0], (LiveVersion{0, 0, true, M, -1}));
  // After its recompute, micro-batch M - 2 has a graph built by the recompute.
  const int rec = cs.recompute_of(0, 0, M - 2);
  const LiveSet after_rec = expected_after(lv, 0, cs.ref(rec).index);
  const auto it = std::find_if(after_rec.micro_batches.begin(), after_rec.micro_batches.end(),
                               [&](const LiveMicroBatch& m) { return m.micro_batch == M - 2; });
  ASSERT_NE(it, after_rec.micro_batches.end());
  EXPECT_EQ(it->built_by, rec);
  EXPECT_EQ(it->graph_version, 0);
  // Graphs at once: M without checkpointing, 1 when every micro-batch is recomputed.
  EXPECT_EQ(most_graphs(Liveness(compile("gpipe", test::pipeline_shape(K, M))), 0, 0), M);
  const CompiledSchedule always =
      compile("gpipe", test::pipeline_shape(K, M, 1, 1, Checkpoint::kAlways));
  EXPECT_EQ(most_graphs(Liveness(always), 0, 0), 1);
}

TEST(Liveness, OneFOneBHoldsKMinusSGraphs) {
  const int K = 4, M = 8;
  const CompiledSchedule cs = compile("1f1b", test::pipeline_shape(K, M, 2));
  const Liveness lv(cs);
  for (int s = 0; s < K; ++s) EXPECT_EQ(most_graphs(lv, s, s), K - s) << "stage " << s;
  // Between mini-batches nothing is in flight and one version is alive.
  for (int d = 0; d < K; ++d) {
    const LiveSet end = expected_after(lv, d, last_index(cs, d, Op::kOptimizerStep, d));
    EXPECT_TRUE(end.micro_batches.empty());
    ASSERT_EQ(end.versions.size(), 1u);
    EXPECT_EQ(end.versions[0].version, 2);
    const LiveSet start = expected_after(lv, d, -1);
    EXPECT_TRUE(start.micro_batches.empty());
    EXPECT_EQ(start.versions, (std::vector<LiveVersion>{{d, 0, true, 0, -1}}));
  }
}

TEST(Liveness, PipeDreamStashesUntilTheLastBackwardOfAVersion) {
  // EPFL Section 2.4: device k stores K - k + 1 weight versions in steady state. A stashed
  // version is freed by the backward of the last micro-batch forwarded on it.
  const int K = 3, N = 4 * K;
  const CompiledSchedule cs = compile("pipedream", test::pipeline_shape(K, 1, N));
  const Liveness lv(cs);
  for (int s = 0; s < K; ++s) {
    LivenessCursor c(lv, s);
    int most = 0;
    while (!c.done()) {
      c.start();
      c.finish();
      most = std::max(most, c.versions_alive(s));
      for (const LiveVersion& v : c.live_set().versions) {
        if (v.current) continue;
        EXPECT_GT(v.pinned_by, 0);
        int last = -1;  // the last backward of a micro-batch forwarded on v
        for (int mb = 0; mb < N; ++mb) {
          if (cs.action(cs.forward_of(0, s, mb)).version == v.version)
            last = std::max(last, cs.backward_of(0, s, mb));
        }
        EXPECT_EQ(v.freed_by, last) << "stage " << s << " version " << v.version;
      }
    }
    EXPECT_EQ(most, K - s) << "stage " << s;
  }
}

TEST(Liveness, StashedRecomputeKeepsItsVersionFromTheForward) {
  // PipeDream with checkpointing recomputes on the stashed weights: the version must outlive the
  // steps between the forward and the recompute, so the steps that write beside the old version
  // are the same as without checkpointing.
  const int K = 3, N = 4 * K;
  const CompiledSchedule plain = compile("pipedream", test::pipeline_shape(K, 1, N));
  const CompiledSchedule ck =
      compile("pipedream", test::pipeline_shape(K, 1, N, 1, Checkpoint::kAlways));
  auto marks = [](const CompiledSchedule& cs) {
    std::vector<char> per_step;  // by (device, step) in list order
    const std::vector<char> m = steps_writing_new_version(cs);
    for (int id = 0; id < cs.num_actions(); ++id)
      if (cs.action(id).op == Op::kOptimizerStep) per_step.push_back(m[static_cast<size_t>(id)]);
    return per_step;
  };
  EXPECT_EQ(marks(plain), marks(ck));
  // Micro-batch K on stage 0: the stage steps between its forward and its recompute, which
  // reads the forward's version; the forward pins it and nothing else holds it at the step.
  const Liveness lv(ck);
  const int fwd = ck.forward_of(0, 0, K), rec = ck.recompute_of(0, 0, K);
  EXPECT_FALSE(lv.keeps_graph(fwd));
  EXPECT_EQ(ck.action(rec).version, ck.action(fwd).version);
  EXPECT_EQ(lv.pinned_after_forward(fwd), ck.action(fwd).version);
  LivenessCursor c(lv, 0);
  c.advance_through(ck.ref(rec).index - 1);
  EXPECT_GT(c.live_set().versions.back().version, ck.action(fwd).version);  // stepped since
  EXPECT_TRUE(c.pinned(0, ck.action(fwd).version));
}

TEST(Liveness, FreshRecomputesPinNothingUntilTheyRun) {
  // FTPipe: "recomputation implies that the gradients are computed on up-to-date parameters";
  // a checkpointed forward pins no version, so a stage never holds more than its current one.
  const int K = 3, N = 4 * K;
  const CompiledSchedule cs = compile("ftpipe-async", test::pipeline_shape(K, 2, N));
  const Liveness lv(cs);
  bool stale = false;  // some recompute reads a newer version than its forward
  for (int s = 0; s < K; ++s) {
    LivenessCursor c(lv, s);
    while (!c.done()) {
      c.start();
      c.finish();
      EXPECT_EQ(c.versions_alive(s), 1) << "stage " << s << " position " << c.position();
    }
    for (int mb = 0; mb < 2 * N; ++mb) {
      const int rec = cs.recompute_of(0, s, mb);
      if (rec < 0) continue;
      const int fwd = cs.forward_of(0, s, mb);
      if (cs.action(rec).version > cs.action(fwd).version) {
        stale = true;
        EXPECT_EQ(lv.pinned_after_forward(fwd), -1);
      }
    }
  }
  EXPECT_TRUE(stale);
}

TEST(Liveness, ReceivedTensorsAreHeldUntilTheirConsumer) {
  // GPipe: stage K - 1 runs its backwards after its last forward, so all M output gradients may
  // reach stage K - 2 before its first backward.
  const int K = 3, M = 4;
  const CompiledSchedule cs = compile("gpipe", test::pipeline_shape(K, M));
  const Liveness lv(cs);
  const int d = K - 2;
  const int first_backward = cs.ref(cs.backward_of(0, d, M - 1)).index;
  const LiveSet before = expected_after(lv, d, first_backward - 1);
  int grads = 0;
  for (const LiveReceive& r : before.received) {
    EXPECT_EQ(cs.action(r.recv).op, Op::kRecv);
    EXPECT_EQ(lv.consumer_of(r.recv), r.consumer);
    EXPECT_GT(cs.ref(r.consumer).index, first_backward - 1);  // not consumed yet
    if (cs.action(r.recv).payload == Payload::kGradient) ++grads;
  }
  EXPECT_EQ(grads, M);
  // The walk, replayed or incremental, says the same at every action; a consumed tensor is gone.
  for (int dev = 0; dev < K; ++dev) {
    LivenessCursor c(lv, dev);
    while (!c.done()) {
      const int id = c.next_id();
      for (const int32_t r : c.start()) EXPECT_EQ(lv.consumer_of(r), id);
      c.finish();
      const LiveSet now = c.live_set();
      EXPECT_EQ(now, expected_after(lv, dev, c.position()));
      for (const LiveReceive& r : now.received) EXPECT_NE(r.consumer, id);
    }
    EXPECT_TRUE(c.live_set().received.empty());
    EXPECT_TRUE(c.live_set().micro_batches.empty());
  }
}

}  // namespace
}  // namespace pipetwin
