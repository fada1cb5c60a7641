#include "profiles/zoo/op_cost.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/precision.hpp"

namespace pipetwin::zoo {

namespace {

double d(int64_t v) {
  return static_cast<double>(v);
}

// Bytes per element of a kernel: the dtype's, or 4 for an fp32 kernel under mixed precision.
double elem_bytes(const std::string& dtype, bool fp32) {
  const DtypeInfo& info = dtype_info(dtype, "op cost: dtype");
  return fp32 && info.mixed ? 4.0 : info.bytes;
}

// The dtype whose GEMM parameters price the products of `dtype`.
const GemmParams& gemm_params(const OpParams& p, const std::string& dtype) {
  return p.gemm_for(dtype);
}

double implicit_gemm(const OpSpec& c, ConvPass pass, double b, const OpParams& p,
                     const std::string& dtype) {
  const double kk = d(c.kh * c.kw);
  const double out = b * d(c.oh * c.ow), in = b * d(c.h * c.w);
  GemmCost g;
  double efficiency = 1;
  switch (pass) {
    case ConvPass::forward:
      g = gemm_cost(1, out, d(c.c_out), d(c.c_in) * kk, p, dtype);
      efficiency = p.conv_forward.value;
      break;
    case ConvPass::dgrad:
      g = gemm_cost(1, in, d(c.c_in), d(c.c_out) * kk, p, dtype);
      efficiency = p.conv_dgrad.value;
      break;
    case ConvPass::wgrad:
      g = gemm_cost(1, d(c.c_out), d(c.c_in) * kk, out, p, dtype);
      efficiency = p.conv_wgrad.value;
      break;
  }
  // Memory: the input and output maps and the weights, not the im2col matrix (implicit).
  const double bytes =
      (in * d(c.c_in) + out * d(c.c_out) + kk * d(c.c_in * c.c_out)) * elem_bytes(dtype, false);
  return p.conv_fixed_s.value + std::max(g.compute_s / efficiency, bytes / bandwidth_for(bytes, p));
}

// Winograd F(2x2, 3x3): 16 products over the 4x4 transformed tiles of 2x2 outputs.
double winograd(const OpSpec& c, ConvPass pass, double b, const OpParams& p,
                const std::string& dtype) {
  const bool fwd = pass == ConvPass::forward;
  const double oh = d(fwd ? c.oh : c.h), ow = d(fwd ? c.ow : c.w);
  const double from = fwd ? d(c.c_in) : d(c.c_out), to = fwd ? d(c.c_out) : d(c.c_in);
  const double tiles = b * std::ceil(oh / 2) * std::ceil(ow / 2);
  const GemmCost g = gemm_cost(16, tiles, to, from, p, dtype);
  const double efficiency = fwd ? p.conv_forward.value : p.conv_dgrad.value;
  // Transforms: the input read and 16 / 4 of it written, the 16 products read and the output
  // written (4 x the output), the weights transformed once.
  const double in_elems = b * d(fwd ? c.h * c.w : c.oh * c.ow) * from;
  const double out_elems = b * oh * ow * to;
  const double bytes = (in_elems * 5 + out_elems * 5 + 16 * from * to) * elem_bytes(dtype, false);
  return p.conv_fixed_s.value + g.compute_s / efficiency + bytes / bandwidth_for(bytes, p);
}

double elementwise_body(const Kernel& k, const OpParams& p, const std::string& dtype) {
  const double bytes = (k.reads + k.writes) * elem_bytes(dtype, k.fp32);
  double t = bytes / bandwidth_for(bytes, p);
  if (const auto it = p.elementwise.find(elt_name(k.elt)); it != p.elementwise.end()) {
    const double rate = k.backward ? it->second.backward.value : it->second.forward.value;
    t = std::max(t, k.elems / rate);
  }
  return t;
}

double attention_body(const Kernel& k, const OpParams& p, const std::string& dtype) {
  const GemmParams& g = gemm_params(p, dtype);
  const double eff = k.backward ? p.attention_backward.value : p.attention_forward.value;
  const double compute = k.flops / (p.units.value * g.unit_flops.value * eff);
  const double bytes = (k.reads + k.writes) * elem_bytes(dtype, false);
  return std::max(compute, bytes / bandwidth_for(bytes, p));
}

int optimizer_calls(const std::string& optimizer) {
  const OptimizerKind kind = parse_optimizer(optimizer, "op cost: optimizer");
  return kind.moments == 0 ? 1 : kind.moments == 1 ? 3 : 8;
}

// One kernel per call of the rule, each moving its share of the step's traffic; the host loops
// over the layer's parameter tensors (CPU) or launches one multi-tensor kernel (GPU: 0 per tensor).
double step_time(const ZooLayer& layer, int tensors, const OpParams& p, const OpCostOptions& o) {
  if (layer.params <= 0) return 0;
  const ParamBytes per_param =
      param_bytes(o.dtype, parse_optimizer(o.optimizer, "op cost: optimizer"));
  const int calls = optimizer_calls(o.optimizer);
  const double bytes = d(layer.params) * per_param.step_traffic;
  const double body = bytes / bandwidth_for(bytes, p) / calls;
  const double host = p.host_s.value + std::max(tensors, 1) * p.host_tensor_s.value;
  double host_at = 0, device_at = 0;
  for (int i = 0; i < calls; ++i) {
    if (p.async) {
      host_at += host;
      device_at = std::max(host_at, device_at) + p.launch_s.value + body;
    } else {
      device_at += host + p.launch_s.value + body;
    }
  }
  return device_at;
}

double fair_share(double task_s, double fixed_s) {
  return task_s > 0 ? 2.0 - std::min(fixed_s, task_s) / task_s : 1.0;
}

double host_sum(const std::vector<Kernel>& kernels, int nodes, const OpParams& p) {
  return d(static_cast<int64_t>(kernels.size())) * p.host_s.value + nodes * p.host_node_s.value;
}

// The file's layer refinement (op_params.hpp), when it has one.
LayerCost refine(LayerCost c, const OpParams& p, bool first, bool last) {
  if (!p.refinement) return c;
  const LayerRefinement& r = *p.refinement;
  const double s = r.scale.value;
  c.forward_s *= s;
  c.backward_s *= s;
  c.backward_weight_s *= s;
  c.forward_host_s *= s;
  c.backward_host_s *= s;
  const double fwd = (first ? r.first_forward_s.value : 0) + (last ? r.last_forward_s.value : 0);
  const double bwd = (first ? r.first_backward_s.value : 0) + (last ? r.last_backward_s.value : 0);
  c.forward_s += fwd;
  c.forward_host_s += fwd;
  c.backward_s += bwd;
  c.backward_host_s += bwd;
  return c;
}

}  // namespace

const char* conv_algo_name(ConvAlgo a) {
  return a == ConvAlgo::winograd ? "winograd" : "implicit_gemm";
}

double bandwidth_for(double bytes, const OpParams& p) {
  return p.cache_bytes.value > 0 && bytes <= p.cache_bytes.value ? p.cache_bandwidth.value
                                                                 : p.bandwidth.value;
}

GemmCost gemm_cost(double batch, double m, double n, double k, const OpParams& p,
                   const std::string& dtype) {
  const GemmParams& g = gemm_params(p, dtype);
  GemmCost c;
  if (batch <= 0 || m <= 0 || n <= 0 || k <= 0) return c;
  const double tm = g.tile_m.value, tn = g.tile_n.value;
  c.tiles = batch * std::ceil(m / tm) * std::ceil(n / tn);
  c.waves = std::ceil(c.tiles / p.units.value);
  c.compute_s = c.waves * 2 * tm * tn * (k + g.tile_k_overhead.value) / g.unit_flops.value;
  const double bytes = batch * (m * k + k * n + m * n) * elem_bytes(dtype, false);
  c.memory_s = bytes / bandwidth_for(bytes, p);
  return c;
}

ConvCost conv_cost(const OpSpec& conv, ConvPass pass, double b, const OpParams& p,
                   const std::string& dtype) {
  ConvCost best{ConvAlgo::implicit_gemm, implicit_gemm(conv, pass, b, p, dtype)};
  const bool winograd_shape = conv.kh == 3 && conv.kw == 3 && conv.stride == 1 &&
                              conv.oh == conv.h && conv.ow == conv.w && pass != ConvPass::wgrad;
  const bool winograd_dtype = std::find(p.winograd_dtypes.begin(), p.winograd_dtypes.end(),
                                        dtype) != p.winograd_dtypes.end();
  if (winograd_shape && winograd_dtype) {
    const double t = winograd(conv, pass, b, p, dtype);
    if (t < best.body_s) best = {ConvAlgo::winograd, t};
  }
  return best;
}

KernelTime kernel_time(const Kernel& k, const OpParams& p, const std::string& dtype) {
  double body = 0;
  switch (k.kind) {
    case OpKind::gemm:
      body = gemm_cost(k.batch, k.m, k.n, k.k, p, dtype).body_s();
      break;
    case OpKind::conv:
      body = conv_cost(k.conv, k.conv_pass, k.batch, p, dtype).body_s;
      break;
    case OpKind::attention:
      body = attention_body(k, p, dtype);
      break;
    case OpKind::elementwise:
    case OpKind::embedding:
      body = elementwise_body(k, p, dtype);
      break;
  }
  return {p.host_s.value, p.launch_s.value + body};
}

double pass_time(const std::vector<Kernel>& kernels, int nodes, const OpParams& p,
                 const std::string& dtype) {
  if (kernels.empty()) return nodes * p.host_node_s.value;
  // The autograd engine's work per node is host time spread over the pass's kernels.
  const double node_share = nodes * p.host_node_s.value / d(static_cast<int64_t>(kernels.size()));
  double host_at = 0, device_at = 0;
  for (const auto& k : kernels) {
    const KernelTime t = kernel_time(k, p, dtype);
    if (p.async) {
      host_at += t.host_s + node_share;
      device_at = std::max(host_at, device_at) + t.device_s;
    } else {
      device_at += t.host_s + node_share + t.device_s;
    }
  }
  return device_at;
}

std::vector<OpSpec> layer_ops(const ZooLayer& layer) {
  return layer.ops.empty() ? generic_ops(layer.forward_flops, layer.params, layer.traffic_elems)
                           : layer.ops;
}

LayerKernels layer_kernels(const ZooLayer& layer, int b, const OpParams& p,
                           const OpCostOptions& o) {
  ExpandOptions e;
  e.fused_attention = p.fused_attention;
  e.first_layer = o.first_layer;
  LayerKernels k = expand_ops(layer_ops(layer), b, e);
  if (is_mixed_precision(o.dtype)) {  // autocast casts every weight of a product per forward
    std::vector<Kernel> casts;
    for (const auto& op : layer_ops(layer)) {
      if (!(op.kind == OpKind::gemm && op.weight) && op.kind != OpKind::conv) continue;
      Kernel c;
      c.name = op.name + ".cast";
      c.elt = EltClass::copy;
      c.elems = op.kind == OpKind::gemm ? d(op.n * op.k) : d(op.c_out * op.c_in * op.kh * op.kw);
      c.reads = 2 * c.elems;  // 4-byte reads in 2-byte units
      c.writes = c.elems;
      casts.push_back(c);
    }
    k.forward.insert(k.forward.begin(), casts.begin(), casts.end());
  }
  return k;
}

LayerCost layer_cost(const ZooLayer& layer, int b, const OpParams& p, const OpCostOptions& o) {
  const LayerKernels k = layer_kernels(layer, b, p, o);
  std::vector<Kernel> backward = k.input_half;
  backward.insert(backward.end(), k.weight_half.begin(), k.weight_half.end());
  LayerCost c;
  c.forward_s = pass_time(k.forward, 0, p, o.dtype);
  c.backward_s = pass_time(backward, k.nodes, p, o.dtype);
  c.backward_weight_s = k.weight_half.empty() ? 0 : pass_time(k.weight_half, 0, p, o.dtype);
  c.step_s = step_time(layer, k.param_tensors, p, o);
  c.forward_host_s = host_sum(k.forward, 0, p);
  c.backward_host_s = host_sum(backward, k.nodes, p);
  return c;
}

Profile op_level_profile(const ZooModel& model, const DeviceSpec& device, const OpParams& p,
                         const AnalyticOptions& options) {
  Profile prof = analytic_memory_profile(model, device, options);
  p.gemm_for(options.dtype);  // an InputError naming the file when the dtype is missing
  prof.notes = fmt::format("op-level model over the zoo descriptor ({}); op parameters: {} ({})",
                           model.description, p.origin.empty() ? p.device : p.origin, p.derivation);
  OpCostOptions o;
  o.dtype = options.dtype;
  o.optimizer = options.optimizer;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const ZooLayer& l = model.layers[i];
    LayerProfile& lp = prof.layers[i];
    o.first_layer = i == 0;
    for (int b : options.micro_batches) {
      const LayerCost c = refine(layer_cost(l, b, p, o), p, i == 0, i + 1 == model.layers.size());
      LayerTiming t;
      t.micro_batch = b;
      t.forward_s = c.forward_s;
      t.backward_s = c.backward_s;
      t.recompute_s = c.forward_s;
      t.contention = fair_share(c.forward_s, c.forward_host_s);
      t.contention_backward = fair_share(c.backward_s, c.backward_host_s);
      t.backward_weight_s = c.backward_weight_s;
      lp.timings.push_back(t);
      lp.optimizer_step_s = c.step_s;
    }
  }
  return prof;
}

}  // namespace pipetwin::zoo
