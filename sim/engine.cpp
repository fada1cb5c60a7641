#include "sim/engine.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace pipetwin::sim {

namespace {

constexpr uint8_t kTaskEnd = 0;
constexpr uint8_t kEdgeReady = 1;     // id: the dependent task
constexpr uint8_t kNetworkCheck = 2;  // a flow may have sent its bytes

}  // namespace

void TaskGraph::prepare() {
  const int n = num_tasks();
  out_begin.assign(static_cast<size_t>(n) + 1, 0);
  early_begin.assign(static_cast<size_t>(n) + 1, 0);
  for (size_t k = 0; k < dep_pred.size(); ++k) {
    auto& begin = dep_offset[k] >= 0 ? early_begin : out_begin;
    ++begin[static_cast<size_t>(dep_pred[k]) + 1];
  }
  for (size_t i = 0; i < static_cast<size_t>(n); ++i) {
    out_begin[i + 1] += out_begin[i];
    early_begin[i + 1] += early_begin[i];
  }
  out_task.assign(static_cast<size_t>(out_begin.back()), 0);
  early_task.assign(static_cast<size_t>(early_begin.back()), 0);
  early_offset.assign(early_task.size(), 0);
  std::vector<int32_t> fill(out_begin.begin(), out_begin.end() - 1);
  std::vector<int32_t> early_fill(early_begin.begin(), early_begin.end() - 1);
  for (int t = 0; t < n; ++t) {
    for (int32_t k = dep_begin[static_cast<size_t>(t)]; k < dep_begin[static_cast<size_t>(t) + 1];
         ++k) {
      const auto p = static_cast<size_t>(dep_pred[static_cast<size_t>(k)]);
      const double offset = dep_offset[static_cast<size_t>(k)];
      if (offset >= 0) {
        const auto slot = static_cast<size_t>(early_fill[p]++);
        early_task[slot] = t;
        early_offset[slot] = offset;
      } else {
        out_task[static_cast<size_t>(fill[p]++)] = t;
      }
    }
  }
}

void Engine::reset(const TaskGraph& g, std::vector<double>& start, std::vector<double>& end) {
  const int n = g.num_tasks();
  start.assign(static_cast<size_t>(n), 0);
  end.assign(static_cast<size_t>(n), 0);
  start_ = &start;
  end_ = &end;
  pending_.resize(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) {
    pending_[static_cast<size_t>(t)] =
        g.dep_begin[static_cast<size_t>(t) + 1] - g.dep_begin[static_cast<size_t>(t)];
  }
  head_.assign(static_cast<size_t>(g.num_streams), 0);
  busy_.assign(static_cast<size_t>(g.num_streams), 0);
  ready_.assign(static_cast<size_t>(n), 0);
  group_ready_.assign(g.group_begin.empty() ? 0 : g.group_begin.size() - 1, 0);
  queue_.clear();
  if (!g.cold_extra.empty()) {
    if (g.cold_extra.size() != g.cold_waits.size() * static_cast<size_t>(n)) {
      throw std::invalid_argument(fmt::format("cold_extra holds {} figures, {} expected",
                                              g.cold_extra.size(),
                                              g.cold_waits.size() * static_cast<size_t>(n)));
    }
    last_end_.assign(static_cast<size_t>(g.num_streams), 0.0);
    scale_.assign(static_cast<size_t>(n), 1.0);
  } else {
    scale_.clear();
  }
  reset_locks(g);
  reset_network(g);
  if (!g.stream_share.empty()) {
    int shares = 0;
    for (int32_t sh : g.stream_share) shares = std::max(shares, sh + 1);
    running_.assign(static_cast<size_t>(shares), {});
    left_.assign(static_cast<size_t>(n), 1.0);
    since_.assign(static_cast<size_t>(n), 0.0);
    rate_.assign(static_cast<size_t>(n), 0.0);
    epoch_.assign(static_cast<size_t>(n), 0);
  }
}

