// Shared by the live elastic suites (exec_elastic_test.cpp, exec_elastic_faults_test.cpp): the
// plan they start from, the freeze options of their command lines, and a fixture that reads a
// checkpoint's tensors and compares two of them bit for bit.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "exec/train/checkpoint.hpp"
#include "exec/train/elastic_policy.hpp"
#include "exec/train/trainer.hpp"
#include "exec_test_util.hpp"

namespace pipetwin::testing {

// Four transformer blocks on K = 2 stages, 2 micro-batches of 2.
inline const ExecSpec kDepth4TwoStages{
    .model = "vit:test,depth=4", .stages = 2, .chunks = 2, .micro_batch = 2};

// The command lines' "--alpha 0.75 --freeze-interval 2step --freeze-rule bound": Equation 3's
// bound alone (no gradient norms), looked at every 2 steps.
inline exec::ElasticOptions bound_every_two_steps() {
  return {
      .alpha = 0.75, .unit = elastic::FreezeUnit::kStep, .interval = 2, .gradient_norms = false};
}

class Elastic : public test::TempDirTest {
 protected:
  // float64 synthetic data, SGD with momentum (its buffers must move too).
  exec::TrainOptions options(int steps_per_epoch, int epochs) const {
    return synthetic_train_options(steps_per_epoch, epochs, dir_ / "log.jsonl");
  }
  // (name, role) -> tensor of every stage of every rank file of the checkpoint in `dir`.
  static std::map<std::pair<std::string, std::string>, std::vector<at::Tensor>> checkpoint_state(
      const std::string& dir, int64_t step) {
    std::map<std::pair<std::string, std::string>, std::vector<at::Tensor>> out;
    const auto m = exec::read_manifest(dir);
    EXPECT_TRUE(m.has_value()) << dir;
    if (!m) return out;
    EXPECT_EQ(m->step, step);
    for (int r = 0; r < m->world; ++r) {
      for (const auto& st : exec::read_rank_file(dir, *m, r).stages) {
        for (const auto& t : st.tensors) out[{t.name, t.role}].push_back(t.value);
      }
    }
    return out;
  }
  // Every tensor of `after` (any number of copies) equals, bit for bit, the one of `before`.
  static void expect_same_state(
      const std::map<std::pair<std::string, std::string>, std::vector<at::Tensor>>& before,
      const std::map<std::pair<std::string, std::string>, std::vector<at::Tensor>>& after,
      size_t copies) {
    ASSERT_EQ(after.size(), before.size());
    int momentum = 0;
    for (const auto& [key, tensors] : after) {
      ASSERT_TRUE(before.count(key)) << key.first << " " << key.second;
      ASSERT_EQ(before.at(key).size(), 1u);
      EXPECT_EQ(tensors.size(), copies) << key.first;
      for (const auto& t : tensors) {
        EXPECT_TRUE(at::equal(t, before.at(key)[0])) << key.first << " " << key.second;
      }
      momentum += key.second == "momentum";
    }
    EXPECT_GT(momentum, 0);  // the optimizer state was there to move
  }
};

}  // namespace pipetwin::testing
