// profiles/synthetic.hpp and profiles/model_spec.hpp: the `uniform:...` model in both of its forms, its
// exact times t(b) = overhead + per-sample * b, its documented defaults and its errors.
#include "profiles/synthetic.hpp"

#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "core/linear_fit.hpp"
#include "profiles/model_spec.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

using test::input_error;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr double kKiB = 1024;
constexpr double kTol = 1e-15;

Profile make(const std::string& text) {
  return synthetic_profile(ModelSpec::parse(text, "--model"));
}

std::string error_of(const std::string& text) {
  return input_error([&] { make(text); });
}

TEST(ModelSpec, ParsesFamilyPresetsAndOptions) {
  const ModelSpec s = ModelSpec::parse("bert:tiny,layers=4,hidden=64", "--model");
  EXPECT_EQ(s.family, "bert");
  EXPECT_THAT(s.presets, ElementsAre("tiny"));
  EXPECT_THAT(s.args, UnorderedElementsAre(Pair("layers", "4"), Pair("hidden", "64")));
  EXPECT_EQ(s.origin, "--model");
  EXPECT_TRUE(s.has("layers"));
  EXPECT_FALSE(s.has("tiny"));
  EXPECT_EQ(s.integer("layers", 1), 4);
  EXPECT_EQ(s.number("hidden", 0), 64);
  EXPECT_EQ(s.number("absent", 2.5), 2.5);
  EXPECT_EQ(s.integer("absent", 7), 7);
}

TEST(ModelSpec, FamilyAloneAndEmptyItems) {
  const ModelSpec bare = ModelSpec::parse("uniform", "x");
  EXPECT_EQ(bare.family, "uniform");
  EXPECT_TRUE(bare.presets.empty());
  EXPECT_TRUE(bare.args.empty());
  const ModelSpec sparse = ModelSpec::parse("uniform:,layers=2,", "x");
  EXPECT_TRUE(sparse.presets.empty());
  EXPECT_THAT(sparse.args, ElementsAre(Pair("layers", "2")));
}

TEST(ModelSpec, ToStringParsesBackToTheSameSpec) {
  const ModelSpec s = ModelSpec::parse("vit:tiny,patch=4,depth=2", "x");
  const ModelSpec again = ModelSpec::parse(s.to_string(), "x");
  EXPECT_EQ(again.family, s.family);
  EXPECT_EQ(again.presets, s.presets);
  EXPECT_EQ(again.args, s.args);
  EXPECT_EQ(ModelSpec::parse("mlp", "x").to_string(), "mlp");
}

TEST(ModelSpec, NumberLists) {
  const ModelSpec s = ModelSpec::parse("uniform:fwd_ms=1/2.5/3e-1,act_kb=8", "x");
  EXPECT_THAT(s.numbers("fwd_ms"), ElementsAre(1, 2.5, 0.3));
  EXPECT_THAT(s.numbers("act_kb"), ElementsAre(8));
  EXPECT_TRUE(s.numbers("absent").empty());
}

TEST(ModelSpec, Errors) {
  EXPECT_EQ(input_error([] { ModelSpec::parse(":layers=2", "--model"); }),
            "--model: model name \":layers=2\" has no family before ':'");
  EXPECT_EQ(input_error([] { ModelSpec::parse("uniform:layers=2,layers=3", "--model"); }),
            "--model: model option \"layers\" given twice");
  EXPECT_EQ(input_error([] { ModelSpec::parse("uniform:=3", "--model"); }),
            "--model: empty key in \"=3\"");
  const ModelSpec s = ModelSpec::parse("uniform:layers=abc,depth=2.5,fwd_ms=1//2,x=", "plan.json");
  EXPECT_EQ(input_error([&] { s.number("layers", 0); }),
            "plan.json: model option layers: expected a number, got \"abc\"");
  EXPECT_EQ(input_error([&] { s.integer("depth", 0); }),
            "plan.json: model option depth: expected an integer, got \"2.5\"");
  EXPECT_EQ(input_error([&] { s.numbers("fwd_ms"); }),
            "plan.json: model option fwd_ms: expected a number or a '/'-separated list of "
            "numbers, got \"1//2\"");
  EXPECT_THAT(input_error([&] { s.number("x", 0); }), HasSubstr("expected a number, got \"\""));
  EXPECT_EQ(input_error([&] {
              s.allow_only({"layers", "depth", "fwd_ms"});
            }),
            "plan.json: unknown option \"x\" for model uniform (known: layers, depth, fwd_ms)");
}

TEST(Synthetic, RecognisesOnlyTheUniformFamily) {
  EXPECT_TRUE(is_synthetic_model(ModelSpec::parse("uniform:layers=2", "x")));
  EXPECT_FALSE(is_synthetic_model(ModelSpec::parse("vit:tiny", "x")));
  EXPECT_EQ(error_of("vit:tiny"), "--model: \"vit\" is not a synthetic model");
}