void Engine::reset_locks(const TaskGraph& g) {
  int locks = 0;
  for (size_t t = 0; t < g.lock.size(); ++t) {
    if (g.lock[t] >= 0 && g.group[t] >= 0)
      throw std::invalid_argument(fmt::format("task {} holds a lock and is in a rendezvous", t));
    locks = std::max(locks, g.lock[t] + 1);
  }
  if (!g.lock.empty() && g.lock.size() != static_cast<size_t>(g.num_tasks())) {
    throw std::invalid_argument(
        fmt::format("lock holds {} tasks, {} expected", g.lock.size(), g.num_tasks()));
  }
  lock_holder_.assign(static_cast<size_t>(locks), -1);
  lock_waiters_.assign(static_cast<size_t>(locks), {});
  lock_queued_.assign(g.lock.size(), 0);
}

bool Engine::take_lock(const TaskGraph& g, int32_t task) {
  const auto t = static_cast<size_t>(task);
  if (g.lock.empty() || g.lock[t] < 0) return true;
  const auto l = static_cast<size_t>(g.lock[t]);
  if (lock_holder_[l] < 0) {
    lock_holder_[l] = task;
    return true;
  }
  if (!lock_queued_[t]) {
    lock_queued_[t] = 1;
    lock_waiters_[l].push_back(task);
  }
  return false;
}

void Engine::release_lock(const TaskGraph& g, int32_t task, double now) {
  const auto t = static_cast<size_t>(task);
  if (g.lock.empty() || g.lock[t] < 0) return;
  const auto l = static_cast<size_t>(g.lock[t]);
  lock_holder_[l] = -1;
  auto& waiters = lock_waiters_[l];
  if (waiters.empty()) return;
  const int32_t next = waiters.front();
  waiters.erase(waiters.begin());
  lock_queued_[static_cast<size_t>(next)] = 0;
  try_start(g, next, now);  // it was ready and still heads its idle stream: it starts
}

void Engine::run(const TaskGraph& g, std::vector<double>& start, std::vector<double>& end) {
  reset(g, start, end);
  for (int s = 0; s < g.num_streams; ++s) {
    const int32_t b = g.stream_begin[static_cast<size_t>(s)];
    if (b < g.stream_begin[static_cast<size_t>(s) + 1])
      try_start(g, g.stream_tasks[static_cast<size_t>(b)], 0);
  }
  int completed = 0;
  while (!queue_.empty()) {
    const Event e = queue_.pop();
    if (e.kind == kEdgeReady) {
      if (--pending_[static_cast<size_t>(e.id)] == 0) try_start(g, e.id, e.time);
      continue;
    }
    if (e.kind == kNetworkCheck) {
      if (e.epoch != net_epoch_) continue;  // superseded by an earlier check
      net_check_at_ = std::numeric_limits<double>::infinity();
      network_due(g, e.time);
      continue;
    }
    const auto task = static_cast<size_t>(e.id);
    const int share = share_of(g, e.id);
    if (share >= 0) {
      if (e.epoch != epoch_[task]) continue;  // superseded by a re-timing
      end[task] = e.time;
      auto& run = running_[static_cast<size_t>(share)];
      run.erase(std::find(run.begin(), run.end(), e.id));
      reshare(g, share, e.time);
    }
    ++completed;
    release_lock(g, e.id, e.time);
    const auto s = static_cast<size_t>(g.stream[task]);
    busy_[s] = 0;
    if (!scale_.empty()) last_end_[s] = e.time;
    ++head_[s];
    for (int32_t k = g.out_begin[task]; k < g.out_begin[task + 1]; ++k) {
      const int32_t dst = g.out_task[static_cast<size_t>(k)];
      if (--pending_[static_cast<size_t>(dst)] == 0) try_start(g, dst, e.time);
    }
    const int32_t next = g.stream_begin[s] + head_[s];
    if (next < g.stream_begin[s + 1])
      try_start(g, g.stream_tasks[static_cast<size_t>(next)], e.time);
  }
  if (completed != g.num_tasks()) stalled(g, completed);
}

void Engine::stalled(const TaskGraph& g, int completed) const {
  for (int s = 0; s < g.num_streams; ++s) {
    const int32_t next = g.stream_begin[static_cast<size_t>(s)] + head_[static_cast<size_t>(s)];
    if (next < g.stream_begin[static_cast<size_t>(s) + 1]) {
      throw DeadlockError(
          fmt::format("simulation deadlocked: {} of {} tasks done; stream {} waits at task {}",
                      completed, g.num_tasks(), s, g.stream_tasks[static_cast<size_t>(next)]));
    }
  }
  throw DeadlockError("simulation deadlocked");
}

