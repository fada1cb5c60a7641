#include "core/schedule/transfer_order.hpp"

#include <algorithm>
#include <limits>
#include <queue>
#include <span>
#include <tuple>
#include <utility>

namespace pipetwin {

bool is_plain_chain(const PipelineShape& shape) {
  if (!shape.one_stage_per_device()) return false;
  for (const auto& e : shape.edges) {
    if (e.to != e.from + 1) return false;
  }
  return true;
}

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// Nominal compute time of an action in the idealised run (transfers take none).
double nominal_time(Op op) {
  switch (op) {
    case Op::kForward:
      return 1;
    case Op::kRecompute:
      return 1;
    case Op::kBackward:
      return 2;
    case Op::kBackwardInput:
    case Op::kBackwardWeight:
      return 1;
    default:
      return 0;
  }
}

// The actions of replica 0 flattened to ids, with the dependencies CompiledSchedule would give
// them (compiled.hpp), each compute action also depending on its compute-stream predecessor.
// Dependency lists are flat (CSR: the preds of id are pred[pred_begin[id] .. pred_begin[id + 1])),
// as compiled.hpp keeps them: the builder runs this for every schedule that is not a plain chain.
struct Graph {
  std::vector<ActionRef> refs;
  std::vector<const Action*> actions;
  std::vector<int32_t> base;  // id of each device's first action
  std::vector<int32_t> pred_begin, pred;
  std::vector<int32_t> partner;  // Send <-> Recv; -1 for others
  std::span<const int32_t> preds(size_t id) const {
    return {pred.data() + pred_begin[id], pred.data() + pred_begin[id + 1]};
  }
};

// The ids of the compute actions and Recvs by what data_preds() asks for, in flat tables: compute
// actions by (kind, stage, micro-batch), transfers by (payload, producer, consumer, micro-batch),
// the stage pairs numbered as they first appear. A later action of the same key replaces an
// earlier one.
class ActionIndex {
 public:
  ActionIndex(const PipelineShape& sh, const std::vector<const Action*>& actions) {
    stages_ = std::max(sh.num_stages, 1);
    int lo = 0, hi = -1;
    for (const Action* a : actions) {
      stages_ = std::max({stages_, a->stage + 1, a->peer_stage + 1});
      if (a->op == Op::kOptimizerStep) continue;
      lo = std::min(lo, a->micro_batch);
      hi = std::max(hi, a->micro_batch);
    }
    mb0_ = lo;
    mbs_ = static_cast<size_t>(hi - lo + 1);
    pair_.assign(3 * static_cast<size_t>(stages_) * static_cast<size_t>(stages_), -1);
    computes_.assign(3 * static_cast<size_t>(stages_) * mbs_, -1);
    for (size_t id = 0; id < actions.size(); ++id) {
      const Action& a = *actions[id];
      if (a.op == Op::kSend) continue;
      if (a.op == Op::kRecv) {
        const auto [from, to] = ends(a);
        if (from < 0 || to < 0) continue;  // no data_preds() lookup asks for it
        int32_t& pair = pair_[pair_slot(a.payload, from, to)];
        if (pair < 0) {
          pair = static_cast<int32_t>(recvs_.size() / mbs_);
          recvs_.resize(recvs_.size() + mbs_, -1);
        }
        recvs_[static_cast<size_t>(pair) * mbs_ + mb_slot(a.micro_batch)] =
            static_cast<int32_t>(id);
      } else if (const int kind = kind_of(a.op); kind >= 0 && a.stage >= 0) {
        computes_[compute_slot(kind, a.stage, a.micro_batch)] = static_cast<int32_t>(id);
      }
    }
  }

  // Forward, Recompute or Backward (a split backward's input half stands where a whole Backward
  // would) of (stage, mb); -1: none.
  int32_t compute(Op op, int stage, int mb) const {
    const int kind = kind_of(op);
    if (kind < 0 || !in_range(stage, mb)) return -1;
    return computes_[compute_slot(kind, stage, mb)];
  }
  // The Recv of (payload, producer, consumer, mb); -1: none.
  int32_t recv(Payload payload, int from, int to, int mb) const {
    if (!in_range(from, mb) || to < 0 || to >= stages_) return -1;
    const int32_t pair = pair_[pair_slot(payload, from, to)];
    return pair < 0 ? -1 : recvs_[static_cast<size_t>(pair) * mbs_ + mb_slot(mb)];
  }
  // The Recv a Send meets; -1: none.
  int32_t partner_of(const Action& send) const {
    const auto [from, to] = ends(send);
    return recv(send.payload, from, to, send.micro_batch);
  }

