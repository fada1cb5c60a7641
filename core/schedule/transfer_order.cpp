#include "core/schedule/transfer_order.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <queue>
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
struct Graph {
  std::vector<ActionRef> refs;
  std::vector<const Action*> actions;
  std::vector<int32_t> base;                // id of each device's first action
  std::vector<std::vector<int32_t>> preds;  // id -> ids it waits for
  std::vector<int32_t> partner;             // Send <-> Recv; -1 for others
};

using TransferKey = std::tuple<int, int, int, int>;  // payload, producer, consumer, mb

TransferKey transfer_key(const Action& a) {
  const bool act = a.payload == Payload::kActivation;
  const bool sending = a.op == Op::kSend;
  const int from = (act == sending) ? a.stage : a.peer_stage;
  const int to = (act == sending) ? a.peer_stage : a.stage;
  return {static_cast<int>(a.payload), from, to, a.micro_batch};
}

// Data dependencies of one action; `find` maps (op, stage, mb) and transfer keys to ids.
template <typename FindCompute, typename FindRecv>
void data_preds(const PipelineShape& sh, const Action& a, FindCompute compute, FindRecv recv,
                std::vector<int32_t>& out) {
  const int local = sh.device_of(a.stage);
  auto add = [&](int32_t id) {
    if (id >= 0) out.push_back(id);
  };
  switch (a.op) {
    case Op::kForward:
      for (const auto& e : sh.edges) {
        if (e.to != a.stage) continue;
        add(sh.device_of(e.from) == local ? compute(Op::kForward, e.from, a.micro_batch)
                                          : recv(TransferKey{static_cast<int>(Payload::kActivation),
                                                             e.from, a.stage, a.micro_batch}));
      }
      break;
    case Op::kRecompute:
      add(compute(Op::kForward, a.stage, a.micro_batch));
      break;
    case Op::kBackwardWeight:
      add(compute(Op::kBackward, a.stage, a.micro_batch));  // its BackwardInput (see below)
      break;
    case Op::kBackward:
    case Op::kBackwardInput:
      add(compute(Op::kForward, a.stage, a.micro_batch));
      add(compute(Op::kRecompute, a.stage, a.micro_batch));
      for (const auto& e : sh.edges) {
        if (e.from != a.stage) continue;
        add(sh.device_of(e.to) == local ? compute(Op::kBackward, e.to, a.micro_batch)
                                        : recv(TransferKey{static_cast<int>(Payload::kGradient),
                                                           a.stage, e.to, a.micro_batch}));
      }
      break;
    case Op::kSend:
      add(compute(a.payload == Payload::kActivation ? Op::kForward : Op::kBackward, a.stage,
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
  std::map<std::tuple<int, int, int>, int32_t> computes;  // (op, stage, mb) -> id
  std::map<TransferKey, int32_t> sends, recvs;
  for (int32_t id = 0; id < n; ++id) {
    const Action& a = *g.actions[static_cast<size_t>(id)];
    if (a.op == Op::kSend)
      sends[transfer_key(a)] = id;
    else if (a.op == Op::kRecv)
      recvs[transfer_key(a)] = id;
    else  // a split backward's input half stands where a whole Backward would
      computes[{static_cast<int>(a.op == Op::kBackwardInput ? Op::kBackward : a.op), a.stage,
                a.micro_batch}] = id;
  }
  auto compute = [&](Op op, int stage, int mb) {
    auto it = computes.find({static_cast<int>(op), stage, mb});
    return it == computes.end() ? -1 : it->second;
  };
  auto recv = [&](const TransferKey& k) {
    auto it = recvs.find(k);
    return it == recvs.end() ? -1 : it->second;
  };
  g.preds.resize(static_cast<size_t>(n));
  g.partner.assign(static_cast<size_t>(n), -1);
  std::vector<int32_t> last_compute(devices.size(), -1);
  for (int32_t id = 0; id < n; ++id) {
    const Action& a = *g.actions[static_cast<size_t>(id)];
    auto& p = g.preds[static_cast<size_t>(id)];
    data_preds(sh, a, compute, recv, p);
    if (stream_of(a.op) == StreamKind::kCompute) {
      auto& last = last_compute[static_cast<size_t>(g.refs[static_cast<size_t>(id)].device)];
      if (last >= 0) p.push_back(last);
      last = id;
    }
    if (a.op == Op::kSend) {
      if (auto it = recvs.find(transfer_key(a)); it != recvs.end()) {
        g.partner[static_cast<size_t>(id)] = it->second;
        g.partner[static_cast<size_t>(it->second)] = id;
      }
    }
  }
  for (const auto& c : control) {
    g.preds[static_cast<size_t>(g.base[static_cast<size_t>(c.after.device)] + c.after.index)]
        .push_back(g.base[static_cast<size_t>(c.before.device)] + c.before.index);
  }
  return g;
}

// The idealised run of transfer_order.hpp: start time and finalisation order of every action,
// then the need time of every transfer. Returns false when some action never ran.
struct IdealRun {
  std::vector<double> start, need;
  std::vector<int64_t> seq;

  bool run(const Graph& g) {
    const size_t n = g.refs.size();
    std::vector<std::vector<int32_t>> succ(n);
    std::vector<int32_t> pending(n);
    std::vector<double> ready(n, 0);
    for (size_t id = 0; id < n; ++id) {
      pending[id] = static_cast<int32_t>(g.preds[id].size());
      for (int32_t p : g.preds[id])
        succ[static_cast<size_t>(p)].push_back(static_cast<int32_t>(id));
    }
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
      for (int32_t s : succ[static_cast<size_t>(id)]) {
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
  void compute_need(const Graph& g, const std::vector<std::vector<int32_t>>& succ) {
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
        for (int32_t s : succ[member]) {
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
      const std::vector<Action> old(list);
      for (size_t k = 0; k < slots.size(); ++k) {
        list[slots[k]] = old[order[k]];
        map[order[k]] = static_cast<int32_t>(slots[k]);
      }
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
