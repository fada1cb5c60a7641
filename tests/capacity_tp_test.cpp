// Capacity planning with tensor parallelism (studies/capacity.hpp, CapacityRequest::tp_sizes): a
// model whose MLP layer cannot fit one GPU at any pipeline length is planned on tensor-parallel
// groups, its cost counts every GPU of the groups, and without the tensor-parallel sizes the
// search says it does not fit.
#include <gtest/gtest.h>

#include "studies/capacity.hpp"

namespace pipetwin::sim {
namespace {

// One GPT block of hidden 32,768 (256 heads, MLP 131,072): the MLP sub-layer holds 8.6 G
// parameters, 137 GB in bfloat16 with Adam (16 bytes each), more than an H100's 80 GB; split two
// ways or more it fits.
const char* kWide = "gpt2:tiny,layers=1,dim=32768,heads=256,seq=64,ctx=64";

CapacityRequest request(const Catalog& catalog, std::vector<int> tp_sizes) {
  CapacityRequest r;
  r.model = kWide;
  r.precision.dtype = "bfloat16";
  r.precision.optimizer = "adam";
  r.catalog = &catalog;
  r.prices = load_prices(default_prices_path(catalog), catalog);
  r.clusters = {"dgx-h100"};
  r.batch = 8;
  r.samples = 8000;
  r.schedules = {"1f1b"};
  r.checkpoints = {Checkpoint::kNone};
  r.jobs = 2;
  r.tp_sizes = std::move(tp_sizes);
  return r;
}

TEST(CapacityTensorParallel, PlansWhatOnlyAShardedLayerFits) {
  const Catalog catalog = Catalog::load(Catalog::default_dir());
  const CapacityReport whole = plan_capacity(request(catalog, {1}));
  ASSERT_EQ(whole.clusters.size(), 1u);
  EXPECT_FALSE(whole.clusters[0].fits);

  const CapacityReport split = plan_capacity(request(catalog, {1, 2, 4, 8}));
  const ClusterCapacity& c = split.clusters.at(0);
  ASSERT_TRUE(c.fits) << c.note;
  const Plan& p = c.fastest.plan;
  EXPECT_GT(p.tp(), 1);
  EXPECT_TRUE(p.tensor_parallel.sequence_parallel);
  EXPECT_EQ(c.fastest.gpus, p.tp() * p.dp * p.devices_per_replica());
  EXPECT_NE(plan_summary(p).find(" t="), std::string::npos);
  EXPECT_GT(c.search.layouts, whole.clusters[0].search.layouts);  // every size's layouts counted
}

}  // namespace
}  // namespace pipetwin::sim
