#include "core/metrics.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace pipetwin {

namespace {

struct Interval {
  double a, b;
};

// Length of the part of [a, b] covered by the sorted, disjoint intervals.
double covered(const std::vector<Interval>& busy, double a, double b) {
  if (b <= a) return 0;
  auto it = std::lower_bound(busy.begin(), busy.end(), a,
                             [](const Interval& iv, double x) { return iv.b <= x; });
  double sum = 0;
  for (; it != busy.end() && it->a < b; ++it) sum += std::min(b, it->b) - std::max(a, it->a);
  return sum;
}

std::vector<Interval> merge(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& x, const Interval& y) { return x.a < y.a; });
  std::vector<Interval> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.a <= out.back().b) {
      out.back().b = std::max(out.back().b, iv.b);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

bool is_compute(Op op) {
  return stream_of(op) == StreamKind::kCompute;
}

void compute_staleness(const Timeline& t, int num_stages, Metrics& m) {
  m.staleness.assign(static_cast<size_t>(num_stages), {});
  // Per device, compute events in time order; versions are per (device, stage).
  std::vector<std::vector<const TimelineEvent*>> by_device(static_cast<size_t>(t.num_devices()));
  for (const auto& e : t.events) {
    if (is_compute(e.action.op)) by_device[static_cast<size_t>(e.device)].push_back(&e);
  }
  std::vector<long> count(static_cast<size_t>(num_stages), 0);
  std::vector<double> total(static_cast<size_t>(num_stages), 0);
  for (auto& list : by_device) {
    std::stable_sort(list.begin(), list.end(), [](const TimelineEvent* a, const TimelineEvent* b) {
      return a->start_s < b->start_s;
    });
    std::map<int, int> current;                          // stage -> version
    std::map<std::pair<int, int>, int> forward_version;  // (stage, mb) -> version
    std::map<int, std::map<int, int>> in_flight;         // stage -> version -> count
    for (const TimelineEvent* e : list) {
      const Action& a = e->action;
      if (a.stage < 0 || a.stage >= num_stages) continue;
      auto& st = m.staleness[static_cast<size_t>(a.stage)];
      if (a.op == Op::kForward) {
        forward_version[{a.stage, a.micro_batch}] = a.version;
        auto& versions = in_flight[a.stage];
        ++versions[a.version];
        int alive = 0;
        for (const auto& [v, n] : versions) alive += n > 0;
        st.weight_versions = std::max(st.weight_versions, alive);
      } else if (is_input_backward(a.op)) {
        const int cur = current[a.stage];
        const int fv = forward_version.count({a.stage, a.micro_batch})
                           ? forward_version[{a.stage, a.micro_batch}]
                           : a.version;
        const int delay = cur - fv;
        st.max = std::max(st.max, delay);
        st.gradient_max = std::max(st.gradient_max, cur - a.version);
        total[static_cast<size_t>(a.stage)] += delay;
        ++count[static_cast<size_t>(a.stage)];
        ++m.staleness_histogram[delay];
        --in_flight[a.stage][fv];
      } else if (a.op == Op::kOptimizerStep) {
        current[a.stage] = a.version;
      }
    }
  }
  for (int s = 0; s < num_stages; ++s) {
    if (count[static_cast<size_t>(s)] > 0) {
      m.staleness[static_cast<size_t>(s)].mean =
          total[static_cast<size_t>(s)] / static_cast<double>(count[static_cast<size_t>(s)]);
    }
  }
}

}  // namespace

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

// One pass over the events: checks them, sets the makespan, each step's end and the compute time
// by op; returns each device's merged compute intervals.
std::vector<std::vector<Interval>> scan_events(const Timeline& t, Metrics& m) {
  const auto D = static_cast<size_t>(t.num_devices());
  std::vector<std::vector<Interval>> busy(D);
  for (const auto& e : t.events) {
    if (e.device < 0 || static_cast<size_t>(e.device) >= D) {
      throw std::invalid_argument(fmt::format("timeline event on device {} of {}", e.device, D));
    }
    if (e.action.op == Op::kOptimizerStep && e.action.step < 0) {
      throw std::invalid_argument(
          fmt::format("timeline: optimizer step without a step number ({})", describe(e.action)));
    }
    m.makespan_s = std::max(m.makespan_s, e.end_s);
    if (e.action.op == Op::kOptimizerStep) {
      const auto step = static_cast<size_t>(e.action.step);
      if (m.step_end_s.size() <= step) m.step_end_s.resize(step + 1, 0);
      m.step_end_s[step] = std::max(m.step_end_s[step], e.end_s);
    }
    if (is_compute(e.action.op))
      busy[static_cast<size_t>(e.device)].push_back({e.start_s, e.end_s});
    m.compute_s_by_op[op_name(e.action.op)] += e.duration();
  }
  for (auto& b : busy) b = merge(std::move(b));
  m.steps = static_cast<int>(m.step_end_s.size());
  return busy;
}

