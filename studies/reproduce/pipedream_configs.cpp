// PipeDream's configurations (see pipedream.hpp): Table 1's notation, the objective of a
// configuration as pipedream-dp prices it, the best split of a given configuration, one row.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/partition/pipedream_dp.hpp"
#include "core/partition/range_terms.hpp"
#include "profiles/zoo/analytic.hpp"
#include "profiles/zoo/zoo.hpp"
#include "studies/reproduce/pipedream.hpp"

namespace pipetwin::sim::pipedream {

namespace fs = std::filesystem;

// ---- notation --------------------------------------------------------------------------------

std::string format_config(const std::vector<int>& replicas) {
  if (replicas.empty()) throw InputError("PipeDream configuration: no stages");
  if (replicas.size() == 1) return std::to_string(replicas.front());
  if (std::all_of(replicas.begin(), replicas.end(), [](int m) { return m == 1; })) {
    return "Straight";
  }
  std::string out;
  for (int m : replicas) out += (out.empty() ? "" : "-") + std::to_string(m);
  return out;
}

std::vector<int> parse_config(const std::string& text, int gpus, const std::string& origin) {
  if (text == "Straight") return std::vector<int>(static_cast<size_t>(gpus), 1);
  std::vector<int> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t dash = std::min(text.find('-', at), text.size());
    const std::string word = text.substr(at, dash - at);
    const bool digits =
        !word.empty() && word.size() < 6 &&
        std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || std::stoi(word) < 1) {
      throw InputError(fmt::format(
          "{}: PipeDream configuration \"{}\" is neither \"Straight\" nor workers per stage "
          "like \"15-1\"",
          origin, text));
    }
    out.push_back(std::stoi(word));
    at = dash + 1;
  }
  const int used = std::accumulate(out.begin(), out.end(), 0);
  if (used != gpus) {
    throw InputError(fmt::format("{}: PipeDream configuration \"{}\" uses {} workers, not {}",
                                 origin, text, used, gpus));
  }
  return out;
}

std::vector<int> replica_counts(const Partition& p) {
  std::vector<int> out;
  for (int s = 0; s < p.num_stages(); ++s) out.push_back(p.replicas_of(s));
  return out;
}

// ---- the objective ---------------------------------------------------------------------------

namespace {

// What one stage on workers [m0, m0 + m) adds to the objective (see objective_terms).
struct StageShare {
  double compute_s = 0, allreduce_s = 0, border_s = 0;  // whole, not yet over m
  double cut_bytes = 0;                                 // crossing the border before the stage
};

// The all-reduce of `bytes` over workers [m0, m0 + m), as pipedream-dp prices it: affine in the
// bytes through CostModel::allreduce_s of 0 and 1 byte (core/partition/pipedream_dp.cpp).
double allreduce_as_priced(const CostModel& cm, double bytes, int m0, int m) {
  std::vector<int> devices(static_cast<size_t>(m));
  std::iota(devices.begin(), devices.end(), m0);
  const double fixed = cm.allreduce_s(0, devices);
  return fixed + (cm.allreduce_s(1, devices) - fixed) * bytes;
}

StageShare stage_share(const PartitionRequest& r, const RangeScanner& scan, const RangeTerms& t,
                       int m0, int m) {
  StageShare s;
  s.compute_s = t.compute_s;
  if (m > 1) {
    s.allreduce_s =
        allreduce_as_priced(*r.cost, t.param_bytes, m0, m) / std::max(1, r.micro_batches);
  }
  s.cut_bytes = scan.cut_bytes(t.begin) * r.micro_batch;
  if (t.begin > 0 && s.cut_bytes > 0) s.border_s = 2 * r.cost->transfer_s(s.cut_bytes, m0 - 1, m0);
  return s;
}

double worst(const StageShare& s, int m) {
  return std::max(std::max(s.compute_s, s.allreduce_s) / m, s.border_s);
}

}  // namespace

std::vector<Term> objective_terms(const PartitionRequest& r, const Partition& p) {
  const RangeScanner scan(r);
  std::vector<Term> terms;
  int m0 = 0, next = 0;
  for (int k = 0; k < p.num_stages(); ++k) {
    const auto& layers = p.stages[static_cast<size_t>(k)];
    RangeTerms t = scan.start(next);
    for (int l : layers) {
      if (l != t.end) {
        throw InputError(fmt::format(
            "PipeDream objective: stage {} is not the contiguous range after layer {} (layer {})",
            k, next - 1, l));
      }
      scan.extend(t);
    }
    const int m = p.replicas_of(k);
    const StageShare s = stage_share(r, scan, t, m0, m);
    terms.push_back(
        {fmt::format("stage {} compute", k), s.compute_s / m,
         fmt::format("{:.1f} ms forward + backward, over {} worker(s)", s.compute_s * 1e3, m), m});
    if (m > 1) {
      terms.push_back({fmt::format("stage {} all-reduce", k), s.allreduce_s / m,
                       fmt::format("{:.1f} MB of gradients over workers {}-{}: {:.1f} ms, over {}",
                                   t.param_bytes / 1e6, m0, m0 + m - 1, s.allreduce_s * 1e3, m),
                       m});
    }
    if (k > 0) {
      terms.push_back({fmt::format("border {}|{} (2 C)", k - 1, k), s.border_s,
                       fmt::format("{:.2f} MB each way between workers {} and {}",
                                   s.cut_bytes / 1e6, m0 - 1, m0),
                       1, s.cut_bytes});
    }
    m0 += m;
    next = t.end;
  }
  if (next != r.cost->num_layers()) {
    throw InputError(fmt::format("PipeDream objective: the stages end at layer {} of {}", next,
                                 r.cost->num_layers()));
  }
  return terms;
}

