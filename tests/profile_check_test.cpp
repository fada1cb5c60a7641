// Profile check (profiles/profile_check.hpp): the disturbed measurement seen on this VM is found,
// by both rules, and nothing in the profiles shipped under traces/ is.
#include "profiles/profile_check.hpp"

#include <gtest/gtest.h>

#include <string>

namespace pipetwin {
namespace {

// One layer timed at sizes 1, 2, 4, 8 with backward times `bwd` (ms) and forward 0.1 ms per
// sample.
Profile one_layer(const std::vector<double>& bwd_ms) {
  Profile p;
  p.layers.resize(1);
  p.layers[0].name = "embed";
  const int sizes[] = {1, 2, 4, 8};
  for (size_t i = 0; i < bwd_ms.size(); ++i) {
    p.layers[0].timings.push_back({sizes[i], 1e-4 * sizes[i], bwd_ms[i] * 1e-3, 1e-4 * sizes[i]});
  }
  return p;
}

// bert:tiny's embedding on 2026-11-23: 49.39 ms at b = 2 between 1.42 ms and 1.80 ms. The point
// is too slow for its larger neighbour (rule 1) and too dear per sample for its smaller one
// (rule 2); only b = 2 is to be measured again.
TEST(ProfileCheck, FindsTheStalledMeasurement) {
  const Profile p = one_layer({1.424, 49.39, 1.798, 1.813});
  const auto d = disturbed_timings(p);
  ASSERT_EQ(d.size(), 2u);
  for (const auto& x : d) {
    EXPECT_EQ(x.micro_batch, 2);
    EXPECT_EQ(x.layer, 0);
    EXPECT_EQ(std::string(x.pass), "backward");
    EXPECT_DOUBLE_EQ(x.seconds, 49.39e-3);
  }
  EXPECT_DOUBLE_EQ(d[0].expected_s, 2 * 1.424e-3 * 2);  // per sample at most twice b = 1's
  EXPECT_DOUBLE_EQ(d[1].expected_s, 2 * 1.798e-3);      // at most twice b = 4's time
  EXPECT_EQ(disturbed_sizes(p), std::vector<int>{2});
}

TEST(ProfileCheck, ASlowLargestSizeAndASlowSmallestSize) {
  EXPECT_EQ(disturbed_sizes(one_layer({1.4, 1.5, 1.8, 30.0})), std::vector<int>{8});
  EXPECT_EQ(disturbed_sizes(one_layer({30.0, 1.5, 1.8, 2.0})), std::vector<int>{1});
  // Linear growth, and the sub-linear growth of a layer with a fixed cost, are what layers do.
  EXPECT_TRUE(disturbed_sizes(one_layer({1.0, 2.0, 4.0, 8.0})).empty());
  EXPECT_TRUE(disturbed_sizes(one_layer({1.4, 1.5, 1.7, 2.1})).empty());
}

TEST(ProfileCheck, MicrosecondJitterIsNotADisturbance) {
  // 4x its larger neighbour, but by 100 us over the bound: below the 200 us floor.
  EXPECT_TRUE(disturbed_sizes(one_layer({0.03, 0.2, 0.05, 0.06})).empty());
  EXPECT_EQ(disturbed_sizes(one_layer({0.03, 0.2, 0.05, 0.06}), 2.0, 1e-6), std::vector<int>{2});
}

TEST(ProfileCheck, TheShippedProfilesAreClean) {
  for (const char* name : {"bert-tiny", "gpt2-tiny", "mlp", "resnet20", "vit-tiny"}) {
    const Profile p = load_profile(std::string(PIPETWIN_SOURCE_DIR) + "/traces/cpu-core/" + name +
                                   ".profile.json");
    const auto d = disturbed_timings(p);
    EXPECT_TRUE(d.empty()) << name << ": layer " << d.front().layer << " " << d.front().pass
                           << " at b=" << d.front().micro_batch << ": " << d.front().seconds;
  }
}

}  // namespace
}  // namespace pipetwin