 private:
  static int kind_of(Op op) {
    switch (op) {
      case Op::kForward:
        return 0;
      case Op::kRecompute:
        return 1;
      case Op::kBackward:
      case Op::kBackwardInput:
        return 2;
      default:
        return -1;
    }
  }
  size_t square() const { return static_cast<size_t>(stages_) * static_cast<size_t>(stages_); }
  bool in_range(int stage, int mb) const {
    return stage >= 0 && stage < stages_ && mb >= mb0_ && static_cast<size_t>(mb - mb0_) < mbs_;
  }
  size_t mb_slot(int mb) const { return static_cast<size_t>(mb - mb0_); }
  size_t compute_slot(int kind, int stage, int mb) const {
    return (static_cast<size_t>(kind) * static_cast<size_t>(stages_) + static_cast<size_t>(stage)) *
               mbs_ +
           mb_slot(mb);
  }
  // A transfer's producer and consumer stages.
  static std::pair<int, int> ends(const Action& a) {
    const bool act = a.payload == Payload::kActivation;
    const bool sending = a.op == Op::kSend;
    return act == sending ? std::pair{a.stage, a.peer_stage} : std::pair{a.peer_stage, a.stage};
  }
  size_t pair_slot(Payload payload, int from, int to) const {
    return static_cast<size_t>(payload) * square() +
           static_cast<size_t>(from) * static_cast<size_t>(stages_) + static_cast<size_t>(to);
  }

