#include "core/partition/block_partition.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

namespace pipetwin {

std::vector<int> block_partition(const std::vector<double>& weights, int k) {
  const int n = static_cast<int>(weights.size());
  if (k < 1) throw std::invalid_argument(fmt::format("partitions must be positive ({} < 1)", k));
  if (n < k) {
    throw std::invalid_argument(
        fmt::format("sequence is shorter than intended partitions ({} < {})", n, k));
  }
  const double top = *std::max_element(weights.begin(), weights.end());
  std::vector<double> w(weights.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = top > 0 ? weights[i] / top : 0;
  // splits[i]: end (exclusive) of block i.
  std::vector<int> splits;
  for (int i = 0; i < k - 1; ++i) splits.push_back(n / k * (i + 1));
  splits.push_back(n);
  auto start = [&](int i) { return i > 0 ? splits[static_cast<size_t>(i) - 1] : 0; };
  std::vector<double> prefix(w.size() + 1, 0);
  for (size_t i = 0; i < w.size(); ++i) prefix[i + 1] = prefix[i] + w[i];
  auto block = [&](int i) {
    return prefix[static_cast<size_t>(splits[static_cast<size_t>(i)])] -
           prefix[static_cast<size_t>(start(i))];
  };
  // Each move shifts one element toward a minimal block; bound the loop defensively.
  const long limit = static_cast<long>(n) * n * k + 16;
  long moves = 0;
  while (moves < limit) {
    // (1) A maximal block B_p (the last one among equals, as torchgpipe's max()).
    int p = 0;
    for (int i = 1; i < k; ++i) {
      if (block(i) >= block(p)) p = i;
    }
    const double max_size = block(p);
    while (moves++ < limit) {
      // (2) m(P), and the minimal block closest to p.
      double min_size = block(0);
      for (int i = 1; i < k; ++i) min_size = std::min(min_size, block(i));
      if (max_size <= min_size + 1 + 1e-12) {
        std::vector<int> sizes;
        for (int i = 0; i < k; ++i) sizes.push_back(splits[static_cast<size_t>(i)] - start(i));
        return sizes;
      }
      int q = -1;
      for (int i = 0; i < k; ++i) {
        if (block(i) <= min_size + 1e-12 && (q < 0 || std::abs(i - p) < std::abs(q - p))) q = i;
      }
      // (3) Move the element of B_h next to B_q, h between q and p.
      int h;
      if (p < q) {
        h = q - 1;
        --splits[static_cast<size_t>(h)];
      } else {
        h = q + 1;
        ++splits[static_cast<size_t>(q)];
      }
      if (p == h) break;
    }
  }
  throw std::logic_error("block_partition did not converge");
}

}  // namespace pipetwin
