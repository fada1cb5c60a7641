#include "core/partition/async_chain.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace pipetwin {

namespace {

// The steady-state time per micro-batch of PipeDream's asynchronous 1F1B on a chain, timed as the
// simulator times it (docs/design.md "The schedule IR"): each device runs its compute in the
// order of core/schedule/async_order.hpp (K - k forwards, then one backward and one forward), a
// step's all-reduce tail and optimizer step after every M-th backward; it has one send stream,
// taking its tensors in the order they are produced, and one receive stream, taking them in the
// order they are consumed; a transfer starts when its tensor is ready and both streams are free.
// The receive stream's order is what a closed form misses: a gradient that is ready waits behind
// an activation the device needs later (core/schedule/transfer_order.hpp). Run for steps enough
// for a steady window: the first and last ceil(K / M) + 1 (fill and drain take K micro-batches;
// core/metrics.hpp leaves out K steps) left out, six measured.
class AsyncChain {
 public:
  explicit AsyncChain(const ChainTimes& c)
      : c_(c),
        K_(static_cast<int>(c.forward.size())),
        M_(c.micro_batches),
        edge_((K_ + M_ - 1) / M_ + 1),
        J_(M_ * (2 * edge_ + 6)) {
    const size_t n = static_cast<size_t>(K_) * static_cast<size_t>(J_);
    for (auto* v : {&fwd_, &bwd_, &act_, &grad_}) v->assign(n, -1);
    order_.resize(static_cast<size_t>(K_));
    for (int k = 0; k < K_; ++k) {  // core/schedule/async_order.hpp
      auto& q = order_[static_cast<size_t>(k)];
      int next = 0;
      for (; next < std::min(K_ - k, J_); ++next) q.push_back({true, next});
      for (int mb = 0; mb < J_; ++mb) {
        q.push_back({false, mb});
        if (next < J_) q.push_back({true, next++});
      }
    }
    for (auto* v : {&cpos_, &spos_, &rpos_}) v->assign(static_cast<size_t>(K_), 0);
    for (auto* v : {&cfree_, &sfree_, &rfree_}) v->assign(static_cast<size_t>(K_), 0);
  }

  // The time per micro-batch between the ends of stage 0's optimizer steps, the first and last
  // `edge_` steps left out.
  double period() {
    for (bool progress = true; progress;) {
      progress = false;
      for (int k = 0; k < K_; ++k) progress = compute(k) | send(k) | progress;
    }
    const size_t first = static_cast<size_t>(edge_);
    if (steps_.size() < 2 * first + 2) throw std::logic_error("AsyncChain: the chain stalled");
    const size_t last = steps_.size() - 1 - first;
    return (steps_[last] - steps_[first - 1]) / (static_cast<double>(last - first + 1) * M_);
  }

 private:
  struct Item {
    bool forward;
    int mb;
  };
  size_t at(int k, int mb) const {
    return static_cast<size_t>(k) * static_cast<size_t>(J_) + static_cast<size_t>(mb);
  }
  // Device k's compute, as far as its inputs are known: a forward needs its activations, a
  // backward its gradient (received, or on the last stage its own forward).
  bool compute(int k) {
    const auto& q = order_[static_cast<size_t>(k)];
    size_t& pos = cpos_[static_cast<size_t>(k)];
    double& free = cfree_[static_cast<size_t>(k)];
    const size_t start = pos;
    for (; pos < q.size(); ++pos) {
      const Item it = q[pos];
      const double need = it.forward ? (k > 0 ? act_[at(k, it.mb)] : 0)
                                     : (k + 1 < K_ ? grad_[at(k, it.mb)] : fwd_[at(k, it.mb)]);
      if (need < 0) break;
      const size_t i = static_cast<size_t>(k);
      free = std::max(free, need) + (it.forward ? c_.forward[i] : c_.backward[i]);
      (it.forward ? fwd_ : bwd_)[at(k, it.mb)] = free;
      if (!it.forward && (it.mb + 1) % M_ == 0) {
        free += c_.step[i];
        if (k == 0) steps_.push_back(free);
      }
    }
    return pos != start;
  }
  // Skips the items of device k's order that move no tensor over `moves`.
  template <class Moves>
  void skip(int k, std::vector<size_t>& pos, Moves moves) const {
    const auto& q = order_[static_cast<size_t>(k)];
    size_t& p = pos[static_cast<size_t>(k)];
    while (p < q.size() && !moves(q[p])) ++p;
  }
  // Device k's next send, once its tensor exists and its receiver's receive stream is at it.
  bool send(int k) {
    skip(k, spos_, [&](const Item& it) { return it.forward ? k + 1 < K_ : k > 0; });
    const auto& q = order_[static_cast<size_t>(k)];
    if (spos_[static_cast<size_t>(k)] == q.size()) return false;
    const Item it = q[spos_[static_cast<size_t>(k)]];
    const int to = it.forward ? k + 1 : k - 1;
    skip(to, rpos_, [&](const Item& r) { return r.forward ? to > 0 : to + 1 < K_; });
    const auto& rq = order_[static_cast<size_t>(to)];
    const size_t r = rpos_[static_cast<size_t>(to)];
    const double ready = (it.forward ? fwd_ : bwd_)[at(k, it.mb)];
    if (ready < 0 || r == rq.size() || rq[r].mb != it.mb || rq[r].forward != it.forward) {
      return false;
    }
    double& sfree = sfree_[static_cast<size_t>(k)];
    double& rfree = rfree_[static_cast<size_t>(to)];
    sfree = rfree = std::max({ready, sfree, rfree}) + c_.hop[static_cast<size_t>(std::min(k, to))];
    (it.forward ? act_ : grad_)[at(to, it.mb)] = sfree;
    ++spos_[static_cast<size_t>(k)];
    ++rpos_[static_cast<size_t>(to)];
    return true;
  }

  const ChainTimes& c_;
  const int K_, M_, edge_, J_;  // edge_: steps of fill (and of drain); J_: micro-batches run
  // End times by at(stage, micro-batch), -1 until known: forwards, backwards, activations into
  // and gradients out of the stage (received).
  std::vector<double> fwd_, bwd_, act_, grad_;
  std::vector<double> steps_;                  // ends of stage 0's optimizer steps
  std::vector<std::vector<Item>> order_;       // per device: compute order = consumption order
  std::vector<size_t> cpos_, spos_, rpos_;     // per device: next compute, send, receive
  std::vector<double> cfree_, sfree_, rfree_;  // per device: when each stream is free
};

}  // namespace

double chain_period_s(const ChainTimes& c) {
  return AsyncChain(c).period();
}

}  // namespace pipetwin
