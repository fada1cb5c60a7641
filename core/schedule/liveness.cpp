#include "core/schedule/liveness.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

namespace pipetwin {

namespace {

size_t at(int i) {
  return static_cast<size_t>(i);
}

int recv_stream(int device) {
  return device * kStreamsPerDevice + static_cast<int>(StreamKind::kRecv);
}

// The compute action a Send sends the output of (its first dependency).
int producer_of_send(const CompiledSchedule& cs, int send) {
  return cs.deps(send)[0].pred;
}

// For every Send, the latest position in the receiving device's list that must be done before
// the tensor can be sent (-1: none), in one hop: the sender's compute has by then consumed the
// tensors the receiving device sent it, so their producers there are done. Longer chains of
// dependencies through third devices are left out, which can only make an arrival earlier (more
// held, never less). Indexed by action id; -1 for other actions.
std::vector<int32_t> earliest_sends(const CompiledSchedule& cs) {
  std::vector<int32_t> ready(at(cs.num_actions()), -1);
  std::vector<int32_t> done(at(cs.num_devices()), -1);  // per peer device: latest position needed
  for (int p = 0; p < cs.num_devices(); ++p) {
    const int first = cs.id({p, 0});
    const auto count = static_cast<int>(cs.schedule().devices[at(p)].size());
    std::vector<std::pair<int32_t, int32_t>> sends;  // (position of the producer, send)
    for (int id = first; id < first + count; ++id) {
      if (cs.action(id).op == Op::kSend)
        sends.push_back({cs.ref(producer_of_send(cs, id)).index, id});
    }
    std::sort(sends.begin(), sends.end());
    std::fill(done.begin(), done.end(), -1);
    size_t next = 0;
    for (int id = first; id < first + count; ++id) {
      if (stream_of(cs.action(id).op) != StreamKind::kCompute) continue;
      for (const Dependency& d : cs.deps(id)) {
        if (cs.action(d.pred).op != Op::kRecv) continue;
        const int producer = producer_of_send(cs, cs.group_members(cs.group(d.pred))[0]);
        int32_t& latest = done[at(cs.device(producer))];
        latest = std::max(latest, cs.ref(producer).index);
      }
      for (; next < sends.size() && sends[next].first <= cs.ref(id).index; ++next) {
        const int send = sends[next].second;
        ready[at(send)] = done[at(cs.device(cs.group_members(cs.group(send))[1]))];
      }
    }
  }
  return ready;
}

}  // namespace

Liveness::Liveness(const CompiledSchedule& cs)
    : cs_(cs), arrival_(at(cs.num_actions()), -1), consumer_(at(cs.num_actions()), -1) {
  for (int id = 0; id < cs.num_actions(); ++id) {
    if (stream_of(cs.action(id).op) != StreamKind::kCompute) continue;
    for (const Dependency& d : cs.deps(id))
      if (cs.action(d.pred).op == Op::kRecv) consumer_[at(d.pred)] = id;
  }
  const std::vector<int32_t> ready = earliest_sends(cs);
  for (int d = 0; d < cs.num_devices(); ++d) {
    int32_t arrival = -1;  // never before an earlier Recv of the stream
    for (const int32_t id : cs.stream_actions(recv_stream(d))) {
      arrival = std::max(arrival, ready[at(cs.group_members(cs.group(id))[0])]);
      arrival_[at(id)] = arrival;
    }
  }
}

Liveness::Liveness(const CompiledSchedule& cs, const std::vector<double>& start,
                   const std::vector<double>& end)
    : Liveness(cs) {
  for (int d = 0; d < cs.num_devices(); ++d) {
    // The device's compute actions run in list order on one stream: their ends never decrease.
    std::vector<std::pair<double, int32_t>> ends;  // (end, list index)
    const int first = cs.id({d, 0});
    const auto count = static_cast<int>(cs.schedule().devices[at(d)].size());
    for (int id = first; id < first + count; ++id)
      if (stream_of(cs.action(id).op) == StreamKind::kCompute)
        ends.push_back({end[at(id)], id - first});
    int32_t arrival = -1;  // never before an earlier Recv of the stream
    for (const int32_t id : cs.stream_actions(recv_stream(d))) {
      // The last compute action that ended by the time the copy starts: held from the next one.
      // (An action that ends as the copy starts counts as ended: the times are sums of durations
      // that can differ in the last bits.)
      const double when = start[at(id)] + 1e-9 * std::max(1.0, std::abs(start[at(id)]));
      const auto it =
          std::upper_bound(ends.begin(), ends.end(), std::pair<double, int32_t>{when, count});
      int32_t timed = it == ends.begin() ? -1 : std::prev(it)->second;
      // Zero-length actions can tie with the consumer: it still takes the tensor over.
      if (consumer_[at(id)] >= 0) timed = std::min(timed, consumer_[at(id)] - first - 1);
      arrival = std::max({arrival, arrival_[at(id)], timed});
      arrival_[at(id)] = arrival;
    }
  }
}

bool Liveness::keeps_graph(int forward) const {
  const Action& a = cs_.action(forward);
  return cs_.recompute_of(cs_.replica(forward), a.stage, a.micro_batch) < 0;
}

int Liveness::pinned_after_forward(int forward) const {
  const Action& a = cs_.action(forward);
  const int rec = cs_.recompute_of(cs_.replica(forward), a.stage, a.micro_batch);
  if (rec < 0) return a.version;
  const int v = cs_.action(rec).version;
  return v <= a.version ? v : -1;  // written already: a stash the recompute will read
}

std::span<const int32_t> Liveness::arrivals(int device) const {
  // Arrival positions never decrease along the receive stream.
  return cs_.stream_actions(recv_stream(device));
}

LivenessCursor::LivenessCursor(const Liveness& lv, int device)
    : lv_(lv),
      cs_(lv.schedule()),
      device_(device),
      replica_(device / cs_.shape().devices_per_replica),
      first_(cs_.id({device, 0})),
      count_(static_cast<int>(cs_.schedule().devices[at(device)].size())),
      mbs_(at(cs_.shape().micro_batches) * at(cs_.shape().iterations)),
      versions_(at(cs_.shape().iterations) + 1) {  // versions 0..iterations
  stages_ = cs_.shape().stages_on(device % cs_.shape().devices_per_replica);
  local_.assign(at(cs_.shape().num_stages), -1);
  for (size_t i = 0; i < stages_.size(); ++i) local_[at(stages_[i])] = static_cast<int>(i);
  forward_.assign(stages_.size() * mbs_, -1);
  built_.assign(stages_.size() * mbs_, -1);
  pin_.assign(stages_.size() * mbs_, -1);
  refs_.assign(stages_.size() * versions_, 0);
  referenced_.assign(stages_.size(), 0);
  current_.assign(stages_.size(), 0);
  graphs_.assign(stages_.size(), 0);
  held_.assign(at(count_), 0);
  finish_arrivals();
}

void LivenessCursor::finish_arrivals() {
  arrived_.clear();
  const std::span<const int32_t> recvs = lv_.arrivals(device_);
  for (; next_arrival_ < recvs.size() && lv_.arrives_after(recvs[next_arrival_]) <= position();
       ++next_arrival_) {
    const int32_t id = recvs[next_arrival_];
    held_[at(id - first_)] = 1;
    arrived_.push_back(id);
  }
}

std::span<const int32_t> LivenessCursor::start() {
  consumed_.clear();
  const int id = next_id();
  if (stream_of(cs_.action(id).op) != StreamKind::kCompute) return consumed_;
  for (const Dependency& d : cs_.deps(id)) {
    if (cs_.action(d.pred).op != Op::kRecv || !held_[at(d.pred - first_)]) continue;
    held_[at(d.pred - first_)] = 0;
    consumed_.push_back(d.pred);
  }
  return consumed_;
}

std::span<const int32_t> LivenessCursor::finish() {
  apply(next_id());
  ++next_;
  finish_arrivals();
  return arrived_;
}

void LivenessCursor::advance_through(int index) {
  while (!done() && next_ <= index) {
    start();
    finish();
  }
}

void LivenessCursor::pin(int stage, int mb, int version) {
  pin_[mb_slot(stage, mb)] = version;
  if (version < 0) return;
  const size_t li = local(stage);
  if (refs(stage, version)++ == 0) ++referenced_[li];
}

void LivenessCursor::unpin(int stage, int mb) {
  int32_t& v = pin_[mb_slot(stage, mb)];
  if (v >= 0 && --refs(stage, v) == 0) --referenced_[local(stage)];
  v = -1;
}

void LivenessCursor::apply(int id) {
  const Action& a = cs_.action(id);
  if (stream_of(a.op) != StreamKind::kCompute) return;
  const size_t li = local(a.stage);
  switch (a.op) {
    case Op::kForward: {
      const size_t s = mb_slot(a.stage, a.micro_batch);
      forward_[s] = id;
      ++in_flight_;
      if (lv_.keeps_graph(id)) {
        built_[s] = id;
        ++graphs_[li];
      }
      pin(a.stage, a.micro_batch, lv_.pinned_after_forward(id));
      break;
    }
    case Op::kRecompute: {
      int32_t& built = built_[mb_slot(a.stage, a.micro_batch)];
      if (built < 0) ++graphs_[li];
      built = id;
      unpin(a.stage, a.micro_batch);
      pin(a.stage, a.micro_batch, a.version);
      break;
    }
    case Op::kBackwardInput:  // a split backward keeps everything for its weight half
      break;
    case Op::kBackward:
    case Op::kBackwardWeight: {
      const size_t s = mb_slot(a.stage, a.micro_batch);
      if (built_[s] >= 0) --graphs_[li];
      built_[s] = -1;
      forward_[s] = -1;
      --in_flight_;
      unpin(a.stage, a.micro_batch);
      break;
    }
    case Op::kOptimizerStep:
      current_[li] = a.version;
      break;
    default:
      break;
  }
}

int LivenessCursor::versions_alive(int stage) const {
  const size_t li = local(stage);
  const bool current_pinned = refs_[li * versions_ + at(current_[li])] > 0;
  return referenced_[li] + (current_pinned ? 0 : 1);
}

bool LivenessCursor::pinned(int stage, int version) const {
  return refs_[local(stage) * versions_ + at(version)] > 0;
}

LiveSet LivenessCursor::live_set() const {
  LiveSet out;
  std::vector<int> freed(versions_);
  for (size_t li = 0; li < stages_.size(); ++li) {
    const int s = stages_[li];
    std::fill(freed.begin(), freed.end(), -1);
    for (size_t mb = 0; mb < mbs_; ++mb) {
      const size_t k = li * mbs_ + mb;
      if (forward_[k] < 0) continue;
      LiveMicroBatch m{.stage = s, .micro_batch = static_cast<int>(mb), .forward = forward_[k]};
      m.built_by = built_[k];
      m.graph_version = m.built_by >= 0 ? cs_.action(m.built_by).version : -1;
      m.pinned_version = pin_[k];
      m.freed_by = cs_.release_of(replica_, s, m.micro_batch);
      if (m.pinned_version >= 0)
        freed[at(m.pinned_version)] = std::max(freed[at(m.pinned_version)], m.freed_by);
      out.micro_batches.push_back(m);
    }
    for (size_t v = 0; v < versions_; ++v) {
      const int pins = refs_[li * versions_ + v];
      const bool current = static_cast<int>(v) == current_[li];
      if (pins == 0 && !current) continue;
      out.versions.push_back({.stage = s,
                              .version = static_cast<int>(v),
                              .current = current,
                              .pinned_by = pins,
                              .freed_by = current ? -1 : freed[v]});
    }
  }
  for (int i = 0; i < count_; ++i) {
    if (held_[at(i)]) out.received.push_back({first_ + i, lv_.consumer_of(first_ + i)});
  }
  return out;
}

LiveSet expected_after(const Liveness& lv, int device, int index) {
  LivenessCursor c(lv, device);
  c.advance_through(index);
  return c.live_set();
}

int most_graphs(const Liveness& lv, int device, int stage) {
  LivenessCursor c(lv, device);
  int most = 0;
  while (!c.done()) {
    c.start();
    c.finish();
    most = std::max(most, c.graphs(stage));
  }
  return most;
}

}  // namespace pipetwin
