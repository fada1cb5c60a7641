// Sweeps over tensor parallelism (studies/sweep/grid.hpp knobs tp, sequence_parallel,
// distributed_optimizer): each point's shard, its refusals as the row's error, its memory.
#include <gtest/gtest.h>

#include "studies/sweep/grid.hpp"
#include "studies/sweep/results.hpp"
#include "studies/sweep/runner.hpp"
#include "sim_test_util.hpp"
#include "sweep_test_util.hpp"
#include "test_util.hpp"

namespace pipetwin::sim {
namespace {

// Tensor parallelism and the distributed optimizer are knobs: bert:large on the DGX H100 with
// t = 1, 2, 3, 4, K = 2, dp = 2; t = 3 cannot split 16 heads, t = 4 the vocabulary (the rows'
// errors), and sequence parallelism without t > 1 is refused per point.
TEST(Sweep, TensorParallelKnobs) {
  TempDir dir;
  SweepInputs in;
  in.base.model = "bert:large";
  in.base.cluster = "dgx-h100";
  in.base.stages = 2;
  in.base.dp = 2;
  in.base.chunks = 4;
  in.base.batch = 32;
  in.base.dtype = "bfloat16";
  in.base.optimizer = "adam";
  const Sweep sweep(
      Grid::parse("tp=1,2,3,4;sequence_parallel=no,yes;distributed_optimizer=no,yes"), in);
  RunOptions o;
  o.output = dir.file("s.csv");
  ASSERT_TRUE(run_sweep(sweep, o).complete);
  const SweepTable t = load_sweep(o.output);
  ASSERT_EQ(t.rows.size(), 16u);
  const auto num = [&](size_t r, const char* c) { return std::stod(field(t, r, c)); };
  // Rows (tp, sp, zero): 0 (1,no,no) 1 (1,no,yes) 2-3 (1,yes,*) 4 (2,no,no) ... 12 (4,no,no).
  EXPECT_EQ(field(t, 4, "tp"), "2");
  EXPECT_EQ(field(t, 4, "plan_devices"), "8");  // 2 stages x dp 2 x t 2
  EXPECT_NE(field(t, 2, "error").find("sequence parallelism needs tensor parallelism"),
            std::string::npos);
  EXPECT_NE(field(t, 8, "error").find("16 attention heads"), std::string::npos);
  EXPECT_LT(num(4, "peak_memory_max_bytes"), num(0, "peak_memory_max_bytes"));
  EXPECT_LT(num(6, "peak_memory_max_bytes"), num(4, "peak_memory_max_bytes"));  // + sequence par.
  EXPECT_LT(num(1, "peak_memory_max_bytes"), num(0, "peak_memory_max_bytes"));  // ZeRO-1
  // BERT's 30,522 word rows split 2 ways, not 4 (bert:large,vocab=30528 would).
  EXPECT_NE(field(t, 12, "error").find("30522 vocabulary rows"), std::string::npos);
}

}  // namespace
}  // namespace pipetwin::sim
