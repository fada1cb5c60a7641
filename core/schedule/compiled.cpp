#include "core/schedule/compiled.hpp"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

namespace {

// Packs (replica, payload, from, to, mb) or similar small tuples into one map key.
uint64_t pack(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e) {
  return (a << 52) ^ (b << 48) ^ (c << 34) ^ (d << 20) ^ e;
}

}  // namespace

CompiledSchedule::CompiledSchedule(Schedule schedule, const std::string& origin)
    : schedule_(std::move(schedule)) {
  schedule_.shape.normalize(origin);
  const auto& sh = schedule_.shape;
  if (schedule_.num_devices() != sh.devices_per_replica * sh.replicas) {
    throw InputError(fmt::format("{}: {} device lists for {} devices x {} replicas", origin,
                                 schedule_.num_devices(), sh.devices_per_replica, sh.replicas));
  }
  flatten();
  link(origin);
  check_versions(origin);
  check_progress(origin);
}

int CompiledSchedule::id(ActionRef r) const {
  return device_base_[static_cast<size_t>(r.device)] + r.index;
}

void CompiledSchedule::flatten() {
  const int devices = schedule_.num_devices();
  for (int d = 0; d < devices; ++d) {
    device_base_.push_back(static_cast<int32_t>(actions_.size()));
    const auto& list = schedule_.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < list.size(); ++i) {
      actions_.push_back(list[i]);
      refs_.push_back({d, static_cast<int32_t>(i)});
      stream_of_.push_back(d * kStreamsPerDevice + static_cast<int>(stream_of(list[i].op)));
    }
  }
  device_base_.push_back(static_cast<int32_t>(actions_.size()));
  // Streams in CSR form; a stream keeps its actions in list order.
  const int streams = num_streams();
  stream_begin_.assign(static_cast<size_t>(streams) + 1, 0);
  for (int32_t s : stream_of_) ++stream_begin_[static_cast<size_t>(s) + 1];
  for (int s = 0; s < streams; ++s) {
    stream_begin_[static_cast<size_t>(s) + 1] += stream_begin_[static_cast<size_t>(s)];
  }
  std::vector<int32_t> fill(stream_begin_.begin(), stream_begin_.end() - 1);
  stream_actions_.resize(actions_.size());
  for (int32_t id = 0; id < static_cast<int32_t>(actions_.size()); ++id) {
    stream_actions_[static_cast<size_t>(fill[static_cast<size_t>(stream_of_[static_cast<size_t>(id)])]++)] = id;
  }
}

