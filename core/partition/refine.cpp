#include "core/partition/refine.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace pipetwin {

namespace {

struct Score {
  double worst = 0, squares = 0, cross_bytes = 0;
};

bool better(const Score& a, const Score& b) {
  const double t1 = 1e-12 * std::max(a.worst, b.worst);
  if (a.worst < b.worst - t1) return true;
  if (a.worst > b.worst + t1) return false;
  const double t2 = 1e-12 * std::max(a.squares, b.squares);
  if (a.squares < b.squares - t2) return true;
  if (a.squares > b.squares + t2) return false;
  return a.cross_bytes < b.cross_bytes * (1 - 1e-12);
}

class State {
 public:
  State(const PartitionRequest& r, const Partition& p)
      : r_(r), cm_(*r.cost), sets_(activation_sets(r)), S_(p.num_stages()), D_(p.num_devices()) {
    const int L = cm_.num_layers();
    stage_of_.assign(static_cast<size_t>(L), -1);
    for (int s = 0; s < S_; ++s) {
      dev_.push_back(p.device_of(s));
      for (int l : p.stages[static_cast<size_t>(s)]) stage_of_[static_cast<size_t>(l)] = s;
    }
    const size_t S = static_cast<size_t>(S_);
    comp_.assign(S, 0);
    mem_.assign(S, 0);
    in_.assign(S, 0);
    size_.assign(S, 0);
    W_.assign(S * S, 0);
    N_.assign(S * S, 0);
    for (int l = 0; l < L; ++l) {
      const StageCost c = cm_.stage_cost({l}, r.micro_batch);
      Layer layer;
      layer.compute_s = c.forward_s + c.backward_s;
      layer.fixed_bytes = c.static_bytes() + sets_ * c.saved_bytes;
      if (l == 0) layer.fixed_bytes += sets_ * cm_.profile().input_bytes_per_sample * r.micro_batch;
      layer.in = cm_.graph().in_edges(l);
      layer.out = cm_.graph().out_edges(l);
      const auto s = static_cast<size_t>(stage_of_[static_cast<size_t>(l)]);
      comp_[s] += layer.compute_s;
      mem_[s] += layer.fixed_bytes;
      ++size_[s];
      layers_.push_back(std::move(layer));
    }
    for (const auto& e : cm_.graph().edges()) {
      const int a = stage_of(e.from), b = stage_of(e.to);
      if (a != b) edge(a, b, e.bytes_per_sample, +1);
    }
  }

  Score score() const {
    std::vector<double> compute(static_cast<size_t>(D_), 0), in(compute), out(compute);
    std::vector<char> used(static_cast<size_t>(D_), 0);
    for (int s = 0; s < S_; ++s) {
      compute[static_cast<size_t>(dev(s))] += comp_[static_cast<size_t>(s)];
      used[static_cast<size_t>(dev(s))] = 1;
    }
    Score sc;
    for (int a = 0; a < S_; ++a) {
      for (int b = 0; b < S_; ++b) {
        const size_t k = idx(a, b);
        if (N_[k] == 0 || dev(a) == dev(b)) continue;
        const double t = cm_.transfer_s(W_[k] * r_.micro_batch, dev(a), dev(b));
        in[static_cast<size_t>(dev(b))] += t;
        out[static_cast<size_t>(dev(a))] += t;
        sc.cross_bytes += W_[k];
      }
    }
    for (int d = 0; d < D_; ++d) {
      const auto i = static_cast<size_t>(d);
      if (!used[i]) continue;
      const double t = stage_period(compute[i], in[i], out[i]);
      sc.worst = std::max(sc.worst, t);
      sc.squares += t * t;
    }
    return sc;
  }

  // Tries every move of every layer once; returns whether one was taken.
  bool pass(Score& current) {
    bool improved = false;
    for (int l = 0; l < static_cast<int>(layers_.size()); ++l) {
      const int s = stage_of_[static_cast<size_t>(l)];
      if (size_[static_cast<size_t>(s)] <= 1) continue;
      std::set<int> targets;
      for (const auto& e : layers_[static_cast<size_t>(l)].in) targets.insert(stage_of(e.from));
      for (const auto& e : layers_[static_cast<size_t>(l)].out) targets.insert(stage_of(e.to));
      targets.erase(s);
      for (int t : targets) {
        const double source_before = need(dev(s));
        move(l, t);
        // The target must fit; the source must fit or at least not grow (a start over the limit
        // can still be repaired).
        const double source_after = need(dev(s));
        const bool memory_ok =
            fits(need(dev(t))) && (fits(source_after) || source_after <= source_before);
        if (memory_ok && acyclic()) {
          const Score sc = score();
          if (better(sc, current)) {
            current = sc;
            improved = true;
            break;
          }
        }
        move(l, s);
      }
    }
    return improved;
  }

