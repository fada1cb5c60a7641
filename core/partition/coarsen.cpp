#include "core/partition/coarsen.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace pipetwin {

namespace {

// Merges `b` with the first of `candidates` it can contract with inside the memory limit.
bool merge_with_first(CoarseGraph& g, int b, const std::vector<int>& candidates) {
  for (int n : candidates) {
    if (g.can_contract(b, n) && g.fits(g.merged_memory(b, n))) {
      g.contract(b, n);
      return true;
    }
  }
  return false;
}

// Neighbours of b, lightest (compute) first, ties by topological position.
std::vector<int> by_compute(const CoarseGraph& g, int b) {
  std::vector<int> n = g.neighbours(b);
  std::sort(n.begin(), n.end(), [&](int x, int y) {
    const double cx = g.block(x).compute_s, cy = g.block(y).compute_s;
    return cx != cy ? cx < cy : g.position(x) < g.position(y);
  });
  return n;
}

bool same_type(const CoarseGraph::Block& a, const CoarseGraph::Block& b) {
  return (!a.scope.empty() && a.scope == b.scope) || (!a.kind.empty() && a.kind == b.kind);
}

}  // namespace

void remove_constants(CoarseGraph& g) {
  for (int b : g.blocks()) {
    const auto& x = g.block(b);
    if (!x.alive || !x.in.empty() || x.compute_s != 0 || x.static_bytes != 0) continue;
    if (std::find(x.layers.begin(), x.layers.end(), 0) != x.layers.end()) continue;  // the input
    std::vector<int> consumers;
    for (const auto& [n, w] : x.out) consumers.push_back(n);
    std::sort(consumers.begin(), consumers.end(),
              [&](int p, int q) { return g.block(p).compute_s < g.block(q).compute_s; });
    merge_with_first(g, b, consumers);
  }
}

void merge_zero_weight(CoarseGraph& g) {
  for (int b : g.blocks()) {
    if (!g.block(b).alive || g.block(b).compute_s != 0) continue;
    merge_with_first(g, b, by_compute(g, b));
  }
}

void merge_heavy_communication(CoarseGraph& g, double percentile) {
  const std::vector<int> blocks = g.blocks();
  if (blocks.empty()) return;
  std::vector<double> volume;
  for (int b : blocks) {
    double v = 0;
    for (const auto& [n, w] : g.block(b).in) v += w;
    for (const auto& [n, w] : g.block(b).out) v += w;
    volume.push_back(v);
  }
  std::vector<double> sorted(volume);
  std::sort(sorted.begin(), sorted.end());
  const auto rank = static_cast<size_t>(std::ceil(percentile * static_cast<double>(sorted.size())));
  const double threshold = sorted[std::max<size_t>(rank, 1) - 1];
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int b = blocks[i];
    if (volume[i] <= threshold || !g.block(b).alive) continue;
    std::vector<int> n = g.neighbours(b);
    std::sort(n.begin(), n.end(),
              [&](int x, int y) { return g.bytes_between(b, x) > g.bytes_between(b, y); });
    merge_with_first(g, b, n);
  }
}

void coarsen_by_type(CoarseGraph& g, double compute_cap_s, double memory_cap_bytes) {
  for (bool merged = true; merged;) {
    merged = false;
    for (int b : g.blocks()) {
      if (!g.block(b).alive) continue;
      std::vector<int> next;
      for (const auto& [n, w] : g.block(b).out) next.push_back(n);
      std::sort(next.begin(), next.end(),
                [&](int x, int y) { return g.position(x) < g.position(y); });
      for (int n : next) {
        const auto &x = g.block(b), &y = g.block(n);
        if (!same_type(x, y) || x.compute_s + y.compute_s > compute_cap_s) continue;
        const double mem = g.merged_memory(b, n);
        if (mem > memory_cap_bytes || !g.fits(mem) || !g.can_contract(b, n)) continue;
        g.contract(b, n);
        merged = true;
        break;  // b's neighbours changed; the next pass looks again
      }
    }
  }
}

namespace {

std::vector<int> choose_centres(const CoarseGraph& g, int L, CentreChoice choice) {
  std::vector<int> blocks = g.blocks();
  std::vector<int> centres;
  if (choice == CentreChoice::kHeaviest) {
    std::stable_sort(blocks.begin(), blocks.end(),
                     [&](int x, int y) { return g.block(x).compute_s > g.block(y).compute_s; });
    blocks.resize(static_cast<size_t>(L));
    return blocks;
  }
  // The block holding cumulative compute (k + 1/2) / L of the total, or the next free one.
  std::set<int> taken;
  double cumulative = 0;
  size_t i = 0;
  for (int k = 0; k < L; ++k) {
    const double target = (k + 0.5) / L * g.total_compute();
    while (i + 1 < blocks.size() && cumulative + g.block(blocks[i]).compute_s <= target) {
      cumulative += g.block(blocks[i++]).compute_s;
    }
    size_t j = i;
    while (j < blocks.size() && taken.count(blocks[j])) ++j;
    if (j == blocks.size()) {
      j = 0;
      while (taken.count(blocks[j])) ++j;
    }
    taken.insert(blocks[j]);
    centres.push_back(blocks[j]);
  }
  return centres;
}

// One centre takes its best neighbour that is not a centre; returns whether it did.
bool grow(CoarseGraph& g, int c, const std::set<int>& centres) {
  std::vector<int> n;
  for (int x : g.neighbours(c)) {
    if (!centres.count(x)) n.push_back(x);
  }
  std::sort(n.begin(), n.end(), [&](int x, int y) {
    const double bx = g.bytes_between(c, x), by = g.bytes_between(c, y);
    if (bx != by) return bx > by;
    const double cx = g.block(x).compute_s, cy = g.block(y).compute_s;
    return cx != cy ? cx < cy : g.position(x) < g.position(y);
  });
  return merge_with_first(g, c, n);
}

}  // namespace

void coarsen_around_centers(CoarseGraph& g, int L, CentreChoice choice) {
  if (g.num_blocks() <= L) return;
  std::vector<int> list = choose_centres(g, L, choice);
  std::set<int> centres(list.begin(), list.end());
  const double average = g.total_compute() / L;
  while (g.num_blocks() > static_cast<int>(centres.size())) {
    std::sort(list.begin(), list.end(),
              [&](int x, int y) { return g.block(x).compute_s < g.block(y).compute_s; });
    bool progress = false;
    for (int pass = 0; pass < 2 && !progress; ++pass) {
      for (int c : list) {
        if (pass == 0 && g.block(c).compute_s >= average) continue;
        progress = grow(g, c, centres) || progress;
      }
    }
    if (progress) continue;
    // No centre can take anything: the heaviest remaining block becomes a centre.
    int promote = -1;
    for (int b : g.blocks()) {
      if (centres.count(b)) continue;
      if (promote < 0 || g.block(b).compute_s > g.block(promote).compute_s) promote = b;
    }
    centres.insert(promote);
    list.push_back(promote);
  }
}

}  // namespace pipetwin
