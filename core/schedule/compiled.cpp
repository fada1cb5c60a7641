#include "core/schedule/compiled.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

namespace {

size_t at(int32_t i) {
  return static_cast<size_t>(i);
}

// A stable counting sort: out[begin[k] .. begin[k + 1]) holds value(i) of the items i with
// key(i) == k, in item order (CSR form).
template <class T, class KeyFn, class ValueFn>
void group_by(size_t items, int keys, KeyFn key, ValueFn value, std::vector<int32_t>& begin,
              std::vector<T>& out) {
  begin.assign(at(keys) + 1, 0);
  for (size_t i = 0; i < items; ++i) ++begin[at(key(i)) + 1];
  for (int k = 0; k < keys; ++k) begin[at(k) + 1] += begin[at(k)];
  std::vector<int32_t> fill(begin.begin(), begin.end() - 1);
  out.resize(items);
  for (size_t i = 0; i < items; ++i) out[at(fill[at(key(i))]++)] = value(i);
}

int32_t index(size_t i) {
  return static_cast<int32_t>(i);
}

}  // namespace

struct CompiledSchedule::Links {
  int S = 0, J = 0, T = 0, E = 0;
  std::vector<int32_t> out_begin, out_edges;  // edges leaving each stage
  std::vector<int32_t> in_begin, in_edges;    // edges entering each stage
  std::vector<int32_t> sends, recvs;          // [replica][edge][payload][mb] -> id
  std::vector<int32_t> steps;                 // [replica][stage copy][step] -> OptimizerStep id
  std::vector<int32_t> copy_base;             // per stage: stage replicas of the stages before it
  std::vector<int32_t> bucket_base;           // per stage: buckets of the stages before it
  std::vector<int32_t> ar_ids, ar_keys;       // all-reduces in action order, their keys
  std::vector<int32_t> ar_begin, ar_members;  // CSR: all-reduces of each (stage, step, bucket)
  std::vector<int32_t> dep_of;                // dependencies in the order they are found: of
  std::vector<Dependency> dep;                // action dep_of[k], dependency dep[k]

  // The first edge from -> to (duplicates share its tables), -1 when there is none.
  int edge(const std::vector<StageEdge>& edges, int from, int to) const {
    for (int32_t k = out_begin[at(from)]; k < out_begin[at(from) + 1]; ++k) {
      if (edges[at(out_edges[at(k)])].to == to) return out_edges[at(k)];
    }
    return -1;
  }
  size_t transfer(int replica, int e, bool activation, int mb) const {
    return ((static_cast<size_t>(replica) * at(E) + at(e)) * 2 + (activation ? 0 : 1)) * at(J) +
           at(mb);
  }
  // Stage `stage`'s replica `k` within its pipeline replica (PipelineShape::stage_replicas).
  size_t step(int replica, int stage, int k, int t) const {
    const int units = copy_base[at(S)];
    return (static_cast<size_t>(replica) * at(units) + at(copy_base[at(stage)] + k)) * at(T) +
           at(t);
  }
  int buckets(int stage) const { return bucket_base[at(stage) + 1] - bucket_base[at(stage)]; }
  int32_t allreduce_key(const Action& a) const {
    return bucket_base[at(a.stage)] * T + a.step * buckets(a.stage) + a.bucket;
  }
  void depend(int32_t id, int32_t pred, int32_t from_layer = -1) {
    dep_of.push_back(id);
    dep.push_back({pred, from_layer});
  }
};

CompiledSchedule::CompiledSchedule(Schedule schedule, const std::string& origin,
                                   bool check_progress)
    : schedule_(std::move(schedule)) {
  schedule_.shape.normalize(origin);
  const auto& sh = schedule_.shape;
  if (schedule_.num_devices() != sh.devices_per_replica * sh.replicas) {
    throw InputError(fmt::format("{}: {} device lists for {} devices x {} replicas", origin,
                                 schedule_.num_devices(), sh.devices_per_replica, sh.replicas));
  }
  flatten();
  Links l;
  index_actions(l, origin);
  check_complete(l, origin);
  link_transfers(l, origin);
  link_compute(l, origin);
  link_allreduces(l, origin);
  link_control(l, origin);
  collect_deps(l);
  check_versions(origin);
  if (check_progress) this->check_progress(origin);
}

int CompiledSchedule::id(ActionRef r) const {
  return device_base_[static_cast<size_t>(r.device)] + r.index;
}

