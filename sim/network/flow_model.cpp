#include "sim/network/flow_model.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <utility>

namespace pipetwin::sim::network {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Flows due within this relative margin of `now` end together (rounding of remaining bytes).
constexpr double kDue = 1e-12;

}  // namespace

FlowModel::FlowModel(std::vector<Link> links) : links_(std::move(links)) {
  for (const Link& l : links_) {
    if (!(l.bandwidth > 0)) throw std::invalid_argument("a link's bandwidth must be positive");
    capacity_.push_back(l.bandwidth);
  }
}

void FlowModel::reset() {
  now_ = 0;
  path_begin_.assign(1, 0);
  path_links_.clear();
  left_.clear();
  rate_.clear();
  finish_.clear();
  active_.clear();
}

double FlowModel::latency(const int32_t* path, int32_t len) const {
  double s = 0;
  for (int32_t i = 0; i < len; ++i) s += links_[static_cast<size_t>(path[i])].latency;
  return s;
}

int32_t FlowModel::start(double bytes, const int32_t* path, int32_t len, double now) {
  const int32_t id = add(bytes, path, len, now);
  reallocate();
  return id;
}

int32_t FlowModel::add(double bytes, const int32_t* path, int32_t len, double now) {
  if (now < now_) throw std::invalid_argument("a flow cannot start before the model's time");
  for (int32_t i = 0; i < len; ++i) {
    if (path[i] < 0 || static_cast<size_t>(path[i]) >= links_.size())
      throw std::out_of_range("a flow's path names a link that does not exist");
  }
  advance(now);
  const auto id = static_cast<int32_t>(left_.size());
  path_links_.insert(path_links_.end(), path, path + len);
  path_begin_.push_back(static_cast<int32_t>(path_links_.size()));
  left_.push_back(std::max(0.0, bytes));
  rate_.push_back(0);
  finish_.push_back(now);
  active_.push_back(id);
  return id;
}

double FlowModel::next_finish() const {
  double t = kInf;
  for (int32_t f : active_) t = std::min(t, finish_[static_cast<size_t>(f)]);
  return t;
}

void FlowModel::finish_due(double now, std::vector<int32_t>& done) {
  advance(now);
  const double due = now + kDue * std::max(1.0, now);
  size_t kept = 0;
  for (int32_t f : active_) {
    const auto i = static_cast<size_t>(f);
    if (finish_[i] <= due) {
      left_[i] = 0;
      rate_[i] = 0;
      done.push_back(f);
    } else {
      active_[kept++] = f;
    }
  }
  if (kept == active_.size()) return;
  active_.resize(kept);
  reallocate();
}

void FlowModel::advance(double now) {
  const double dt = now - now_;
  if (dt > 0) {
    for (int32_t f : active_) {
      const auto i = static_cast<size_t>(f);
      left_[i] = std::max(0.0, left_[i] - rate_[i] * dt);
    }
  }
  now_ = std::max(now_, now);
}

void FlowModel::reallocate() {
  // Only the flows in progress and the links they cross take part: the solver's work is over
  // them, not over the history or the whole cluster.
  scratch_paths_.path_begin.assign(1, 0);
  scratch_paths_.path_links.clear();
  scratch_capacity_.clear();
  local_of_.resize(capacity_.size(), -1);
  for (int32_t f : active_) {
    const auto i = static_cast<size_t>(f);
    for (int32_t k = path_begin_[i]; k < path_begin_[i + 1]; ++k) {
      const auto l = static_cast<size_t>(path_links_[static_cast<size_t>(k)]);
      if (local_of_[l] < 0) {
        local_of_[l] = static_cast<int32_t>(scratch_capacity_.size());
        scratch_capacity_.push_back(capacity_[l]);
        used_.push_back(static_cast<int32_t>(l));
      }
      scratch_paths_.path_links.push_back(local_of_[l]);
    }
    scratch_paths_.path_begin.push_back(static_cast<int32_t>(scratch_paths_.path_links.size()));
  }
  for (int32_t l : used_) local_of_[static_cast<size_t>(l)] = -1;
  used_.clear();
  solver_.solve(scratch_capacity_, scratch_paths_, scratch_rates_);
  for (size_t k = 0; k < active_.size(); ++k) {
    const auto i = static_cast<size_t>(active_[k]);
    rate_[i] = scratch_rates_[k];
    finish_[i] = left_[i] <= 0 ? now_ : now_ + left_[i] / rate_[i];
  }
}

std::vector<double> completion_times(const std::vector<Link>& links,
                                     const std::vector<FlowSpec>& flows) {
  std::vector<size_t> order(flows.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return flows[a].start_s < flows[b].start_s; });
  FlowModel model(links);
  std::vector<double> out(flows.size(), 0);
  std::vector<size_t> spec_of;  // flow id -> index into flows
  std::vector<int32_t> done;
  size_t next = 0;
  while (next < order.size() || model.active() > 0) {
    const double t_start = next < order.size() ? flows[order[next]].start_s : kInf;
    const double t_end = model.next_finish();
    done.clear();
    if (t_end <= t_start) {
      model.finish_due(t_end, done);
    } else {
      const FlowSpec& f = flows[order[next]];
      model.finish_due(t_start, done);
      model.start(f.bytes, f.path, t_start);
      spec_of.push_back(order[next++]);
    }
    for (int32_t id : done) {
      const FlowSpec& f = flows[spec_of[static_cast<size_t>(id)]];
      out[spec_of[static_cast<size_t>(id)]] =
          (t_end <= t_start ? t_end : t_start) +
          model.latency(f.path.data(), static_cast<int32_t>(f.path.size()));
    }
  }
  return out;
}

}  // namespace pipetwin::sim::network
