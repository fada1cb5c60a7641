// exec/runtime/data.hpp: the batches a stage reads, with and without making the next one ahead.
#include "exec/runtime/data.hpp"

#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <gmock/gmock.h>

#include "models/layered_model.hpp"
#include "models/zoo.hpp"

namespace pipetwin {
namespace {

// Prefetch changes when a mini-batch is drawn, never what it holds: every micro-batch of every
// step equals the one drawn without it, read from several threads at once as stages do.
TEST(BatchSource, PrefetchGivesTheSameBatchesFromEveryThread) {
  const models::LayeredModel model = models::build_model("vit:test", at::kFloat, 3);
  const auto plain = exec::synthetic_batches(model, 8, 5, false);
  const auto ahead = exec::synthetic_batches(model, 8, 5, false);
  plain->configure(8, 1, 4);
  ahead->configure(8, 1, 4);
  ahead->set_prefetch(true);
  std::vector<std::thread> readers;
  std::vector<int> same(4, 0);
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      for (int step = 0; step < 6; ++step) {
        const int micro = (step + t) % 4;
        same[static_cast<size_t>(t)] +=
            at::equal(ahead->input(step, 0, micro), plain->input(step, 0, micro)) &&
            at::equal(ahead->target(step, 0, micro), plain->target(step, 0, micro));
      }
    });
  }
  for (auto& r : readers) r.join();
  EXPECT_THAT(same, ::testing::Each(6));
  // Distinct steps are distinct data (the check above compares something).
  EXPECT_FALSE(at::equal(ahead->input(0, 0, 0), ahead->input(1, 0, 0)));
}

}  // namespace
}  // namespace pipetwin