void CompiledSchedule::fail(int id, const std::string& origin, const std::string& what) const {
  const auto r = ref(id);
  throw InputError(fmt::format("{}: device {} action {} ({}): {}", origin, r.device, r.index,
                               describe(action(id)), what));
}

void CompiledSchedule::flatten() {
  const int devices = schedule_.num_devices();
  const size_t n = schedule_.num_actions();
  actions_.reserve(n);
  refs_.reserve(n);
  stream_of_.reserve(n);
  for (int d = 0; d < devices; ++d) {
    device_base_.push_back(static_cast<int32_t>(actions_.size()));
    const auto& list = schedule_.devices[static_cast<size_t>(d)];
    actions_.insert(actions_.end(), list.begin(), list.end());
    for (size_t i = 0; i < list.size(); ++i) {
      refs_.push_back({d, static_cast<int32_t>(i)});
      stream_of_.push_back(d * kStreamsPerDevice + static_cast<int>(stream_of(list[i].op)));
    }
  }
  device_base_.push_back(static_cast<int32_t>(actions_.size()));
  // Streams in CSR form; a stream keeps its actions in list order.
  group_by(
      actions_.size(), num_streams(), [&](size_t i) { return stream_of_[i]; }, index, stream_begin_,
      stream_actions_);
}

void CompiledSchedule::index_actions(Links& l, const std::string& origin) {
  const auto& sh = schedule_.shape;
  l.S = sh.num_stages;
  l.J = sh.micro_batches * sh.iterations;
  l.T = sh.iterations;
  l.E = static_cast<int>(sh.edges.size());
  group_by(
      sh.edges.size(), l.S, [&](size_t k) { return sh.edges[k].from; }, index, l.out_begin,
      l.out_edges);
  group_by(
      sh.edges.size(), l.S, [&](size_t k) { return sh.edges[k].to; }, index, l.in_begin,
      l.in_edges);
  const size_t R = at(sh.replicas), slots = R * at(l.S) * at(l.J);
  fwd_.assign(slots, -1);
  bwd_.assign(slots, -1);
  rec_.assign(slots, -1);
  wgt_.assign(slots, -1);
  l.sends.assign(R * at(l.E) * 2 * at(l.J), -1);
  l.recvs.assign(l.sends.size(), -1);
  l.copy_base.assign(at(l.S) + 1, 0);
  for (int s = 0; s < l.S; ++s) l.copy_base[at(s) + 1] = l.copy_base[at(s)] + sh.replicas_of(s);
  l.steps.assign(R * at(l.copy_base[at(l.S)]) * at(l.T), -1);
  l.bucket_base.assign(at(l.S) + 1, 0);
  for (int s = 0; s < l.S; ++s) {
    const size_t nb = sh.buckets.empty() ? 1 : sh.buckets[at(s)].size();
    l.bucket_base[at(s) + 1] = l.bucket_base[at(s)] + static_cast<int32_t>(nb);
  }
  for (int id = 0; id < num_actions(); ++id) index_action(l, id, origin);
  // The all-reduces of each (stage, step, bucket), in action order.
  group_by(
      l.ar_ids.size(), l.bucket_base[at(l.S)] * l.T, [&](size_t i) { return l.ar_keys[i]; },
      [&](size_t i) { return l.ar_ids[i]; }, l.ar_begin, l.ar_members);
}

void CompiledSchedule::check_fields(const Links& l, int id, const std::string& origin) const {
  const auto& sh = schedule_.shape;
  const Action& a = action(id);
  const int local = device(id) % sh.devices_per_replica;
  if (a.stage < 0 || a.stage >= l.S) {
    fail(id, origin, fmt::format("stage {} out of range 0..{}", a.stage, l.S - 1));
  }
  const bool needs_mb = a.op != Op::kOptimizerStep;
  if (needs_mb && (a.micro_batch < 0 || a.micro_batch >= l.J)) {
    fail(id, origin, fmt::format("micro-batch {} out of range 0..{}", a.micro_batch, l.J - 1));
  }
  if (needs_mb && a.step != a.micro_batch / sh.micro_batches) {
    fail(id, origin,
         fmt::format("step {} but micro-batch {} belongs to step {}", a.step, a.micro_batch,
                     a.micro_batch / sh.micro_batches));
  }
  if (a.step < 0 || a.step >= sh.iterations) {
    fail(id, origin, fmt::format("step {} out of range 0..{}", a.step, sh.iterations - 1));
  }
  if (!sh.hosts(local, a.stage)) {
    fail(id, origin,
         fmt::format("stage {} lives on device {} of its replica, not {}", a.stage,
                     sh.device_of(a.stage), local));
  }
  if (needs_mb && sh.device_of(a.stage, a.micro_batch) != local) {
    fail(id, origin,
         fmt::format("stage {} runs micro-batch {} on device {} of its replica, not {}", a.stage,
                     a.micro_batch, sh.device_of(a.stage, a.micro_batch), local));
  }
}