  int stages_ = 1, mb0_ = 0;
  size_t mbs_ = 0;
  std::vector<int32_t> pair_;      // (payload, producer, consumer) -> pair number; -1: none
  std::vector<int32_t> computes_;  // (kind, stage, mb) -> id
  std::vector<int32_t> recvs_;     // (pair, mb) -> id
};

// Data dependencies of one action, as ids of `index`.
void data_preds(const PipelineShape& sh, const Action& a, const ActionIndex& index,
                std::vector<int32_t>& out) {
  const int local = sh.device_of(a.stage);
  auto add = [&](int32_t id) {
    if (id >= 0) out.push_back(id);
  };
  switch (a.op) {
    case Op::kForward:
      for (const auto& e : sh.edges) {
        if (e.to != a.stage) continue;
        add(sh.device_of(e.from) == local
                ? index.compute(Op::kForward, e.from, a.micro_batch)
                : index.recv(Payload::kActivation, e.from, a.stage, a.micro_batch));
      }
      break;
    case Op::kRecompute:
      add(index.compute(Op::kForward, a.stage, a.micro_batch));
      break;
    case Op::kBackwardWeight:
      add(index.compute(Op::kBackward, a.stage, a.micro_batch));  // its BackwardInput
      break;
    case Op::kBackward:
    case Op::kBackwardInput:
      add(index.compute(Op::kForward, a.stage, a.micro_batch));
      add(index.compute(Op::kRecompute, a.stage, a.micro_batch));
      for (const auto& e : sh.edges) {
        if (e.from != a.stage) continue;
        add(sh.device_of(e.to) == local
                ? index.compute(Op::kBackward, e.to, a.micro_batch)
                : index.recv(Payload::kGradient, a.stage, e.to, a.micro_batch));
      }
      break;
    case Op::kSend:
      add(index.compute(a.payload == Payload::kActivation ? Op::kForward : Op::kBackward, a.stage,
                        a.micro_batch));
      break;
    default:
      break;
  }
}

Graph build_graph(const PipelineShape& sh, const std::vector<std::vector<Action>>& devices,
                  const std::vector<ControlDep>& control) {
  Graph g;
  for (size_t d = 0; d < devices.size(); ++d) {
    g.base.push_back(static_cast<int32_t>(g.refs.size()));
    for (size_t i = 0; i < devices[d].size(); ++i) {
      g.refs.push_back({static_cast<int32_t>(d), static_cast<int32_t>(i)});
      g.actions.push_back(&devices[d][i]);
    }
  }
  const auto n = static_cast<int32_t>(g.refs.size());
  const ActionIndex index(sh, g.actions);
  // Control dependencies go after the data and stream ones, per action.
  std::vector<int32_t> control_count(static_cast<size_t>(n) + 1, 0);
  for (const auto& c : control)
    ++control_count[static_cast<size_t>(g.base[static_cast<size_t>(c.after.device)] +
                                        c.after.index)];
  g.partner.assign(static_cast<size_t>(n), -1);
  g.pred_begin.assign(static_cast<size_t>(n) + 1, 0);
  std::vector<int32_t> last_compute(devices.size(), -1);
  std::vector<int32_t> control_at;  // where each action's control dependencies go
  control_at.reserve(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    const Action& a = *g.actions[static_cast<size_t>(id)];
    data_preds(sh, a, index, g.pred);
    if (stream_of(a.op) == StreamKind::kCompute) {
      auto& last = last_compute[static_cast<size_t>(g.refs[static_cast<size_t>(id)].device)];
      if (last >= 0) g.pred.push_back(last);
      last = id;
    }
    control_at.push_back(static_cast<int32_t>(g.pred.size()));
    g.pred.resize(g.pred.size() + static_cast<size_t>(control_count[static_cast<size_t>(id)]));
    g.pred_begin[static_cast<size_t>(id) + 1] = static_cast<int32_t>(g.pred.size());
    if (a.op == Op::kSend) {
      if (const int32_t r = index.partner_of(a); r >= 0) {
        g.partner[static_cast<size_t>(id)] = r;
        g.partner[static_cast<size_t>(r)] = id;
      }
    }
  }
  for (const auto& c : control) {
    const auto after =
        static_cast<size_t>(g.base[static_cast<size_t>(c.after.device)] + c.after.index);
    g.pred[static_cast<size_t>(control_at[after]++)] =
        g.base[static_cast<size_t>(c.before.device)] + c.before.index;
  }
  return g;
}

// The dependents of every action, flat, each list in ascending id order (the order the per-action
// lists were filled in before).
struct Successors {
  std::vector<int32_t> begin, ids;
  explicit Successors(const Graph& g) {
    const size_t n = g.refs.size();
    begin.assign(n + 1, 0);
    for (int32_t p : g.pred) ++begin[static_cast<size_t>(p) + 1];
    for (size_t i = 0; i < n; ++i) begin[i + 1] += begin[i];
    ids.resize(g.pred.size());
    std::vector<int32_t> at(begin.begin(), begin.end() - 1);
    for (size_t id = 0; id < n; ++id) {
      for (int32_t p : g.preds(id))
        ids[static_cast<size_t>(at[static_cast<size_t>(p)]++)] = static_cast<int32_t>(id);
    }
  }
  std::span<const int32_t> of(size_t id) const {
    return {ids.data() + begin[id], ids.data() + begin[id + 1]};
  }
};

// The idealised run of transfer_order.hpp: start time and finalisation order of every action,
// then the need time of every transfer. Returns false when some action never ran.
struct IdealRun {
  std::vector<double> start, need;
  std::vector<int64_t> seq;