void Engine::try_start(const TaskGraph& g, int32_t task, double now) {
  const auto t = static_cast<size_t>(task);
  if (pending_[t] > 0 || ready_[t]) return;
  const auto s = static_cast<size_t>(g.stream[t]);
  if (busy_[s] || g.stream_tasks[static_cast<size_t>(g.stream_begin[s] + head_[s])] != task) return;
  const int32_t grp = g.group[t];
  if (grp < 0) {
    if (take_lock(g, task)) start_task(g, task, now);
    return;
  }
  ready_[t] = 1;
  const auto gi = static_cast<size_t>(grp);
  const int32_t size = g.group_begin[gi + 1] - g.group_begin[gi];
  if (++group_ready_[gi] < size) return;
  for (int32_t k = g.group_begin[gi]; k < g.group_begin[gi + 1]; ++k) {
    start_task(g, g.group_members[static_cast<size_t>(k)], now);
  }
}

void Engine::reshare(const TaskGraph& g, int share, double now) {
  const auto& run = running_[static_cast<size_t>(share)];
  for (int32_t id : run) {
    const auto t = static_cast<size_t>(id);
    left_[t] = std::max(0.0, left_[t] - (now - since_[t]) * rate_[t]);
    since_[t] = now;
    // Each busy core beyond the task's own adds what one co-runner adds: n running on n cores
    // take d + (n - 1)(shared - d); the tasks on its own core take turns.
    const auto [turns, others] = co_runners(g, run, id);
    const double alone = g.duration[t];
    const double shared = others > 0 && !g.shared_duration.empty()
                              ? alone + others * (g.shared_duration[t] - alone)
                              : alone;
    const double d = turns * shared * (scale_.empty() ? 1.0 : scale_[t]);
    rate_[t] = d > 0 ? 1.0 / d : 0.0;
    const double finish = d > 0 ? now + left_[t] * d : now;
    (*end_)[t] = finish;
    queue_.push(finish, id, kTaskEnd, ++epoch_[t]);
  }
}

std::pair<double, double> Engine::co_runners(const TaskGraph& g, const std::vector<int32_t>& run,
                                             int32_t task) {
  if (g.stream_core.empty()) return {1.0, static_cast<double>(run.size()) - 1};
  auto core = [&g](int32_t id) {
    return g.stream_core[static_cast<size_t>(g.stream[static_cast<size_t>(id)])];
  };
  const int32_t mine = core(task);
  int turns = 0;
  std::vector<int32_t>& busy = busy_cores_;
  busy.clear();
  for (int32_t id : run) {
    const int32_t c = core(id);
    if (c == mine) {
      ++turns;
    } else if (std::find(busy.begin(), busy.end(), c) == busy.end()) {
      busy.push_back(c);
    }
  }
  return {static_cast<double>(turns), static_cast<double>(busy.size())};
}

double Engine::cold_scale(const TaskGraph& g, size_t t, double wait) const {
  const double d = g.duration[t];
  if (wait <= 0 || d <= 0) return 1.0;
  const size_t n = g.cold_waits.size();
  const double* x = g.cold_extra.data() + t * n;
  double extra = n > 0 ? x[n - 1] : 0;  // flat after the last wait
  double w0 = 0, x0 = 0;
  for (size_t i = 0; i < n; ++i) {
    if (wait < g.cold_waits[i]) {
      extra = x0 + (x[i] - x0) * (wait - w0) / (g.cold_waits[i] - w0);
      break;
    }
    w0 = g.cold_waits[i];
    x0 = x[i];
  }
  return 1.0 + std::max(0.0, extra) / d;
}

void Engine::start_task(const TaskGraph& g, int32_t task, double now) {
  const auto t = static_cast<size_t>(task);
  const auto s = static_cast<size_t>(g.stream[t]);
  busy_[s] = 1;
  double scale = 1.0;
  if (!scale_.empty()) scale = scale_[t] = cold_scale(g, t, now - last_end_[s]);
  const double duration = g.duration[t] * scale;
  (*start_)[t] = now;
  (*end_)[t] = now + duration;
  const int share = share_of(g, task);
  if (share >= 0) {
    left_[t] = 1.0;
    since_[t] = now;
    rate_[t] = 0;
    running_[static_cast<size_t>(share)].push_back(task);
    reshare(g, share, now);
  } else if (g.net_flow_begin.empty() || !start_flows(g, t, now)) {
    queue_.push(now + duration, task, kTaskEnd);
  }
  for (int32_t k = g.early_begin[t]; k < g.early_begin[t + 1]; ++k) {
    const double offset = g.early_offset[static_cast<size_t>(k)] * scale;
    queue_.push(now + std::min(offset, duration), g.early_task[static_cast<size_t>(k)], kEdgeReady);
  }
}