TEST(Synthetic, ScalarFormGivesIdenticalLayers) {
  const Profile p = make("uniform:layers=3,fwd_ms=2,bwd_ms=5,act_kb=4,param_kb=8");
  ASSERT_EQ(p.num_layers(), 3);
  EXPECT_EQ(p.source, "synthetic");
  EXPECT_EQ(p.device, "synthetic");
  EXPECT_EQ(p.input_bytes_per_sample, 4 * kKiB);
  EXPECT_TRUE(p.edges.empty());
  for (int i = 0; i < 3; ++i) {
    const auto& l = p.layers[static_cast<size_t>(i)];
    EXPECT_EQ(l.name, "layer" + std::to_string(i));
    EXPECT_EQ(l.output_bytes_per_sample, 4 * kKiB);
    EXPECT_EQ(l.saved_bytes_per_sample, 4 * kKiB);
    EXPECT_EQ(l.param_bytes, 8 * kKiB);
    ASSERT_FALSE(l.timings.empty());
    for (const auto& t : l.timings) {
      EXPECT_NEAR(t.forward_s, 2e-3 * t.micro_batch, kTol);
      EXPECT_NEAR(t.backward_s, 5e-3 * t.micro_batch, kTol);
      EXPECT_NEAR(t.recompute_s, 2e-3 * t.micro_batch, kTol);
    }
  }
}

TEST(Synthetic, TimesAreOverheadPlusPerSampleTimesBatch) {
  const Profile p = make("uniform:layers=2,fwd_ms=1.5,bwd_ms=4,recompute_ms=2,overhead_ms=0.5");
  for (const auto& l : p.layers) {
    std::vector<double> b, f;
    for (const auto& t : l.timings) {
      const double mb = t.micro_batch;
      EXPECT_NEAR(t.forward_s, (0.5 + 1.5 * mb) * 1e-3, kTol);
      EXPECT_NEAR(t.backward_s, (0.5 + 4 * mb) * 1e-3, kTol);
      EXPECT_NEAR(t.recompute_s, (0.5 + 2 * mb) * 1e-3, kTol);
      b.push_back(mb);
      f.push_back(t.forward_s);
    }
    ASSERT_GE(b.size(), 2u) << "needs two sizes to pin down the overhead";
    // The profile is exactly linear: the cost model's fit recovers the two numbers.
    const LinearFit fit = fit_linear(b, f);
    EXPECT_NEAR(fit.a, 0.5e-3, 1e-15);
    EXPECT_NEAR(fit.c, 1.5e-3, 1e-15);
  }
}

TEST(Synthetic, DefaultsAsDocumented) {
  const Profile p = make("uniform");
  ASSERT_EQ(p.num_layers(), 4);
  EXPECT_EQ(p.input_bytes_per_sample, 0);
  for (const auto& l : p.layers) {
    for (const auto& t : l.timings) {
      EXPECT_NEAR(t.forward_s, 1e-3 * t.micro_batch, kTol);   // fwd_ms 1
      EXPECT_NEAR(t.backward_s, 2e-3 * t.micro_batch, kTol);  // bwd_ms 2 * fwd_ms
      EXPECT_NEAR(t.recompute_s, t.forward_s, kTol);          // recompute_ms = fwd_ms
    }
    EXPECT_EQ(l.output_bytes_per_sample, 0);
    EXPECT_EQ(l.saved_bytes_per_sample, 0);
    EXPECT_EQ(l.param_bytes, 0);
    EXPECT_EQ(l.optimizer_bytes, 0);
    EXPECT_EQ(l.optimizer_step_s, 0);
  }
  // Derived defaults follow the options they depend on.
  const Profile q = make("uniform:layers=1,fwd_ms=3,act_kb=2");
  for (const auto& t : q.layers[0].timings) {
    EXPECT_NEAR(t.backward_s, 6e-3 * t.micro_batch, kTol);
    EXPECT_NEAR(t.recompute_s, 3e-3 * t.micro_batch, kTol);
  }
  EXPECT_EQ(q.layers[0].saved_bytes_per_sample, 2 * kKiB);
  EXPECT_EQ(q.input_bytes_per_sample, 2 * kKiB);
}

TEST(Synthetic, AllOptionsScalar) {
  const Profile p = make(
      "uniform:layers=2,act_kb=1,saved_kb=3,input_kb=5,param_kb=7,optimizer_kb=14,opt_ms=0.25");
  EXPECT_EQ(p.input_bytes_per_sample, 5 * kKiB);
  for (const auto& l : p.layers) {
    EXPECT_EQ(l.output_bytes_per_sample, 1 * kKiB);
    EXPECT_EQ(l.saved_bytes_per_sample, 3 * kKiB);
    EXPECT_EQ(l.param_bytes, 7 * kKiB);
    EXPECT_EQ(l.optimizer_bytes, 14 * kKiB);
    EXPECT_NEAR(l.optimizer_step_s, 0.25e-3, kTol);
    EXPECT_EQ(l.optimizer_new_version_s, 0) << "not given: the in-place time stands for both";
  }
  for (const auto& l : make("uniform:layers=2,opt_ms=0.25,opt_new_ms=0.5").layers)
    EXPECT_NEAR(l.optimizer_new_version_s, 0.5e-3, kTol);
}