  bool run(const Graph& g) {
    const size_t n = g.refs.size();
    const Successors succ(g);
    std::vector<int32_t> pending(n);
    std::vector<double> ready(n, 0);
    for (size_t id = 0; id < n; ++id) pending[id] = static_cast<int32_t>(g.preds(id).size());
    start.assign(n, kNever);
    seq.assign(n, -1);
    using Item = std::pair<double, int32_t>;
    std::priority_queue<Item, std::vector<Item>, std::greater<>> queue;
    auto offer = [&](int32_t id) {  // a transfer enters once both ends are free to go
      const int32_t other = g.partner[static_cast<size_t>(id)];
      if (other < 0) {
        queue.push({ready[static_cast<size_t>(id)], id});
      } else if (pending[static_cast<size_t>(other)] == 0) {
        queue.push({std::max(ready[static_cast<size_t>(id)], ready[static_cast<size_t>(other)]),
                    std::min(id, other)});
      }
    };
    for (size_t id = 0; id < n; ++id) {
      if (pending[id] == 0) offer(static_cast<int32_t>(id));
    }
    int64_t next = 0;
    auto finish = [&](int32_t id, double t) {
      start[static_cast<size_t>(id)] = t;
      seq[static_cast<size_t>(id)] = next++;
      const double end = t + nominal_time(g.actions[static_cast<size_t>(id)]->op);
      for (int32_t s : succ.of(static_cast<size_t>(id))) {
        ready[static_cast<size_t>(s)] = std::max(ready[static_cast<size_t>(s)], end);
        if (--pending[static_cast<size_t>(s)] == 0) offer(s);
      }
    };
    while (!queue.empty()) {
      const auto [t, id] = queue.top();
      queue.pop();
      if (seq[static_cast<size_t>(id)] >= 0) continue;
      finish(id, t);
      if (const int32_t other = g.partner[static_cast<size_t>(id)]; other >= 0) finish(other, t);
    }
    if (next != static_cast<int64_t>(n)) return false;
    compute_need(g, succ);
    return true;
  }

  // need(x) = earliest start of a compute action depending on x, through transfers if need be.
  // Dependents finalise after x, so walking the run backwards sees them first.
  void compute_need(const Graph& g, const Successors& succ) {
    const size_t n = g.refs.size();
    std::vector<int32_t> by_seq(n);
    for (size_t id = 0; id < n; ++id)
      by_seq[static_cast<size_t>(seq[id])] = static_cast<int32_t>(id);
    need.assign(n, kNever);
    for (size_t k = n; k-- > 0;) {
      const auto id = static_cast<size_t>(by_seq[k]);
      const int32_t other = g.partner[id];
      if (other < 0 || static_cast<size_t>(other) > id) continue;  // visit each pair once
      double best = kNever;
      for (const size_t member : {id, static_cast<size_t>(other)}) {
        for (int32_t s : succ.of(member)) {
          const auto su = static_cast<size_t>(s);
          best = std::min(best, g.partner[su] >= 0 ? need[su] : start[su]);
        }
      }
      need[id] = best;
      need[static_cast<size_t>(other)] = best;
    }
  }
};

}  // namespace

bool order_transfers_by_ideal_time(const PipelineShape& shape,
                                   std::vector<std::vector<Action>>& devices,
                                   std::vector<ControlDep>& control) {
  const Graph g = build_graph(shape, devices, control);
  IdealRun run;
  if (!run.run(g)) return false;
  bool changed = false;
  std::vector<std::vector<int32_t>> moved(devices.size());  // old index -> new index
  for (size_t d = 0; d < devices.size(); ++d) {
    auto& list = devices[d];
    auto& map = moved[d];
    map.resize(list.size());
    for (size_t i = 0; i < list.size(); ++i) map[i] = static_cast<int32_t>(i);
    for (Op op : {Op::kSend, Op::kRecv}) {
      std::vector<size_t> slots;
      for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].op == op) slots.push_back(i);
      }
      std::vector<size_t> order(slots);
      auto key = [&](size_t i) {
        const auto id = static_cast<size_t>(g.base[d]) + i;
        return std::make_tuple(run.start[id], run.need[id], run.seq[id]);
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t x, size_t y) { return key(x) < key(y); });
      if (order == slots) continue;
      changed = true;
      std::vector<Action> moving;  // the stream's actions, in their new order
      moving.reserve(slots.size());
      for (size_t k = 0; k < slots.size(); ++k) {
        moving.push_back(list[order[k]]);
        map[order[k]] = static_cast<int32_t>(slots[k]);
      }
      for (size_t k = 0; k < slots.size(); ++k) list[slots[k]] = moving[k];
    }
  }
  for (auto& c : control) {
    for (ActionRef* ref : {&c.before, &c.after}) {
      ref->index = moved[static_cast<size_t>(ref->device)][static_cast<size_t>(ref->index)];
    }
  }
  return changed;
}

}  // namespace pipetwin
