// AsyncChain (core/partition/async_chain.hpp): PipeDream's asynchronous 1F1B on a chain, against
// closed forms — the slowest stage's step with free transfers, a round trip over the K micro-batches
// in flight, a receive stream's two transfers per micro-batch when the links are slower than the
// compute, and the step's overhead once per M.
#include <gtest/gtest.h>

#include "core/partition/async_chain.hpp"

namespace pipetwin {
namespace {

ChainTimes chain(std::vector<double> f, std::vector<double> b, double hop, int M = 4) {
  ChainTimes c;
  c.forward = std::move(f);
  c.backward = std::move(b);
  c.step.assign(c.forward.size(), 0.0);
  c.hop.assign(c.forward.size() - 1, hop);
  c.micro_batches = M;
  return c;
}

TEST(AsyncChain, OneStageIsItsForwardAndBackward) {
  EXPECT_NEAR(chain_period_s(chain({1.0}, {2.0}, 0)), 3.0, 1e-12);
}

TEST(AsyncChain, NoBubbleTheSlowestStageSetsThePeriod) {
  EXPECT_NEAR(chain_period_s(chain({1, 1, 1}, {2, 2, 2}, 0)), 3.0, 1e-12);
  EXPECT_NEAR(chain_period_s(chain({1, 2, 1}, {2, 3, 2}, 0)), 5.0, 1e-12);
}

// Stage 0 keeps K micro-batches in flight (core/schedule/async_order.hpp), so a micro-batch's
// round trip — every stage's forward and backward and 2 (K - 1) hops — is spread over K of them:
// the period is at least round trip / K, here (3 x 3 + 4 x 1) / 3.
TEST(AsyncChain, KInFlightCoverTheRoundTrip) {
  EXPECT_NEAR(chain_period_s(chain({1, 1, 1}, {2, 2, 2}, 1.0)), 13.0 / 3, 1e-9);
  EXPECT_NEAR(chain_period_s(chain({1, 1}, {2, 2}, 0.5)), 7.0 / 2, 1e-9);
}

// A middle device receives an activation and a gradient per micro-batch on its one receive
// stream: 2 x hop when that exceeds the compute.
TEST(AsyncChain, SlowLinksMakeTheReceiveStreamTheBottleneck) {
  EXPECT_NEAR(chain_period_s(chain({1, 1, 1}, {2, 2, 2}, 5.0)), 10.0, 1e-9);
}

// The step's all-reduce tail and optimizer step come once per M backwards.
TEST(AsyncChain, TheStepOverheadIsSharedByTheMicroBatchesOfAStep) {
  ChainTimes c = chain({1, 1}, {2, 2}, 0, 4);
  c.step = {0.0, 2.0};
  EXPECT_NEAR(chain_period_s(c), 3.0 + 2.0 / 4, 1e-12);
}

}  // namespace
}  // namespace pipetwin