void Engine::reset_network(const TaskGraph& g) {
  if (g.net_flow_begin.empty()) return;
  const auto n = static_cast<size_t>(g.num_tasks());
  if (g.net_flow_begin.size() != n + 1 || g.net_latency.size() != n) {
    throw std::invalid_argument(
        fmt::format("network data for {} tasks, {} expected", g.net_latency.size(), n));
  }
  bool same = net_.links().size() == g.net_capacity.size();
  for (size_t l = 0; same && l < g.net_capacity.size(); ++l)
    same = net_.links()[l].bandwidth == g.net_capacity[l];
  if (same) {
    net_.reset();
  } else {
    std::vector<network::Link> links;
    for (double c : g.net_capacity) links.push_back({c, 0});
    net_ = network::FlowModel(std::move(links));
  }
  flow_task_.clear();
  flows_left_.assign(n, 0);
  net_check_at_ = std::numeric_limits<double>::infinity();
  // A member of a rendezvous group ends with the group's member that moves the data.
  follower_.assign(n, 0);
  for (size_t grp = 0; grp + 1 < g.group_begin.size(); ++grp) {
    bool moves = false;
    for (int32_t k = g.group_begin[grp]; k < g.group_begin[grp + 1]; ++k) {
      const auto m = static_cast<size_t>(g.group_members[static_cast<size_t>(k)]);
      moves = moves || g.net_flow_begin[m] < g.net_flow_begin[m + 1];
    }
    if (!moves) continue;
    for (int32_t k = g.group_begin[grp]; k < g.group_begin[grp + 1]; ++k) {
      const auto m = static_cast<size_t>(g.group_members[static_cast<size_t>(k)]);
      follower_[m] = g.net_flow_begin[m] == g.net_flow_begin[m + 1];
    }
  }
}

bool Engine::start_flows(const TaskGraph& g, size_t t, double now) {
  if (follower_[t]) return true;  // its group's mover ends it
  const int32_t begin = g.net_flow_begin[t], end = g.net_flow_begin[t + 1];
  if (begin == end) return false;
  for (int32_t f = begin; f < end; ++f) {
    const auto fi = static_cast<size_t>(f);
    const int32_t p = g.flow_path_begin[fi];
    net_.add(g.flow_bytes[fi], g.flow_path_links.data() + p, g.flow_path_begin[fi + 1] - p, now);
    flow_task_.push_back(static_cast<int32_t>(t));
  }
  net_.settle();
  flows_left_[t] = end - begin;
  schedule_network_check();
  return true;
}

void Engine::schedule_network_check() {
  // One check pending at a time, the earliest: a later finish is found by the pending check,
  // which schedules the next one; an earlier one supersedes it (its epoch goes stale).
  if (net_.active() == 0) return;
  const double next = net_.next_finish();
  if (next >= net_check_at_) return;
  net_check_at_ = next;
  queue_.push(next, 0, kNetworkCheck, ++net_epoch_);
}

void Engine::network_due(const TaskGraph& g, double now) {
  done_.clear();
  net_.finish_due(now, done_);
  for (int32_t f : done_) {
    const int32_t task = flow_task_[static_cast<size_t>(f)];
    const auto t = static_cast<size_t>(task);
    if (--flows_left_[t] > 0) continue;
    const double end = now + g.net_latency[t];
    (*end_)[t] = end;
    queue_.push(end, task, kTaskEnd);
    const int32_t grp = g.group[t];
    if (grp < 0) continue;
    for (int32_t k = g.group_begin[static_cast<size_t>(grp)];
         k < g.group_begin[static_cast<size_t>(grp) + 1]; ++k) {
      const int32_t m = g.group_members[static_cast<size_t>(k)];
      if (!follower_[static_cast<size_t>(m)]) continue;
      (*end_)[static_cast<size_t>(m)] = end;
      queue_.push(end, m, kTaskEnd);
    }
  }
  schedule_network_check();
}

}  // namespace pipetwin::sim
