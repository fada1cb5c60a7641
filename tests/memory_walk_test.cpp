// The memory walk itself (core/memory_walk.hpp), through a tally that checks its steps against the
// liveness cursor they follow, for every schedule and checkpoint mode on a few shapes: after every
// action the inputs the walk keeps on a device are the micro-batches the cursor has in flight and
// the graphs it keeps per stage are the cursor's; every compute action is observed while it runs,
// with the pass of its kind, and after it; a received tensor is held once and taken over once.
// The two tallies of the walk (bytes in core/memory.cpp, counts in core/partition/range_terms.cpp)
// are held equal by tests/partition_memory_test.cpp.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/memory_walk.hpp"
#include "core/schedule/generators.hpp"
#include "sim_test_util.hpp"

namespace pipetwin {
namespace {

class CheckingTally {
 public:
  CheckingTally(const Liveness& lv, int device, std::string name)
      : lv_(lv), device_(device), name_(std::move(name)) {
    const auto& sh = lv.schedule().shape();
    stages_ = sh.stages_on(device % sh.devices_per_replica);
  }

  void received(std::span<const int32_t> recvs, int sign) {
    for (const int32_t id : recvs) {
      if (sign > 0) {
        EXPECT_TRUE(held_.insert(id).second) << where() << ": recv " << id << " held twice";
        EXPECT_TRUE(ever_.insert(id).second) << where() << ": recv " << id << " arrived twice";
      } else {
        EXPECT_EQ(held_.erase(id), 1u) << where() << ": recv " << id << " taken, not held";
      }
    }
  }
  void keep_input(int) { ++inputs_; }
  void keep_graph(int stage) { ++graphs_[stage]; }
  void release(int stage) {
    --inputs_;
    --graphs_[stage];
  }
  void during(const LivenessCursor&, int id, WalkPass pass, int stage) {
    const Action& a = lv_.schedule().action(id);
    EXPECT_EQ(stage, a.stage) << where();
    WalkPass want = WalkPass::kBackward;
    if (a.op == Op::kForward) {
      want = lv_.keeps_graph(id) ? WalkPass::kForward : WalkPass::kForwardNoGrad;
    } else if (a.op == Op::kRecompute) {
      want = WalkPass::kForward;
    }
    EXPECT_EQ(pass, want) << where() << ": action " << id;
    ++during_;
  }
  void after_compute(const LivenessCursor& cursor, int id) {
    EXPECT_EQ(stream_of(lv_.schedule().action(id).op), StreamKind::kCompute);
    ++compute_;
    check(cursor);
  }
  void after_transfer(const LivenessCursor& cursor, int id) {
    EXPECT_NE(stream_of(lv_.schedule().action(id).op), StreamKind::kCompute);
    check(cursor);
  }

  void check_end() const {
    EXPECT_TRUE(held_.empty()) << where() << ": " << held_.size() << " received tensors never used";
    EXPECT_EQ(ever_.size(), lv_.arrivals(device_).size()) << where();
    int computes = 0, passes = 0;
    for (int id = 0; id < lv_.schedule().num_actions(); ++id) {
      if (lv_.schedule().device(id) != device_) continue;
      const Op op = lv_.schedule().action(id).op;
      computes += stream_of(op) == StreamKind::kCompute;
      passes += op == Op::kForward || op == Op::kRecompute || op == Op::kBackward ||
                op == Op::kBackwardInput || op == Op::kBackwardWeight;
    }
    EXPECT_EQ(compute_, computes) << where();
    EXPECT_EQ(during_, passes) << where();
  }

 private:
  std::string where() const { return name_ + " device " + std::to_string(device_); }
  void check(const LivenessCursor& cursor) {
    EXPECT_EQ(inputs_, cursor.in_flight()) << where() << " after position " << cursor.position();
    for (const int s : stages_) {
      EXPECT_EQ(graphs_[s], cursor.graphs(s))
          << where() << " stage " << s << " after position " << cursor.position();
    }
  }

  const Liveness& lv_;
  int device_;
  std::string name_;
  std::vector<int> stages_;
  int inputs_ = 0;
  std::map<int, int> graphs_;
  std::set<int32_t> held_, ever_;
  int during_ = 0, compute_ = 0;
};

TEST(MemoryWalk, FollowsTheLivenessCursorForEverySchedule) {
  int checked = 0;
  for (const auto& info : schedule_catalog()) {
    for (Checkpoint ck : {Checkpoint::kNone, Checkpoint::kExceptLast, Checkpoint::kAlways}) {
      for (const auto& [K, M] : std::vector<std::pair<int, int>>{{2, 2}, {2, 4}, {3, 6}, {4, 8}}) {
        testing::PlanSpec s;
        s.schedule = info.name;
        s.stages = K;
        s.chunks = M;
        s.checkpoint = ck;
        try {
          const PlanContext ctx(testing::synthetic_plan(s), 2);
          const CompiledSchedule cs(make_schedule(info.name, ctx.shape), info.name);
          const Liveness lv(cs);
          for (int d = 0; d < cs.num_devices(); ++d) {
            CheckingTally tally(
                lv, d, fmt::format("{} ck={} K={} M={}", info.name, checkpoint_name(ck), K, M));
            walk_device(lv, d, tally);
            tally.check_end();
          }
          ++checked;
        } catch (const InputError&) {
          continue;  // a schedule that does not take this shape or checkpoint mode
        }
      }
    }
  }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace pipetwin
