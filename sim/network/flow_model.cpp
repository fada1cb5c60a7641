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
  link_flows_.resize(links_.size());
  link_mark_.assign(links_.size(), 0);
}

void FlowModel::reset() {
  now_ = 0;
  path_begin_.assign(1, 0);
  path_links_.clear();
  left_.clear();
  since_.clear();
  rate_.clear();
  finish_.clear();
  active_.clear();
  for (auto& f : link_flows_) f.clear();
  new_flows_.clear();
  freed_links_.clear();
  flow_mark_.clear();
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
  for (int32_t i = 0; i < len; ++i) link_flows_[static_cast<size_t>(path[i])].push_back(id);
  left_.push_back(std::max(0.0, bytes));
  since_.push_back(now);
  rate_.push_back(0);
  finish_.push_back(now);
  flow_mark_.push_back(0);
  active_.push_back(id);
  new_flows_.push_back(id);
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
      for (int32_t k = path_begin_[i]; k < path_begin_[i + 1]; ++k) {
        const int32_t l = path_links_[static_cast<size_t>(k)];
        auto& on = link_flows_[static_cast<size_t>(l)];
        on.erase(std::find(on.begin(), on.end(), f));
        freed_links_.push_back(l);
      }
    } else {
      active_[kept++] = f;
    }
  }
  if (kept == active_.size()) return;
  active_.resize(kept);
  reallocate();
}

void FlowModel::advance(double now) {
  now_ = std::max(now_, now);
}

void FlowModel::collect_component() {
  if (++mark_ == 0) {  // the marks wrapped: start them again
    std::fill(flow_mark_.begin(), flow_mark_.end(), 0);
    std::fill(link_mark_.begin(), link_mark_.end(), 0);
    mark_ = 1;
  }
  component_.clear();
  auto reach_link = [&](int32_t l) {
    const auto li = static_cast<size_t>(l);
    if (link_mark_[li] == mark_) return;
    link_mark_[li] = mark_;
    for (int32_t g : link_flows_[li]) {
      if (flow_mark_[static_cast<size_t>(g)] == mark_) continue;
      flow_mark_[static_cast<size_t>(g)] = mark_;
      component_.push_back(g);
    }
  };
  for (int32_t f : new_flows_) {
    if (flow_mark_[static_cast<size_t>(f)] == mark_) continue;
    flow_mark_[static_cast<size_t>(f)] = mark_;
    component_.push_back(f);
  }
  for (int32_t l : freed_links_) reach_link(l);
  for (size_t k = 0; k < component_.size(); ++k) {
    const auto i = static_cast<size_t>(component_[k]);
    for (int32_t p = path_begin_[i]; p < path_begin_[i + 1]; ++p)
      reach_link(path_links_[static_cast<size_t>(p)]);
  }
  new_flows_.clear();
  freed_links_.clear();
}

void FlowModel::reallocate() {
  // Only the flows a change can move take part (the component of the flows and links it
  // touches): the solver's work is over them, not over every flow in progress or the cluster.
  collect_component();
  if (component_.empty()) return;
  scratch_paths_.path_begin.assign(1, 0);
  scratch_paths_.path_links.clear();
  scratch_capacity_.clear();
  local_of_.resize(capacity_.size(), -1);
  for (int32_t f : component_) {
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
  for (size_t k = 0; k < component_.size(); ++k) {
    const auto i = static_cast<size_t>(component_[k]);
    left_[i] = left_now(i);
    since_[i] = now_;
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