// The steady window between step ends (asynchronous schedules: without the first and last
// num_stages steps, their fill and drain) and the iteration time over it; the whole run where
// there is no such window.
void steady_window(Metrics& m, int num_stages, bool async) {
  int w0 = 0, w1 = m.steps - 1;
  if (async) {
    w0 = num_stages;
    w1 = m.steps - 1 - num_stages;
  }
  if (m.steps >= 2 && w1 > w0) {
    m.steady_state = true;
    m.window_start_s = m.step_end_s[static_cast<size_t>(w0)];
    m.window_end_s = m.step_end_s[static_cast<size_t>(w1)];
    m.iteration_time_s = (m.window_end_s - m.window_start_s) / (w1 - w0);
    std::vector<double> d;
    for (int i = w0 + 1; i <= w1; ++i) {
      d.push_back(m.step_end_s[static_cast<size_t>(i)] - m.step_end_s[static_cast<size_t>(i) - 1]);
    }
    m.iteration_time_median_s = median(std::move(d));
  } else {
    m.window_start_s = 0;
    m.window_end_s = m.makespan_s;
    m.iteration_time_s = m.steps > 0 ? m.makespan_s / m.steps : m.makespan_s;
    m.iteration_time_median_s = m.iteration_time_s;
  }
}

// Per device: busy time and utilization in the window, peak memory, communication time; the
// bubble fraction and how much communication overlaps compute.
void device_metrics(const Timeline& t, const std::vector<std::vector<Interval>>& busy, Metrics& m) {
  const size_t D = busy.size();
  const double window = m.window_end_s - m.window_start_s;
  double busy_total = 0;
  m.devices.resize(D);
  for (size_t d = 0; d < D; ++d) {
    auto& dm = m.devices[d];
    dm.name = t.device_names[d];
    dm.busy_s = covered(busy[d], m.window_start_s, m.window_end_s);
    dm.utilization = window > 0 ? dm.busy_s / window : 0;
    busy_total += dm.busy_s;
    if (d < t.peak_memory_bytes.size()) dm.peak_memory_bytes = t.peak_memory_bytes[d];
    if (d < t.memory.size()) {
      for (const auto& s : t.memory[d])
        dm.peak_memory_bytes = std::max(dm.peak_memory_bytes, s.bytes);
    }
  }
  m.bubble_fraction =
      (window > 0 && D > 0) ? 1 - busy_total / (static_cast<double>(D) * window) : 0;
  double overlapped = 0;
  for (const auto& e : t.events) {
    if (is_compute(e.action.op)) continue;
    if (e.action.op == Op::kTensorParallel) {
      m.tensor_parallel_s += e.duration();
      continue;
    }
    m.comm_time_s += e.duration();
    m.devices[static_cast<size_t>(e.device)].comm_s += e.duration();
    overlapped += covered(busy[static_cast<size_t>(e.device)], e.start_s, e.end_s);
  }
  m.comm_overlap_fraction = m.comm_time_s > 0 ? overlapped / m.comm_time_s : 0;
}

}  // namespace

Metrics compute_metrics(const Timeline& t, int num_stages, bool async, double samples_per_step) {
  Metrics m;
  m.source = t.source;
  m.schedule = t.schedule;
  m.num_stages = num_stages;
  m.samples_per_step = samples_per_step;
  const std::vector<std::vector<Interval>> busy = scan_events(t, m);
  steady_window(m, num_stages, async);
  if (m.iteration_time_s > 0) m.throughput_samples_per_s = samples_per_step / m.iteration_time_s;
  device_metrics(t, busy, m);
  compute_staleness(t, num_stages, m);
  return m;
}

