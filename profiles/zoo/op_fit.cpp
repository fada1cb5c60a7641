#include "profiles/zoo/op_fit.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "core/error.hpp"
#include "profiles/zoo/op_cost.hpp"

namespace pipetwin::zoo {

namespace {

constexpr const char* kBench = "pipetwin calibrate --microbench";

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Sourced measured(double value, const std::string& how, const MicrobenchData& d) {
  return {value, fmt::format("measured on {} by {}: {}", d.machine, kBench, how)};
}

// The kernels a case times, and the autograd nodes its backward runs.
struct CaseKernels {
  std::vector<Kernel> kernels;
  int nodes = 0;
};

CaseKernels case_kernels(const BenchCase& c, bool fused_attention) {
  ExpandOptions e;
  e.fused_attention = fused_attention;
  e.first_layer = c.first_layer;
  const LayerKernels k = expand_ops({c.op}, c.b, e);
  if (!c.backward) return {k.forward, 0};
  CaseKernels out{k.input_half, k.nodes};
  out.kernels.insert(out.kernels.end(), k.weight_half.begin(), k.weight_half.end());
  if (c.op.kind == OpKind::conv) {  // one product of the three timed alone
    std::vector<Kernel> only;
    for (const auto& kernel : out.kernels) {
      if (kernel.kind == OpKind::conv && kernel.conv_pass == c.conv_pass) only.push_back(kernel);
    }
    out.kernels = only;
  }
  return out;
}

// The host's and device's fixed parts of a case: what is left of its time for the bodies.
double fixed_parts(const CaseKernels& k, const OpParams& p) {
  return static_cast<double>(k.kernels.size()) * (p.host_s.value + p.launch_s.value) +
         k.nodes * p.host_node_s.value;
}

void fit_bandwidth(const MicrobenchData& d, OpParams& p) {
  std::vector<MicrobenchData::Copy> copies = d.copies;
  std::sort(copies.begin(), copies.end(),
            [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  // A copy that takes less than a few operators' host time says nothing of the bandwidth.
  copies.erase(std::remove_if(copies.begin(), copies.end(),
                              [&](const auto& c) { return c.measured_s < 4 * d.host_s; }),
               copies.end());
  if (copies.size() < 2) throw InputError("microbench: need copies of at least two sizes");
  std::vector<double> bw;
  for (const auto& c : copies) bw.push_back(c.bytes / (c.measured_s - d.host_s));
  const double memory = bw.back();
  const double cache = *std::max_element(bw.begin(), bw.end());
  p.bandwidth = measured(
      memory,
      fmt::format("copy of {:.0f} MB, bytes read and written / time", copies.back().bytes / 1e6),
      d);
  double cache_bytes = 0;
  const double threshold = std::sqrt(cache * memory);
  for (size_t i = 0; i < copies.size(); ++i) {
    if (bw[i] >= threshold) cache_bytes = copies[i].bytes;
  }
  if (d.async || cache < 1.2 * memory) cache_bytes = 0;  // no cache regime worth modelling
  p.cache_bytes = measured(cache_bytes,
                           "largest copy whose bandwidth is above the geometric mean of the "
                           "cache's and the memory's",
                           d);
  p.cache_bandwidth = measured(cache_bytes > 0 ? cache : memory,
                               "the fastest copy's bandwidth (bytes read and written / time)", d);
}

struct GemmFit {
  double tm = 0, tn = 0, k0 = 0, unit_flops = 0, score = std::numeric_limits<double>::max();
};

GemmFit fit_gemm_grid(const std::vector<const BenchCase*>& gemms, const MicrobenchData& d,
                      OpParams& p) {
  static const std::vector<double> tiles = {1, 2, 4, 8, 16, 32, 64, 128, 256};
  static const std::vector<double> k0s = {0, 4, 8, 16, 32, 64, 128, 256, 512};
  GemmFit best;
  for (double tm : tiles) {
    for (double tn : tiles) {
      for (double k0 : k0s) {
        // FLOP-equivalents per unit and the time left for them.
        std::vector<double> x, y;
        for (const BenchCase* c : gemms) {
          const double batch = c->op.groups * c->b, m = c->op.rows;
          const double n = static_cast<double>(c->op.n), k = static_cast<double>(c->op.k);
          const double waves = std::ceil(batch * std::ceil(m / tm) * std::ceil(n / tn) / d.units);
          x.push_back(waves * 2 * tm * tn * (k + k0));
          y.push_back(std::max(c->measured_s - d.host_s - d.launch_s, 1e-9));
        }
        double num = 0, den = 0;  // u = 1 / unit_flops minimising sum ((u x - y) / y)^2
        for (size_t i = 0; i < x.size(); ++i) {
          num += x[i] / y[i];
          den += (x[i] / y[i]) * (x[i] / y[i]);
        }
        if (den <= 0) continue;
        GemmFit f{tm, tn, k0, den / num, 0};
        p.gemm[d.dtype] = {{tm, ""}, {tn, ""}, {f.unit_flops, ""}, {k0, ""}};
        for (const BenchCase* c : gemms) {
          const double e = predict_case(*c, p, d.dtype) / c->measured_s - 1;
          f.score += e * e;
        }
        if (f.score < best.score) best = f;
      }
    }
  }
  return best;
}

void fit_gemm(const MicrobenchData& d, OpParams& p) {
  std::vector<const BenchCase*> gemms;
  for (const auto& c : d.cases) {
    if (c.group == "gemm") gemms.push_back(&c);
  }
  if (gemms.size() < 4) throw InputError("microbench: need at least four GEMM timings");
  const GemmFit f = fit_gemm_grid(gemms, d, p);
  const std::string how = fmt::format(
      "wave model fitted to {} GEMM timings (least squares on relative errors; tile sizes and "
      "tile overhead the best of a candidate grid)",
      gemms.size());
  p.gemm[d.dtype] = {measured(f.tm, how, d), measured(f.tn, how, d), measured(f.unit_flops, how, d),
                     measured(f.k0, how, d)};
}

// Per case: the time left for the convolution (y less host parts) and its implicit-GEMM time at
// efficiency 1 and no fixed cost.
struct ConvSample {
  ConvPass pass;
  double body = 0, left = 0;
};

std::vector<ConvSample> conv_samples(const MicrobenchData& d, const OpParams& p) {
  OpParams unit = p;
  unit.conv_forward.value = unit.conv_dgrad.value = unit.conv_wgrad.value = 1;
  unit.conv_fixed_s.value = 0;
  std::vector<ConvSample> out;
  for (const auto& c : d.cases) {
    if (c.group != "conv") continue;
    const CaseKernels k = case_kernels(c, d.fused_attention);
    double body = 0;
    for (const auto& kernel : k.kernels) body += kernel_time(kernel, unit, d.dtype).device_s;
    body -= static_cast<double>(k.kernels.size()) * unit.launch_s.value;
    const double left = c.measured_s - fixed_parts(k, unit);
    if (left > 0 && body > 0)
      out.push_back({c.backward ? c.conv_pass : ConvPass::forward, body, left});
  }
  return out;
}

// left = fixed + body / efficiency[pass]: unknowns (fixed, 1/eff forward, dgrad, wgrad), least
// squares on relative errors made robust by reweighting (as op_validation.hpp's refinement).
std::array<double, 4> fit_conv_terms(const std::vector<ConvSample>& s, bool with_fixed) {
  std::array<double, 4> x{0, 1, 1, 1};
  std::vector<double> w(s.size(), 1.0);
  for (int round = 0; round < 40; ++round) {
    std::array<std::array<double, 4>, 4> a{};
    std::array<double, 4> b{};
    for (size_t j = 0; j < s.size(); ++j) {
      std::array<double, 4> row{with_fixed ? 1.0 : 0.0, 0, 0, 0};
      row[1 + static_cast<size_t>(s[j].pass)] = s[j].body;
      for (size_t r = 0; r < 4; ++r) {
        b[r] += w[j] * row[r] / s[j].left;
        for (size_t c = 0; c < 4; ++c) a[r][c] += w[j] * row[r] * row[c] / (s[j].left * s[j].left);
      }
    }
    for (size_t r = 0; r < 4; ++r) {  // passes without samples (and no fixed) stay put
      if (a[r][r] <= 0) a[r][r] = 1, b[r] = x[r];
    }
    std::vector<std::vector<double>> m(4, std::vector<double>(4));
    for (size_t r = 0; r < 4; ++r) std::copy(a[r].begin(), a[r].end(), m[r].begin());
    std::vector<double> sol;
    if (!solve_small(m, std::vector<double>(b.begin(), b.end()), sol, 1e-300)) break;
    std::copy(sol.begin(), sol.end(), x.begin());
    for (size_t j = 0; j < s.size(); ++j) {
      const double pred = x[0] + s[j].body * x[1 + static_cast<size_t>(s[j].pass)];
      w[j] = 1 / std::max(std::abs(pred / s[j].left - 1), 0.02);
    }
  }
  return x;
}

void fit_conv(const MicrobenchData& d, OpParams& p) {
  const std::vector<ConvSample> s = conv_samples(d, p);
  std::array<double, 4> x = fit_conv_terms(s, true);
  if (x[0] < 0) x = fit_conv_terms(s, false);
  std::array<int, 3> count{};
  for (const auto& c : s) ++count[static_cast<size_t>(c.pass)];
  auto eff = [&](ConvPass pass, const char* what) {
    const size_t i = static_cast<size_t>(pass);
    if (count[i] == 0 || x[1 + i] <= 0)
      return measured(1.0, fmt::format("no {} timings: 1", what), d);
    return measured(1 / x[1 + i],
                    fmt::format("robust least squares over {} {} timings: time less host parts = "
                                "fixed_s + implicit-GEMM time at efficiency 1 / efficiency",
                                count[i], what),
                    d);
  };
  p.conv_forward = eff(ConvPass::forward, "forward");
  p.conv_dgrad = eff(ConvPass::dgrad, "dgrad");
  p.conv_wgrad = eff(ConvPass::wgrad, "wgrad");
  p.conv_fixed_s = measured(
      std::max(0.0, x[0]),
      fmt::format("fitted with the efficiencies over {} convolution timings", s.size()), d);
}

// The kernel of a case whose class the case times: the op's class, an embedding's gather
// forward and scatter-add backward.
const Kernel* main_kernel(const BenchCase& c, const CaseKernels& k) {
  EltClass want = c.op.elt;
  if (c.op.kind == OpKind::embedding) want = c.backward ? EltClass::scatter_add : EltClass::gather;
  for (const auto& kernel : k.kernels) {
    if (kernel.elt == want && kernel.elems > 0) return &kernel;
  }
  return nullptr;
}

void fit_elementwise(const MicrobenchData& d, OpParams& p) {
  std::map<std::pair<std::string, bool>, std::vector<double>> rates;
  for (const auto& c : d.cases) {
    if (c.group != "elementwise") continue;
    const CaseKernels k = case_kernels(c, d.fused_attention);
    const Kernel* main = main_kernel(c, k);
    if (main == nullptr) continue;
    const double bytes = (main->reads + main->writes) * dtype_bytes(d.dtype);
    if (p.cache_bytes.value > 0 && bytes > p.cache_bytes.value) continue;
    double others = 0;  // the other kernels' traffic at the memory's bandwidth
    for (const auto& kernel : k.kernels) {
      if (&kernel == main) continue;
      const double b = (kernel.reads + kernel.writes) * dtype_bytes(d.dtype);
      others += b / bandwidth_for(b, p);
    }
    const double left = c.measured_s - fixed_parts(k, p) - others;
    if (left <= 0) continue;
    rates[{elt_name(main->elt), c.backward}].push_back(main->elems / left);
  }
  for (const auto& [key, values] : rates) {
    const auto& [name, backward] = key;
    EltRate& r = p.elementwise[name];
    // Elements per second r minimising sum ((e / r - y) / y)^2 over the sizes (x = e / y):
    // 1 / r = sum x / sum x^2.
    double sx = 0, sxx = 0;
    for (double x : values) {
      sx += x;
      sxx += x * x;
    }
    const Sourced s = measured(sxx / sx,
                               fmt::format("least squares on relative errors over {} sizes in "
                                           "the cache of elements / (time less host parts), {}",
                                           values.size(), backward ? "backward" : "forward"),
                               d);
    (backward ? r.backward : r.forward) = s;
  }
  for (auto& [name, r] : p.elementwise) {  // a class timed one way only runs at that rate both
    if (r.forward.value <= 0) r.forward = {r.backward.value, r.backward.source + " (backward's)"};
    if (r.backward.value <= 0) r.backward = {r.forward.value, r.forward.source + " (forward's)"};
  }
}

void fit_attention(const MicrobenchData& d, OpParams& p) {
  std::vector<double> fwd, bwd;
  for (const auto& c : d.cases) {
    if (c.group != "attention" || !d.fused_attention) continue;
    const CaseKernels k = case_kernels(c, true);
    double flops = 0;
    for (const auto& kernel : k.kernels) flops += kernel.flops;
    const double left = c.measured_s - fixed_parts(k, p);
    const GemmParams& g = p.gemm_for(d.dtype);
    if (left > 0)
      (c.backward ? bwd : fwd)
          .push_back(std::min(1.0, flops / (left * p.units.value * g.unit_flops.value)));
  }
  const std::string how = "median over fused attention timings of FLOPs / (time x GEMM rate)";
  const std::string none =
      "not fused on this device (attention runs as its GEMMs and "
      "element-wise ops): unused";
  p.attention_forward = fwd.empty() ? measured(0.5, none, d) : measured(median_of(fwd), how, d);
  p.attention_backward = bwd.empty() ? measured(0.5, none, d) : measured(median_of(bwd), how, d);
}

Json fit_report(const MicrobenchData& d, const OpParams& p) {
  std::map<std::string, std::vector<double>> errors;
  Json cases = Json::array();
  for (const auto& c : d.cases) {
    const double predicted = predict_case(c, p, d.dtype);
    const double e = std::abs(predicted / c.measured_s - 1);
    errors[c.group + (c.backward ? ".backward" : ".forward")].push_back(e);
    cases.push_back({{"group", c.group},
                     {"op", c.op.name},
                     {"b", c.b},
                     {"backward", c.backward},
                     {"measured_s", c.measured_s},
                     {"predicted_s", predicted},
                     {"spread", c.spread}});
  }
  Json groups = Json::object();
  for (const auto& [group, v] : errors) {
    groups[group] = {{"samples", v.size()},
                     {"median_error", median_of(v)},
                     {"worst_error", *std::max_element(v.begin(), v.end())}};
  }
  Json copies = Json::array();
  for (const auto& c : d.copies) {
    copies.push_back(
        {{"bytes", c.bytes}, {"measured_s", c.measured_s}, {"bandwidth", c.bytes / c.measured_s}});
  }
  return {{"groups", groups}, {"copies", copies}, {"cases", cases}};
}

}  // namespace

double predict_case(const BenchCase& c, const OpParams& p, const std::string& dtype) {
  const CaseKernels k = case_kernels(c, p.fused_attention);
  return pass_time(k.kernels, k.nodes, p, dtype);
}

OpParams fit_op_params(const MicrobenchData& d) {
  OpParams p;
  p.device = d.device;
  p.derivation = "measured";
  p.notes = fmt::format("fitted by {} on {}", kBench, d.machine);
  p.units = {d.units, d.units_source};
  p.async = d.async;
  p.async_source = d.async ? "a GPU: kernels are queued behind the host"
                           : "a CPU: every operator runs in the calling thread";
  p.launch_s = measured(d.launch_s,
                        d.async ? "tiny kernels queued behind a long one: device time / count"
                                : "none on a CPU (the host's time covers the kernel's start)",
                        d);
  p.host_s = measured(d.host_s, "median time of a one-element add", d);
  p.host_node_s = measured(
      d.node_s, "chain of one-element multiplies: (backward - kernels x host_s) / nodes", d);
  p.host_tensor_s = measured(
      d.tensor_s, "multi-tensor add over one-element tensors: (time - host_s) / tensors", d);
  p.fused_attention = d.fused_attention;
  p.fused_attention_source = d.fused_attention
                                 ? "this LibTorch runs scaled_dot_product_attention's fused kernels"
                                 : "this LibTorch's attention is matmul, softmax, matmul "
                                   "(models/torch_compat.hpp kHasFusedAttention)";
  p.winograd_source = "the convolution timings fit implicit GEMM; no Winograd on this device";
  p.conv_forward = p.conv_dgrad = p.conv_wgrad = {1, "placeholder"};
  p.conv_fixed_s = {0, "placeholder"};
  p.attention_forward = p.attention_backward = {0.5, "placeholder"};
  fit_bandwidth(d, p);
  fit_gemm(d, p);
  fit_conv(d, p);
  fit_elementwise(d, p);
  fit_attention(d, p);
  p.fit = fit_report(d, p);
  return p;
}

bool solve_small(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x,
                 double singular) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    }
    if (std::abs(a[piv][c]) < singular) return false;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  x.assign(n, 0);
  for (size_t i = 0; i < n; ++i) x[i] = b[i] / a[i][i];
  return true;
}

}  // namespace pipetwin::zoo