  Partition result() const {
    std::vector<std::vector<int>> stages(static_cast<size_t>(S_));
    for (size_t l = 0; l < stage_of_.size(); ++l) {
      stages[static_cast<size_t>(stage_of_[l])].push_back(static_cast<int>(l));
    }
    return order_stages(cm_.graph(), std::move(stages), dev_);
  }

 private:
  struct Layer {
    double compute_s = 0, fixed_bytes = 0;
    std::vector<ModelGraph::Edge> in, out;
  };

  size_t idx(int a, int b) const {
    return static_cast<size_t>(a) * static_cast<size_t>(S_) + static_cast<size_t>(b);
  }
  int dev(int s) const { return dev_[static_cast<size_t>(s)]; }
  int stage_of(int l) const { return stage_of_[static_cast<size_t>(l)]; }

  void edge(int a, int b, double bytes, int sign) {
    const size_t k = idx(a, b);
    N_[k] += sign;
    W_[k] = N_[k] == 0 ? 0 : W_[k] + sign * bytes;
    in_[static_cast<size_t>(b)] += sign * bytes;
  }

  // Adds (sign +1) or removes (-1) layer l's terms to/from stage s, and its edges to neighbours
  // in other stages (each crossing edge is counted once, so a move touches only l's edges).
  void add(int l, int s, int sign) {
    const Layer& x = layers_[static_cast<size_t>(l)];
    comp_[static_cast<size_t>(s)] += sign * x.compute_s;
    mem_[static_cast<size_t>(s)] += sign * x.fixed_bytes;
    for (const auto& e : x.in) {
      const int u = stage_of(e.from);
      if (u != s) edge(u, s, e.bytes_per_sample, sign);
    }
    for (const auto& e : x.out) {
      const int v = stage_of(e.to);
      if (v != s) edge(s, v, e.bytes_per_sample, sign);
    }
  }

  void move(int l, int t) {
    const int s = stage_of(l);
    add(l, s, -1);
    stage_of_[static_cast<size_t>(l)] = t;  // edges to stage s now cross, those to t do not
    add(l, t, +1);
    --size_[static_cast<size_t>(s)];
    ++size_[static_cast<size_t>(t)];
  }

  // Memory of device d: stage_memory_bytes() summed over its stages.
  double need(int d) const {
    double bytes = 0;
    for (int s = 0; s < S_; ++s) {
      if (dev(s) == d) {
        bytes +=
            mem_[static_cast<size_t>(s)] + sets_ * in_[static_cast<size_t>(s)] * r_.micro_batch;
      }
    }
    return bytes;
  }
  bool fits(double bytes) const {
    return r_.memory_limit_bytes <= 0 || bytes <= r_.memory_limit_bytes;
  }

  bool acyclic() const {
    std::vector<int> indegree(static_cast<size_t>(S_), 0);
    for (int a = 0; a < S_; ++a) {
      for (int b = 0; b < S_; ++b) {
        if (a != b && N_[idx(a, b)] > 0) ++indegree[static_cast<size_t>(b)];
      }
    }
    std::vector<int> ready;
    for (int s = 0; s < S_; ++s) {
      if (indegree[static_cast<size_t>(s)] == 0) ready.push_back(s);
    }
    int done = 0;
    while (!ready.empty()) {
      const int a = ready.back();
      ready.pop_back();
      ++done;
      for (int b = 0; b < S_; ++b) {
        if (a != b && N_[idx(a, b)] > 0 && --indegree[static_cast<size_t>(b)] == 0)
          ready.push_back(b);
      }
    }
    return done == S_;
  }

  const PartitionRequest& r_;
  const CostModel& cm_;
  const double sets_;  // activation_sets(): micro-batches of activations a stage keeps
  const int S_, D_;
  std::vector<int> stage_of_, dev_, size_;
  std::vector<double> comp_, mem_, in_;  // in_: bytes per sample entering the stage
  std::vector<double> W_;                // bytes per sample from stage a to stage b
  std::vector<int> N_;                   // model edges from stage a to stage b
  std::vector<Layer> layers_;
};

}  // namespace

Partition refine_partition(const PartitionRequest& r, const Partition& p) {
  State state(r, p);
  Score current = state.score();
  for (int pass = 0; pass < 64 && state.pass(current); ++pass) {
  }
  return state.result();
}

}  // namespace pipetwin