Json metrics_to_json(const Metrics& m) {
  Json j = json_document("pipetwin.metrics", 1);
  j["source"] = m.source;
  j["schedule"] = m.schedule;
  j["num_stages"] = m.num_stages;
  j["steps"] = m.steps;
  j["steady_state"] = m.steady_state;
  j["samples_per_step"] = m.samples_per_step;
  j["iteration_time_s"] = m.iteration_time_s;
  j["iteration_time_median_s"] = m.iteration_time_median_s;
  j["throughput_samples_per_s"] = m.throughput_samples_per_s;
  j["bubble_fraction"] = m.bubble_fraction;
  j["comm_time_s"] = m.comm_time_s;
  j["comm_overlap_fraction"] = m.comm_overlap_fraction;
  if (m.tensor_parallel_s > 0) j["tensor_parallel_s"] = m.tensor_parallel_s;
  j["makespan_s"] = m.makespan_s;
  j["window"] = {m.window_start_s, m.window_end_s};
  j["step_end_s"] = m.step_end_s;
  Json devices = Json::array();
  for (const auto& d : m.devices) {
    devices.push_back({{"name", d.name},
                       {"busy_s", d.busy_s},
                       {"utilization", d.utilization},
                       {"comm_s", d.comm_s},
                       {"peak_memory_bytes", d.peak_memory_bytes}});
  }
  j["devices"] = devices;
  Json per_stage = Json::array(), mean = Json::array(), grad = Json::array(),
       versions = Json::array();
  for (const auto& s : m.staleness) {
    per_stage.push_back(s.max);
    mean.push_back(s.mean);
    grad.push_back(s.gradient_max);
    versions.push_back(s.weight_versions);
  }
  Json hist = Json::object();
  for (const auto& [k, v] : m.staleness_histogram) hist[std::to_string(k)] = v;
  j["staleness"] = {{"per_stage", per_stage},
                    {"mean_per_stage", mean},
                    {"gradient_per_stage", grad},
                    {"weight_versions_per_stage", versions},
                    {"histogram", hist}};
  Json by_op = Json::object();
  for (const auto& [k, v] : m.compute_s_by_op) by_op[k] = v;
  j["time_s_by_op"] = by_op;
  return j;
}

Metrics metrics_from_json(const JsonView& doc) {
  doc.check_format("pipetwin.metrics", 1);
  Metrics m;
  m.source = doc.string_or("source", "");
  m.schedule = doc.string_or("schedule", "");
  m.num_stages = static_cast<int>(doc.integer_or("num_stages", 0));
  m.steps = static_cast<int>(doc.integer_or("steps", 0));
  m.steady_state = doc.bool_or("steady_state", false);
  m.samples_per_step = doc.nonneg_or("samples_per_step", 0);
  m.iteration_time_s = doc.nonneg("iteration_time_s");
  m.iteration_time_median_s = doc.nonneg_or("iteration_time_median_s", m.iteration_time_s);
  m.throughput_samples_per_s = doc.nonneg_or("throughput_samples_per_s", 0);
  m.bubble_fraction = doc.number("bubble_fraction");
  m.comm_time_s = doc.nonneg_or("comm_time_s", 0);
  m.comm_overlap_fraction = doc.nonneg_or("comm_overlap_fraction", 0);
  m.tensor_parallel_s = doc.nonneg_or("tensor_parallel_s", 0);
  m.makespan_s = doc.nonneg_or("makespan_s", 0);
  if (auto steps = doc.find("step_end_s")) {
    for (const auto& s : steps->items()) m.step_end_s.push_back(s.as_nonneg());
  }
  for (const auto& d : doc.at("devices").items()) {
    DeviceMetrics dm;
    dm.name = d.string("name");
    dm.busy_s = d.nonneg_or("busy_s", 0);
    dm.utilization = d.nonneg("utilization");
    dm.comm_s = d.nonneg_or("comm_s", 0);
    dm.peak_memory_bytes = d.nonneg("peak_memory_bytes");
    m.devices.push_back(dm);
  }
  if (auto st = doc.find("staleness")) {
    const auto per = st->at("per_stage").items();
    for (size_t i = 0; i < per.size(); ++i) {
      StageStaleness s;
      s.max = static_cast<int>(per[i].as_int());
      m.staleness.push_back(s);
    }
  }
  return m;
}

void save_metrics(const Metrics& m, const std::string& path) {
  save_json_file(path, metrics_to_json(m));
}

Metrics load_metrics(const std::string& path) {
  return load_json_as(path, metrics_from_json);
}

}  // namespace pipetwin