void CompiledSchedule::index_action(Links& l, int id, const std::string& origin) {
  check_fields(l, id, origin);
  const auto& sh = schedule_.shape;
  const Action& a = action(id);
  const int dev = device(id), rep = dev / sh.devices_per_replica;
  const int local = dev % sh.devices_per_replica;
  switch (a.op) {
    case Op::kForward:
    case Op::kBackward:
    case Op::kBackwardInput:
    case Op::kBackwardWeight:
    case Op::kRecompute: {
      auto& table = a.op == Op::kForward          ? fwd_
                    : is_input_backward(a.op)     ? bwd_
                    : a.op == Op::kBackwardWeight ? wgt_
                                                  : rec_;
      const char* what = a.op == Op::kForward          ? "forwarded"
                         : is_input_backward(a.op)     ? "backwarded"
                         : a.op == Op::kBackwardWeight ? "weight-backwarded"
                                                       : "recomputed";
      auto& cell = table[slot(rep, a.stage, a.micro_batch)];
      if (cell >= 0) {
        fail(id, origin,
             fmt::format("micro-batch {} {} twice on stage {}", a.micro_batch, what, a.stage));
      }
      cell = id;
      break;
    }
    case Op::kSend:
    case Op::kRecv: {
      if (a.peer_stage < 0 || a.peer_stage >= l.S) fail(id, origin, "peer stage out of range");
      if (sh.device_of(a.peer_stage, a.micro_batch) == local) {
        fail(id, origin, "transfer between stages of one device");
      }
      const bool act = a.payload == Payload::kActivation;
      const bool sending = a.op == Op::kSend;
      // Producer and consumer of the tensor along the forward edge.
      const int from = (act == sending) ? a.stage : a.peer_stage;
      const int to = (act == sending) ? a.peer_stage : a.stage;
      if (a.payload == Payload::kNone) fail(id, origin, "transfer without a payload");
      const int e = l.edge(sh.edges, from, to);
      if (e < 0) fail(id, origin, fmt::format("no stage edge {}->{}", from, to));
      auto& cell = (sending ? l.sends : l.recvs)[l.transfer(rep, e, act, a.micro_batch)];
      if (cell >= 0) fail(id, origin, "transfer appears twice");
      cell = id;
      break;
    }
    case Op::kAllReduce: {
      if (sh.gradient_copies(a.stage) < 2) {
        fail(id, origin, "all-reduce of a stage with one copy of its gradients");
      }
      const int nb = l.buckets(a.stage);
      if (a.bucket < 0 || a.bucket >= nb) {
        fail(id, origin,
             fmt::format("bucket {} out of range (stage {} has {})", a.bucket, a.stage, nb));
      }
      l.ar_ids.push_back(id);
      l.ar_keys.push_back(l.allreduce_key(a));
      break;
    }
    case Op::kOptimizerStep: {
      auto& cell = l.steps[l.step(rep, a.stage, sh.stage_replica(a.stage, local), a.step)];
      if (cell >= 0) {
        fail(id, origin, fmt::format("stage {} steps twice in step {}", a.stage, a.step));
      }
      cell = id;
      break;
    }
    case Op::kTensorParallel:
      fail(id, origin, "tensor-parallel collectives are timeline events, not schedule actions");
  }
}

