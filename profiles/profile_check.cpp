#include "profiles/profile_check.hpp"

#include <algorithm>

namespace pipetwin {

namespace {

void check_pair(const LayerTiming& a, const LayerTiming& b, int layer, const char* pass, double ta,
                double tb, double factor, double min_excess, std::vector<DisturbedTiming>& out) {
  // a.micro_batch < b.micro_batch. "More samples never take less time."
  if (ta > factor * tb && ta - factor * tb > min_excess) {
    out.push_back({a.micro_batch, layer, pass, ta, factor * tb});
  }
  // "Batching never makes a sample much dearer."
  const double per_sample_bound = factor * ta / a.micro_batch * b.micro_batch;
  if (tb > per_sample_bound && tb - per_sample_bound > min_excess) {
    out.push_back({b.micro_batch, layer, pass, tb, per_sample_bound});
  }
}

}  // namespace

std::vector<DisturbedTiming> disturbed_timings(const Profile& profile, double factor,
                                               double min_excess_s) {
  std::vector<DisturbedTiming> out;
  for (size_t l = 0; l < profile.layers.size(); ++l) {
    std::vector<LayerTiming> t = profile.layers[l].timings;
    std::sort(t.begin(), t.end(), [](const LayerTiming& x, const LayerTiming& y) {
      return x.micro_batch < y.micro_batch;
    });
    for (size_t i = 0; i + 1 < t.size(); ++i) {
      const int layer = static_cast<int>(l);
      check_pair(t[i], t[i + 1], layer, "forward", t[i].forward_s, t[i + 1].forward_s, factor,
                 min_excess_s, out);
      check_pair(t[i], t[i + 1], layer, "backward", t[i].backward_s, t[i + 1].backward_s, factor,
                 min_excess_s, out);
    }
  }
  return out;
}

std::vector<int> disturbed_sizes(const Profile& profile, double factor, double min_excess_s) {
  std::vector<int> sizes;
  for (const auto& d : disturbed_timings(profile, factor, min_excess_s))
    sizes.push_back(d.micro_batch);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

}  // namespace pipetwin