void CompiledSchedule::link(const std::string& origin) {
  const auto& sh = schedule_.shape;
  const int S = sh.num_stages, J = sh.micro_batches * sh.iterations, per = sh.devices_per_replica;
  const int n = num_actions();
  auto fail = [&](int id, const std::string& what) -> void {
    const auto r = ref(id);
    throw InputError(fmt::format("{}: device {} action {} ({}): {}", origin, r.device, r.index,
                                 describe(action(id)), what));
  };
  auto has_edge = [&](int from, int to) {
    for (const auto& e : sh.edges) {
      if (e.from == from && e.to == to) return true;
    }
    return false;
  };
  // Index of F/B/R per (replica, stage, mb).
  const size_t slots = static_cast<size_t>(sh.replicas) * S * J;
  std::vector<int32_t> fwd(slots, -1), bwd(slots, -1), rec(slots, -1);
  auto slot = [&](int replica, int stage, int mb) {
    return (static_cast<size_t>(replica) * S + static_cast<size_t>(stage)) * J + static_cast<size_t>(mb);
  };
  std::unordered_map<uint64_t, int32_t> sends, recvs, steps;
  std::unordered_map<uint64_t, std::vector<int32_t>> allreduce;  // (stage, step, bucket) -> ids
  for (int id = 0; id < n; ++id) {
    const Action& a = action(id);
    const int dev = device(id), rep = dev / per, local = dev % per;
    if (a.stage < 0 || a.stage >= S) fail(id, fmt::format("stage {} out of range 0..{}", a.stage, S - 1));
    const bool needs_mb = a.op != Op::kOptimizerStep;
    if (needs_mb && (a.micro_batch < 0 || a.micro_batch >= J)) {
      fail(id, fmt::format("micro-batch {} out of range 0..{}", a.micro_batch, J - 1));
    }
    if (needs_mb && a.step != a.micro_batch / sh.micro_batches) {
      fail(id, fmt::format("step {} but micro-batch {} belongs to step {}", a.step, a.micro_batch,
                           a.micro_batch / sh.micro_batches));
    }
    if (a.step < 0 || a.step >= sh.iterations) {
      fail(id, fmt::format("step {} out of range 0..{}", a.step, sh.iterations - 1));
    }
    if (sh.device_of(a.stage) != local) {
      fail(id, fmt::format("stage {} lives on device {} of its replica, not {}", a.stage,
                           sh.device_of(a.stage), local));
    }
    auto unique = [&](std::vector<int32_t>& table, const char* what) {
      auto& cell = table[slot(rep, a.stage, a.micro_batch)];
      if (cell >= 0) fail(id, fmt::format("micro-batch {} {} twice on stage {}", a.micro_batch, what, a.stage));
      cell = id;
    };
    switch (a.op) {
      case Op::kForward: unique(fwd, "forwarded"); break;
      case Op::kBackward: unique(bwd, "backwarded"); break;
      case Op::kRecompute: unique(rec, "recomputed"); break;
      case Op::kSend:
      case Op::kRecv: {
        if (a.peer_stage < 0 || a.peer_stage >= S) fail(id, "peer stage out of range");
        if (sh.device_of(a.peer_stage) == local) fail(id, "transfer between stages of one device");
        const bool act = a.payload == Payload::kActivation;
        const bool sending = a.op == Op::kSend;
        // Producer and consumer of the tensor along the forward edge.
        const int from = (act == sending) ? a.stage : a.peer_stage;
        const int to = (act == sending) ? a.peer_stage : a.stage;
        if (a.payload == Payload::kNone) fail(id, "transfer without a payload");
        if (!has_edge(from, to)) fail(id, fmt::format("no stage edge {}->{}", from, to));
        auto& table = sending ? sends : recvs;
        const uint64_t key = pack(static_cast<uint64_t>(rep), act ? 1 : 2, static_cast<uint64_t>(from),
                                  static_cast<uint64_t>(to), static_cast<uint64_t>(a.micro_batch));
        if (!table.emplace(key, id).second) fail(id, "transfer appears twice");
        break;
      }
      case Op::kAllReduce: {
        if (sh.replicas < 2) fail(id, "all-reduce without data parallelism");
        const size_t nb = sh.buckets.empty() ? 1 : sh.buckets[static_cast<size_t>(a.stage)].size();
        if (a.bucket < 0 || static_cast<size_t>(a.bucket) >= nb) {
          fail(id, fmt::format("bucket {} out of range (stage {} has {})", a.bucket, a.stage, nb));
        }
        allreduce[pack(0, 0, static_cast<uint64_t>(a.stage), static_cast<uint64_t>(a.step),
                       static_cast<uint64_t>(a.bucket))]
            .push_back(id);
        break;
      }
      case Op::kOptimizerStep: {
        const uint64_t key = pack(static_cast<uint64_t>(rep), 0, static_cast<uint64_t>(a.stage),
                                  static_cast<uint64_t>(a.step), 0);
        if (!steps.emplace(key, id).second) fail(id, fmt::format("stage {} steps twice in step {}", a.stage, a.step));
        break;
      }
    }
  }
  // Completeness and per-stage program order.
  for (int rep = 0; rep < sh.replicas; ++rep) {
    for (int s = 0; s < S; ++s) {
      const int dev = rep * per + sh.device_of(s);
      for (int mb = 0; mb < J; ++mb) {
        const int32_t f = fwd[slot(rep, s, mb)], b = bwd[slot(rep, s, mb)], r = rec[slot(rep, s, mb)];
        if (f < 0 || b < 0) {
          throw InputError(fmt::format("{}: device {}: stage {} micro-batch {} is never {}", origin,
                                       dev, s, mb, f < 0 ? "forwarded" : "backwarded"));
        }
        if (b < f) fail(b, "backward before its forward");
        if (r >= 0 && (r < f || r > b)) fail(r, "recompute outside its forward..backward");
      }
      for (int t = 0; t < sh.iterations; ++t) {
        const uint64_t key = pack(static_cast<uint64_t>(rep), 0, static_cast<uint64_t>(s),
                                  static_cast<uint64_t>(t), 0);
        auto it = steps.find(key);
        if (it == steps.end()) {
          throw InputError(fmt::format("{}: device {}: stage {} never takes optimizer step {}",
                                       origin, dev, s, t));
        }
        for (int i = 0; i < sh.micro_batches; ++i) {
          if (bwd[slot(rep, s, t * sh.micro_batches + i)] > it->second) {
            fail(it->second, fmt::format("optimizer step before the backward of micro-batch {}",
                                         t * sh.micro_batches + i));
          }
        }
      }
    }
  }
  // Dependencies and rendezvous groups.
  std::vector<std::vector<Dependency>> deps(static_cast<size_t>(n));
  group_of_.assign(static_cast<size_t>(n), -1);
  group_begin_.assign(1, 0);
  auto add_group = [&](std::initializer_list<int32_t> members) {
    const auto g = static_cast<int32_t>(group_begin_.size()) - 1;
    for (int32_t m : members) {
      group_of_[static_cast<size_t>(m)] = g;
      group_members_.push_back(m);
    }
    group_begin_.push_back(static_cast<int32_t>(group_members_.size()));
  };
  // Sends depend on the action that produced their tensor.
  for (int id = 0; id < n; ++id) {
    const Action& a = action(id);
    if (a.op != Op::kSend) continue;
    const auto& table = a.payload == Payload::kActivation ? fwd : bwd;
    deps[static_cast<size_t>(id)].push_back({table[slot(replica(id), a.stage, a.micro_batch)], -1});
  }
  // Deterministic group numbering: walk recvs in action order.
  for (int id = 0; id < n; ++id) {
    const Action& a = action(id);
    if (a.op != Op::kRecv) continue;
    const bool act = a.payload == Payload::kActivation;
    const int from = act ? a.peer_stage : a.stage, to = act ? a.stage : a.peer_stage;
    auto it = sends.find(pack(static_cast<uint64_t>(replica(id)), act ? 1 : 2,
                              static_cast<uint64_t>(from), static_cast<uint64_t>(to),
                              static_cast<uint64_t>(a.micro_batch)));
    if (it == sends.end()) fail(id, "no matching send on the peer");
    add_group({it->second, id});
  }
  for (int id = 0; id < n; ++id) {
    if (action(id).op == Op::kSend && group_of_[static_cast<size_t>(id)] < 0) {
      fail(id, "no matching recv on the peer");
    }
  }
  for (int id = 0; id < n; ++id) {
    const Action& a = action(id);
    const int rep = replica(id), dev = device(id), local = dev % per;
    auto& d = deps[static_cast<size_t>(id)];
    auto need = [&](int32_t pred, const char* what) {
      if (pred < 0) fail(id, fmt::format("needs {} which the schedule lacks", what));
      d.push_back({pred, -1});
    };
    auto recv_of = [&](Payload p, int from, int to) {
      auto it = recvs.find(pack(static_cast<uint64_t>(rep), p == Payload::kActivation ? 1 : 2,
                                static_cast<uint64_t>(from), static_cast<uint64_t>(to),
                                static_cast<uint64_t>(a.micro_batch)));
      return it == recvs.end() ? -1 : it->second;
    };
    switch (a.op) {
      case Op::kForward:
        for (const auto& e : sh.edges) {
          if (e.to != a.stage) continue;
          if (sh.device_of(e.from) == local) {
            need(fwd[slot(rep, e.from, a.micro_batch)], "the forward of its input stage");
          } else {
            need(recv_of(Payload::kActivation, e.from, a.stage), "a recv of its input activation");
          }
        }
        break;
      case Op::kRecompute:
        need(fwd[slot(rep, a.stage, a.micro_batch)], "its forward");
        break;
      case Op::kBackward:
        need(fwd[slot(rep, a.stage, a.micro_batch)], "its forward");
        if (rec[slot(rep, a.stage, a.micro_batch)] >= 0) d.push_back({rec[slot(rep, a.stage, a.micro_batch)], -1});
        for (const auto& e : sh.edges) {
          if (e.from != a.stage) continue;
          if (sh.device_of(e.to) == local) {
            need(bwd[slot(rep, e.to, a.micro_batch)], "the backward of its output stage");
          } else {
            need(recv_of(Payload::kGradient, a.stage, e.to), "a recv of its output gradient");
          }
        }
        break;
      case Op::kAllReduce: {
        const int32_t b = bwd[slot(rep, a.stage, a.micro_batch)];
        const Action& ba = action(b);
        if (ba.step != a.step) fail(id, "all-reduce of a step after a backward of another step");
        const int first = sh.buckets.empty() ? -1
                              : sh.buckets[static_cast<size_t>(a.stage)][static_cast<size_t>(a.bucket)].first_layer;
        d.push_back({b, first});
        break;
      }
      case Op::kOptimizerStep:
        break;
      default:
        break;
    }
  }
  for (auto& [key, ids] : allreduce) {
    std::sort(ids.begin(), ids.end());
    if (static_cast<int>(ids.size()) != sh.replicas) {
      fail(ids.front(), fmt::format("all-reduce on {} of {} replicas", ids.size(), sh.replicas));
    }
  }
  // Optimizer steps wait for their all-reduces; all-reduce groups in action order.
  for (int id = 0; id < n; ++id) {
    const Action& a = action(id);
    if (a.op != Op::kAllReduce) continue;
    const auto& ids = allreduce[pack(0, 0, static_cast<uint64_t>(a.stage),
                                     static_cast<uint64_t>(a.step), static_cast<uint64_t>(a.bucket))];
    if (ids.front() == id) {
      const auto g = static_cast<int32_t>(group_begin_.size()) - 1;
      for (int32_t m : ids) {
        group_of_[static_cast<size_t>(m)] = g;
        group_members_.push_back(m);
      }
      group_begin_.push_back(static_cast<int32_t>(group_members_.size()));
    }
    auto it = steps.find(pack(static_cast<uint64_t>(replica(id)), 0, static_cast<uint64_t>(a.stage),
                              static_cast<uint64_t>(a.step), 0));
    if (it->second < id) fail(id, "all-reduce after its optimizer step");
    deps[static_cast<size_t>(it->second)].push_back({id, -1});
  }
  for (const auto& c : schedule_.control) {
    if (c.before.device != c.after.device) {
      throw InputError(fmt::format("{}: control dependency across devices {} and {}", origin,
                                   c.before.device, c.after.device));
    }
    deps[static_cast<size_t>(id(c.after))].push_back({id(c.before), -1});
  }
  dep_begin_.assign(1, 0);
  for (auto& list : deps) {
    for (const auto& dep : list) deps_.push_back(dep);
    dep_begin_.push_back(static_cast<int32_t>(deps_.size()));
  }
}