void CompiledSchedule::check_complete(const Links& l, const std::string& origin) const {
  const auto& sh = schedule_.shape;
  for (int rep = 0; rep < sh.replicas; ++rep) {
    for (int s = 0; s < l.S; ++s) {
      for (int mb = 0; mb < l.J; ++mb) {
        const int dev = rep * sh.devices_per_replica + sh.device_of(s, mb);
        const int32_t f = forward_of(rep, s, mb), b = backward_of(rep, s, mb);
        const int32_t r = recompute_of(rep, s, mb);
        if (f < 0 || b < 0) {
          throw InputError(fmt::format("{}: device {}: stage {} micro-batch {} is never {}", origin,
                                       dev, s, mb, f < 0 ? "forwarded" : "backwarded"));
        }
        if (b < f) fail(b, origin, "backward before its forward");
        if (r >= 0 && (r < f || r > b)) fail(r, origin, "recompute outside its forward..backward");
        const int32_t w = weight_backward_of(rep, s, mb);
        const bool split = action(b).op == Op::kBackwardInput;
        if (split && w < 0) fail(b, origin, "input-gradient backward without its weight backward");
        if (!split && w >= 0) fail(w, origin, "weight backward without an input backward");
        if (w >= 0 && w < b) fail(w, origin, "weight backward before its input backward");
      }
      check_steps(l, rep, s, origin);
    }
  }
}

void CompiledSchedule::check_steps(const Links& l, int rep, int s,
                                   const std::string& origin) const {
  const auto& sh = schedule_.shape;
  for (int k = 0; k < sh.replicas_of(s); ++k) {
    const int dev = rep * sh.devices_per_replica + sh.device_of(s) + k;
    for (int t = 0; t < l.T; ++t) {
      const int32_t step = l.steps[l.step(rep, s, k, t)];
      if (step < 0) {
        throw InputError(fmt::format("{}: device {}: stage {} never takes optimizer step {}",
                                     origin, dev, s, t));
      }
      // The replica's micro-batches of the step (all of them when the stage is not replicated).
      for (int i = 0; i < sh.micro_batches; ++i) {
        const int mb = t * sh.micro_batches + i;
        if (sh.device_of(s, mb) != sh.device_of(s) + k) continue;
        if (release_of(rep, s, mb) > step) {
          fail(step, origin,
               fmt::format("optimizer step before the backward of micro-batch {}", mb));
        }
      }
    }
  }
}

void CompiledSchedule::link_transfers(Links& l, const std::string& origin) {
  const auto& sh = schedule_.shape;
  const int n = num_actions();
  group_of_.assign(at(n), -1);
  group_begin_.assign(1, 0);
  // Sends depend on the action that produced their tensor. Send/recv groups are numbered in the
  // order of their recvs.
  for (int id = 0; id < n; ++id) {
    const Action& a = action(id);
    if (a.op == Op::kSend) {
      const auto& table = a.payload == Payload::kActivation ? fwd_ : bwd_;
      l.depend(id, table[slot(replica(id), a.stage, a.micro_batch)]);
    }
    if (a.op != Op::kRecv) continue;
    const bool act = a.payload == Payload::kActivation;
    const int from = act ? a.peer_stage : a.stage, to = act ? a.stage : a.peer_stage;
    const int32_t send =
        l.sends[l.transfer(replica(id), l.edge(sh.edges, from, to), act, a.micro_batch)];
    if (send < 0) fail(id, origin, "no matching send on the peer");
    const auto g = static_cast<int32_t>(group_begin_.size()) - 1;
    group_of_[at(send)] = group_of_[at(id)] = g;
    group_members_.push_back(send);
    group_members_.push_back(id);
    group_begin_.push_back(static_cast<int32_t>(group_members_.size()));
  }
  for (int id = 0; id < n; ++id) {
    if (action(id).op == Op::kSend && group_of_[at(id)] < 0) {
      fail(id, origin, "no matching recv on the peer");
    }
  }
}