double objective_s(const PartitionRequest& r, const Partition& p) {
  return binding_term(r, p).seconds;
}

Term binding_term(const PartitionRequest& r, const Partition& p) {
  const std::vector<Term> terms = objective_terms(r, p);
  return *std::max_element(terms.begin(), terms.end(),
                           [](const Term& a, const Term& b) { return a.seconds < b.seconds; });
}

const std::vector<Pricing>& pricings() {
  static const std::vector<Pricing> list = {
      {"pipedream-dp objective",
       [](const PartitionRequest& r, const Partition& p) {
         return Price{objective_s(r, p), ""};
       }},
      {"simulated", simulated_price},
  };
  return list;
}

namespace {

// The border before stage k of `p` (k >= 1) under the round-robin: per server, the activation
// bytes it receives from other servers over `cycle` mini-batches.
NetworkBorder network_border(const Cluster& c, const Partition& p, const Term& priced, int k) {
  const int from = p.replicas_of(k - 1), to = p.replicas_of(k);
  NetworkBorder b{priced, 0, std::lcm(from, to), 0};
  std::vector<double> inbound(static_cast<size_t>(c.nodes), 0);
  for (int j = 0; j < b.cycle; ++j) {
    const int sender = p.device_of(k - 1) + j % from, receiver = p.device_of(k) + j % to;
    if (c.node_of(sender) == c.node_of(receiver)) continue;
    ++b.remote;
    inbound[static_cast<size_t>(c.node_of(receiver))] += priced.bytes;
  }
  const int nics = c.topology ? std::max(1, c.topology->nics_per_node) : 1;
  b.nic_s =
      *std::max_element(inbound.begin(), inbound.end()) / (b.cycle * nics * c.inter_node.bandwidth);
  return b;
}

}  // namespace

std::vector<NetworkBorder> network_borders(const PartitionRequest& r, const Partition& p) {
  std::vector<NetworkBorder> out;
  if (p.uniform_replicas()) return out;
  int k = 0;
  for (const Term& t : objective_terms(r, p)) {
    if (t.what.rfind("border", 0) != 0) continue;
    NetworkBorder b = network_border(r.cost->cluster(), p, t, ++k);
    if (b.remote > 0) out.push_back(std::move(b));
  }
  return out;
}

Partition best_split(const PartitionRequest& r, const std::vector<int>& replicas) {
  const int K = static_cast<int>(replicas.size());
  const int L = r.cost->num_layers();
  std::vector<int> first(replicas.size() + 1, 0);  // stage k's first worker
  std::partial_sum(replicas.begin(), replicas.end(), first.begin() + 1);
  if (K > L || first.back() > r.num_stages) {
    throw InputError(fmt::format(
        "PipeDream configuration {}: {} stage(s) on {} worker(s) for {} layers and {} workers",
        format_config(replicas), K, first.back(), L, r.num_stages));
  }
  const RangeScanner scan(r);
  const std::vector<int> sizes = min_max_split(scan, K, [&](const RangeTerms& t, int k) {
    const int m = replicas[static_cast<size_t>(k)];
    return worst(stage_share(r, scan, t, first[static_cast<size_t>(k)], m), m);
  });
  Partition p = contiguous_partition(sizes);
  if (std::any_of(replicas.begin(), replicas.end(), [](int m) { return m > 1; })) {
    p.replicas = replicas;
  }
  return p;
}

std::string describe_stages(const CostModel& cost, const Partition& p) {
  std::string out;
  for (const auto& layers : p.stages) {
    const auto& first = cost.profile().layers[static_cast<size_t>(layers.front())].name;
    const auto& last = cost.profile().layers[static_cast<size_t>(layers.back())].name;
    out += (out.empty() ? "" : " | ") + (layers.size() == 1 ? first : first + "-" + last);
  }
  return out;
}

// ---- one model on one cluster ----------------------------------------------------------------

namespace {

// The efficiencies calibrated for `device` in float32 in the catalog, or the built-in defaults.
zoo::Efficiency efficiency_for(const Catalog& catalog, const DeviceSpec& device,
                               std::string& source) {
  const fs::path dir = fs::path(catalog.dir()) / "efficiency";
  for (const fs::path& f : {dir / (device.name + "-float32.json"), dir / (device.name + ".json")}) {
    if (!fs::is_regular_file(f)) continue;
    zoo::Efficiency e = zoo::load_efficiency(f.string());
    if (!e.dtype.empty() && e.dtype != "float32") continue;
    source = fmt::format("calibrated ({})", f.string());
    return e;
  }
  source = fmt::format("the built-in defaults (no calibration for {})", device.name);
  return zoo::default_efficiency();
}

}  // namespace

Workload::Workload(const Catalog& catalog, const ModelSetting& model, const std::string& cluster,
                   int batch) {
  const Cluster c = load_cluster(cluster, catalog);
  zoo::AnalyticOptions o;
  o.dtype = "float32";
  o.optimizer = model.optimizer;
  o.micro_batches = {std::max(1, batch / 2), batch, 2 * batch};
  o.efficiency = efficiency_for(catalog, c.device, efficiency_);
  const Profile profile =
      zoo::analytic_profile(zoo::describe_model(model.zoo, "reproduce pipedream"), c.device, o);
  cost_ = std::make_unique<CostModel>(profile, c);
  request_.cost = cost_.get();
  request_.num_stages = c.num_devices();
  request_.micro_batch = batch;
  request_.micro_batches = 1;
}

}  // namespace pipetwin::sim::pipedream
