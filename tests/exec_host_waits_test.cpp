// The executor's host never waits for the device per action (exec/runtime/worker.hpp): hand-overs
// between lanes are ordered on the device, the times are read once a lane's work is done, and the
// loss stays on the device until then. Counted through the Device's host-wait hook
// (exec/platform/device.hpp), which the CPU device counts as a GPU's would: per step the count
// grows by one wait per optimizer step (the host stays within a step of the device) and one loss
// read per last stage, not with the number of actions.
#include <gtest/gtest.h>

#include <set>

#include "exec/platform/device.hpp"
#include "exec_test_util.hpp"

namespace pipetwin {
namespace {

using testing::exec_plan;
using testing::ExecSpec;
using testing::float64_options;

struct Counted {
  int64_t waits = 0;
  size_t actions = 0;
  size_t lanes = 0;  // (device, stream) pairs that ran actions
};

Counted run_counted(const Plan& plan, int steps) {
  exec::ExecOptions o = float64_options(steps);
  const int64_t before = exec::Device::host_waits();
  const exec::ExecResult r = exec::execute_plan(plan, o);
  Counted c;
  c.waits = exec::Device::host_waits() - before;
  c.actions = r.timeline.events.size();
  std::set<std::pair<int, int>> lanes;
  for (const auto& e : r.timeline.events)
    lanes.insert({e.device, static_cast<int>(stream_of(e.action.op))});
  c.lanes = lanes.size();
  return c;
}

class ExecHostWaits : public ::testing::TestWithParam<ExecSpec> {};

TEST_P(ExecHostWaits, OnePerLaneAndOneLossReadPerStepNotOnePerAction) {
  const Plan plan = exec_plan(GetParam());
  const int last_stages = plan.dp;  // one pipeline per replica, each with one last stage
  const int per_step = plan.num_stages() * plan.dp + last_stages;  // steps' waits, loss reads
  const Counted two = run_counted(plan, 2), four = run_counted(plan, 4);
  ASSERT_GT(four.actions, two.actions);
  // Two more steps: two more of each step's waits, however many actions they took.
  EXPECT_LE(four.waits - two.waits, 2 * per_step)
      << (four.actions - two.actions) << " more actions";
  EXPECT_LT(2 * per_step, static_cast<int64_t>(four.actions - two.actions) / 2);
  // A run: each lane waits once at its end, each device once after its warm-up, and the steps.
  const int64_t devices = plan.devices_per_replica() * plan.dp;
  EXPECT_LE(four.waits, static_cast<int64_t>(four.lanes) + devices + 4 * per_step)
      << four.actions << " actions";
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, ExecHostWaits,
    ::testing::Values(ExecSpec{.schedule = "1f1b", .stages = 3, .chunks = 4},
                      ExecSpec{.model = "vit:test,dropout=0.2",
                               .schedule = "gpipe",
                               .stages = 2,
                               .chunks = 4,
                               .checkpoint = Checkpoint::kExceptLast},
                      // Data parallelism: the all-reduce lanes.
                      ExecSpec{.schedule = "gpipe", .stages = 2, .chunks = 2, .dp = 2}));

// The hook counts what waits: a lane's synchronize, a wait for a mark, seconds() (which waits for
// its later mark) and reading a device value; marks, lane-to-lane waits and hand-overs do not.
TEST(DeviceHostWaits, CountsWaitingCallsOnly) {
  const auto device = exec::make_device("cpu", 0);
  const int64_t before = exec::Device::host_waits();
  const auto a = device->mark();
  const auto b = device->mark();
  device->wait_for(*a);
  device->hand_over(at::ones({2}));
  (void)device->elapsed(*a, *b);
  EXPECT_EQ(exec::Device::host_waits(), before);
  device->synchronize();
  device->wait(*b);
  (void)device->seconds(*a, *b);
  EXPECT_EQ(device->read(at::full({}, 2.5)), 2.5);
  EXPECT_EQ(exec::Device::host_waits(), before + 4);
}

}  // namespace
}  // namespace pipetwin