void CompiledSchedule::link_compute(Links& l, const std::string& origin) const {
  const auto& sh = schedule_.shape;
  for (int id = 0; id < num_actions(); ++id) {
    const Action& a = action(id);
    if (stream_of(a.op) == StreamKind::kSend || stream_of(a.op) == StreamKind::kRecv) continue;
    const int rep = replica(id), local = device(id) % sh.devices_per_replica;
    const int mb = a.micro_batch;
    auto need = [&](int32_t pred, const char* what) {
      if (pred < 0) fail(id, origin, fmt::format("needs {} which the schedule lacks", what));
      l.depend(id, pred);
    };
    auto recv_of = [&](bool act, int from, int to) {
      const int e = l.edge(sh.edges, from, to);
      return e < 0 ? -1 : l.recvs[l.transfer(rep, e, act, mb)];
    };
    if (a.op == Op::kForward) {
      for (int32_t k = l.in_begin[at(a.stage)]; k < l.in_begin[at(a.stage) + 1]; ++k) {
        const int from = sh.edges[at(l.in_edges[at(k)])].from;
        if (sh.device_of(from, mb) == local) {
          need(forward_of(rep, from, mb), "the forward of its input stage");
        } else {
          need(recv_of(true, from, a.stage), "a recv of its input activation");
        }
      }
    } else if (a.op == Op::kRecompute) {
      need(forward_of(rep, a.stage, mb), "its forward");
    } else if (a.op == Op::kBackwardWeight) {
      need(backward_of(rep, a.stage, mb), "its input backward");
    } else if (is_input_backward(a.op)) {
      need(forward_of(rep, a.stage, mb), "its forward");
      if (recompute_of(rep, a.stage, mb) >= 0) l.depend(id, recompute_of(rep, a.stage, mb));
      for (int32_t k = l.out_begin[at(a.stage)]; k < l.out_begin[at(a.stage) + 1]; ++k) {
        const int to = sh.edges[at(l.out_edges[at(k)])].to;
        if (sh.device_of(to, mb) == local) {
          need(backward_of(rep, to, mb), "the backward of its output stage");
        } else {
          need(recv_of(false, a.stage, to), "a recv of its output gradient");
        }
      }
    } else if (a.op == Op::kAllReduce) {
      const int32_t b = release_of(rep, a.stage, mb);
      if (action(b).step != a.step) {
        fail(id, origin, "all-reduce of a step after a backward of another step");
      }
      const int first = sh.buckets.empty() ? -1 : sh.buckets[at(a.stage)][at(a.bucket)].first_layer;
      l.depend(id, b, first);
    }
  }
}

void CompiledSchedule::link_allreduces(Links& l, const std::string& origin) {
  const auto& sh = schedule_.shape;
  // Every bucket is reduced once per replica (checked in the order of each bucket's first).
  for (size_t i = 0; i < l.ar_ids.size(); ++i) {
    const int32_t b = l.ar_begin[at(l.ar_keys[i])], e = l.ar_begin[at(l.ar_keys[i]) + 1];
    const int copies = sh.gradient_copies(action(l.ar_ids[i]).stage);
    if (l.ar_members[at(b)] == l.ar_ids[i] && e - b != copies) {
      fail(l.ar_ids[i], origin, fmt::format("all-reduce on {} of {} replicas", e - b, copies));
    }
  }
  // Optimizer steps wait for their all-reduces; all-reduce groups in action order.
  for (size_t i = 0; i < l.ar_ids.size(); ++i) {
    const int32_t id = l.ar_ids[i];
    const int32_t b = l.ar_begin[at(l.ar_keys[i])], e = l.ar_begin[at(l.ar_keys[i]) + 1];
    if (l.ar_members[at(b)] == id) {
      const auto g = static_cast<int32_t>(group_begin_.size()) - 1;
      for (int32_t k = b; k < e; ++k) {
        group_of_[at(l.ar_members[at(k)])] = g;
        group_members_.push_back(l.ar_members[at(k)]);
      }
      group_begin_.push_back(static_cast<int32_t>(group_members_.size()));
    }
    const Action& a = action(id);
    const int local = device(id) % sh.devices_per_replica;
    const int32_t step =
        l.steps[l.step(replica(id), a.stage, sh.stage_replica(a.stage, local), a.step)];
    if (step < id) fail(id, origin, "all-reduce after its optimizer step");
    l.depend(step, id);
  }
}

void CompiledSchedule::link_control(Links& l, const std::string& origin) const {
  auto check = [&](ActionRef r) {
    if (r.device < 0 || r.device >= num_devices() || r.index < 0 ||
        r.index >= device_base_[at(r.device) + 1] - device_base_[at(r.device)]) {
      throw InputError(
          fmt::format("{}: control dependency on action {} of device {}, which "
                      "does not exist",
                      origin, r.index, r.device));
    }
  };
  for (const auto& c : schedule_.control) {
    if (c.before.device != c.after.device) {
      throw InputError(fmt::format("{}: control dependency across devices {} and {}", origin,
                                   c.before.device, c.after.device));
    }
    check(c.before);
    check(c.after);
    l.depend(id(c.after), id(c.before));
  }
}

void CompiledSchedule::collect_deps(const Links& l) {
  // Each action keeps its dependencies in the order they were found.
  group_by(
      l.dep.size(), num_actions(), [&](size_t k) { return l.dep_of[k]; },
      [&](size_t k) { return l.dep[k]; }, dep_begin_, deps_);
}

}  // namespace pipetwin