void CompiledSchedule::check_versions(const std::string& origin) const {
  const auto& sh = schedule_.shape;
  for (int d = 0; d < num_devices(); ++d) {
    std::vector<int32_t> current(static_cast<size_t>(sh.num_stages), 0);
    std::unordered_map<uint64_t, int32_t> forward_version;
    const auto& list = schedule_.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      auto& cur = current[static_cast<size_t>(a.stage)];
      const uint64_t key = (static_cast<uint64_t>(a.stage) << 32) | static_cast<uint32_t>(a.micro_batch);
      int32_t expect = -1;
      switch (a.op) {
        case Op::kForward:
          expect = cur;
          forward_version[key] = cur;
          break;
        case Op::kBackward:
        case Op::kRecompute:
          expect = schedule_.stashes_weights ? forward_version[key] : cur;
          break;
        case Op::kOptimizerStep:
          expect = ++cur;
          break;
        default:
          continue;
      }
      if (a.version != expect) {
        throw InputError(fmt::format("{}: device {} action {} ({}): declares weight version {} but "
                                     "the order gives {}",
                                     origin, d, i, describe(a), a.version, expect));
      }
    }
  }
}

void CompiledSchedule::check_progress(const std::string& origin) const {
  // Timeless run: every action completes the moment it can start. Stuck actions mean deadlock.
  const int n = num_actions();
  std::vector<int32_t> pending(static_cast<size_t>(n));
  std::vector<std::vector<int32_t>> dependents(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    pending[static_cast<size_t>(id)] = static_cast<int32_t>(deps(id).size());
    for (const auto& d : deps(id)) dependents[static_cast<size_t>(d.pred)].push_back(id);
  }
  std::vector<int32_t> head(static_cast<size_t>(num_streams()), 0);
  std::vector<int32_t> group_ready(static_cast<size_t>(std::max(0, num_groups())), 0);
  std::vector<char> ready(static_cast<size_t>(n), 0), done(static_cast<size_t>(n), 0);
  std::vector<int32_t> work;
  for (int s = 0; s < num_streams(); ++s) {
    if (!stream_actions(s).empty()) work.push_back(stream_actions(s)[0]);
  }
  int completed = 0;
  auto at_head = [&](int id) {
    const auto acts = stream_actions(stream(id));
    const auto h = static_cast<size_t>(head[static_cast<size_t>(stream(id))]);
    return h < acts.size() && acts[h] == id;
  };
  auto complete = [&](int id) {
    done[static_cast<size_t>(id)] = 1;
    ++completed;
    const auto s = static_cast<size_t>(stream(id));
    ++head[s];
    const auto acts = stream_actions(static_cast<int>(s));
    if (static_cast<size_t>(head[s]) < acts.size()) work.push_back(acts[static_cast<size_t>(head[s])]);
    for (int32_t dep : dependents[static_cast<size_t>(id)]) {
      if (--pending[static_cast<size_t>(dep)] == 0) work.push_back(dep);
    }
  };
  while (!work.empty()) {
    const int id = work.back();
    work.pop_back();
    if (done[static_cast<size_t>(id)] || ready[static_cast<size_t>(id)] ||
        pending[static_cast<size_t>(id)] > 0 || !at_head(id)) {
      continue;
    }
    const int g = group(id);
    if (g < 0) {
      complete(id);
      continue;
    }
    ready[static_cast<size_t>(id)] = 1;
    const auto members = group_members(g);
    if (++group_ready[static_cast<size_t>(g)] == static_cast<int32_t>(members.size())) {
      for (int32_t m : members) complete(m);
    }
  }
  if (completed == n) return;
  std::string stuck;
  int shown = 0;
  for (int s = 0; s < num_streams() && shown < 4; ++s) {
    const auto acts = stream_actions(s);
    const auto h = static_cast<size_t>(head[static_cast<size_t>(s)]);
    if (h >= acts.size()) continue;
    stuck += fmt::format("{}device {} {} stream waits at action {} ({})", shown ? "; " : "",
                         s / kStreamsPerDevice, stream_name(static_cast<StreamKind>(s % kStreamsPerDevice)),
                         ref(acts[h]).index, describe(action(acts[h])));
    ++shown;
  }
  throw InputError(fmt::format("{}: schedule deadlocks after {} of {} actions: {}", origin,
                               completed, n, stuck));
}

}  // namespace pipetwin