TEST(Synthetic, ListFormGivesOneValuePerLayer) {
  const Profile p = make("uniform:fwd_ms=1/2/3/4,bwd_ms=2/4/6/8,act_kb=8/4/2/1,param_kb=10");
  ASSERT_EQ(p.num_layers(), 4);                   // the list length sets the layer count
  EXPECT_EQ(p.input_bytes_per_sample, 8 * kKiB);  // act_kb of the first layer
  for (int i = 0; i < 4; ++i) {
    const auto& l = p.layers[static_cast<size_t>(i)];
    for (const auto& t : l.timings) {
      EXPECT_NEAR(t.forward_s, (i + 1) * 1e-3 * t.micro_batch, kTol);
      EXPECT_NEAR(t.backward_s, 2 * (i + 1) * 1e-3 * t.micro_batch, kTol);
    }
    EXPECT_EQ(l.output_bytes_per_sample, (8 >> i) * kKiB);
    EXPECT_EQ(l.param_bytes, 10 * kKiB);  // a single value is broadcast
  }
}

TEST(Synthetic, ListFormDefaultsArePerLayer) {
  // bwd_ms defaults to 2 * fwd_ms of the same layer, recompute to its fwd_ms.
  const Profile p = make("uniform:layers=3,fwd_ms=1/5/2");
  const std::vector<double> fwd = {1, 5, 2};
  for (size_t i = 0; i < 3; ++i) {
    const auto& t = p.layers[i].timings.front();
    EXPECT_NEAR(t.backward_s, 2 * fwd[i] * 1e-3 * t.micro_batch, kTol);
    EXPECT_NEAR(t.recompute_s, fwd[i] * 1e-3 * t.micro_batch, kTol);
  }
}

TEST(Synthetic, ProfileNamesTheModel) {
  const Profile p = make("uniform:layers=2,fwd_ms=3");
  const ModelSpec back = ModelSpec::parse(p.model, "x");
  EXPECT_EQ(back.family, "uniform");
  EXPECT_EQ(back.args.at("layers"), "2");
  EXPECT_EQ(back.args.at("fwd_ms"), "3");
  EXPECT_EQ(synthetic_profile(ModelSpec::parse("uniform", "x"), "h100-sxm").device, "h100-sxm");
}

TEST(SyntheticErrors, UnknownKey) {
  EXPECT_THAT(error_of("uniform:layers=2,flops=3"),
              ::testing::StartsWith("--model: unknown option \"flops\" for model uniform (known: "
                                    "layers, fwd_ms, bwd_ms, "));
}

TEST(SyntheticErrors, NegativeValues) {
  EXPECT_EQ(error_of("uniform:fwd_ms=-1"),
            "--model: model option fwd_ms must not be negative (-1 given)");
  EXPECT_EQ(error_of("uniform:act_kb=4/-2/1"),
            "--model: model option act_kb must not be negative (-2 given)");
  EXPECT_EQ(error_of("uniform:layers=0"),
            "--model: model option layers must be in [1, 100000] (0 given)");
  EXPECT_EQ(error_of("uniform:layers=-3"),
            "--model: model option layers must be in [1, 100000] (-3 given)");
  // Found by fuzzing: a huge layer count asked for terabytes before failing.
  EXPECT_EQ(error_of("uniform:layers=244444444444441"),
            "--model: model option layers must be in [1, 100000] (244444444444441 given)");
}

TEST(SyntheticErrors, ListLengthMismatch) {
  EXPECT_EQ(error_of("uniform:layers=3,fwd_ms=1/2"),
            "--model: model option fwd_ms has 2 values for 3 layers");
  // Two lists of different lengths cannot both be right.
  EXPECT_THAT(error_of("uniform:fwd_ms=1/2/3,bwd_ms=1/2"),
              HasSubstr("model option bwd_ms has 2 values for 3 layers"));
}

TEST(SyntheticErrors, MalformedValuesAndPresets) {
  EXPECT_EQ(error_of("uniform:layers=2.5"),
            "--model: model option layers: expected an integer, got \"2.5\"");
  EXPECT_THAT(error_of("uniform:fwd_ms=fast"),
              HasSubstr("model option fwd_ms: expected a number or a '/'-separated list"));
  EXPECT_EQ(error_of("uniform:big,layers=2"),
            "--model: synthetic model takes key=value options only, got \"big\"");
}

}  // namespace
}  // namespace pipetwin
