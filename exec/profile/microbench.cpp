#include "exec/profile/microbench.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/platform/device.hpp"
#include "exec/platform/host.hpp"
#include "models/torch_compat.hpp"

namespace pipetwin::exec {

namespace {

using zoo::BenchCase;
using zoo::ConvPass;
using zoo::EltClass;
using zoo::OpSpec;

// Timing: the median (and spread) of `repeats` runs after `warmup`.
struct Timing {
  double median = 0, spread = 0;
};

class Timer {
 public:
  Timer(Device& device, const MicrobenchOptions& o) : device_(device), o_(o) {}

  // fn() timed as a whole, `per` operations per call.
  Timing time(const std::function<void()>& fn, int per = 1) {
    std::vector<double> t;
    for (int i = 0; i < o_.warmup + o_.repeats; ++i) {
      device_.synchronize();
      const auto a = device_.mark();
      fn();
      const double s = device_.seconds(*a, *device_.mark()) / per;
      if (i >= o_.warmup) t.push_back(s);
    }
    return summarise(t);
  }

  // The backward of a fresh forward each run: make() builds the graph (untimed) and returns the
  // output and the gradient to send into it.
  Timing backward(const std::function<std::pair<at::Tensor, at::Tensor>()>& make) {
    std::vector<double> t;
    for (int i = 0; i < o_.warmup + o_.repeats; ++i) {
      auto [y, g] = make();
      device_.synchronize();
      const auto a = device_.mark();
      y.backward(g);
      const double s = device_.seconds(*a, *device_.mark());
      if (i >= o_.warmup) t.push_back(s);
    }
    return summarise(t);
  }

 private:
  static Timing summarise(std::vector<double> t) {
    std::sort(t.begin(), t.end());
    const double m = t[t.size() / 2];
    return {m, m > 0 ? (t.back() - t.front()) / m : 0};
  }

  Device& device_;
  const MicrobenchOptions& o_;
};

struct Bench {
  Device& device;
  Timer timer;
  at::TensorOptions opt;
  zoo::MicrobenchData data;
  const MicrobenchOptions& o;

  at::Tensor leaf(at::IntArrayRef shape, bool grad = true) const {
    return at::randn(shape, opt).requires_grad_(grad);
  }

  // Times fn's forward and (when `backward`) the backward of its output.
  void add(const std::string& group, const OpSpec& op, int b, bool first, bool backward,
           const std::function<at::Tensor()>& fn) {
    BenchCase c{group, op, b, first, false, ConvPass::forward, 0, 0};
    const Timing f = timer.time([&] { fn(); });
    c.measured_s = f.median;
    c.spread = f.spread;
    data.cases.push_back(c);
    if (!backward) return;
    const Timing bw = timer.backward([&] {
      at::Tensor y = fn();
      return std::make_pair(y, at::ones_like(y));
    });
    c.backward = true;
    c.measured_s = bw.median;
    c.spread = bw.spread;
    data.cases.push_back(c);
  }
};

void probe_fixed_costs(Bench& b) {
  constexpr int kOps = 200, kChain = 64, kTensors = 64;
  const at::Tensor x = b.leaf({1}), y = b.leaf({1});
  b.data.host_s = b.timer
                      .time(
                          [&] {
                            for (int i = 0; i < kOps; ++i) (void)at::add(x, y);
                          },
                          kOps)
                      .median;
  const Timing chain = b.timer.backward([&] {
    at::Tensor z = b.leaf({1});
    at::Tensor v = z;
    for (int i = 0; i < kChain; ++i) v = v * 1.0001;
    return std::make_pair(v, at::ones_like(v));
  });
  b.data.node_s = std::max(0.0, chain.median / kChain - b.data.host_s);
  std::vector<at::Tensor> params, grads;
  for (int i = 0; i < kTensors; ++i) {
    params.push_back(at::zeros({1}, b.opt));
    grads.push_back(at::ones({1}, b.opt));
  }
  const double foreach = b.timer.time([&] { at::_foreach_add_(params, grads, -0.1); }).median;
  b.data.tensor_s = std::max(0.0, (foreach - b.data.host_s) / kTensors);
  if (!b.device.is_cuda()) return;
  // A GPU's launch latency: tiny kernels queued behind a long GEMM run back to back; the time
  // between the marks around them on the device, per kernel.
  const at::Tensor big = at::randn({4096, 4096}, b.opt);
  std::vector<double> per_kernel;
  for (int r = 0; r < b.o.warmup + b.o.repeats; ++r) {
    (void)at::mm(big, big);
    const auto a = b.device.mark();
    for (int i = 0; i < kOps; ++i) (void)at::add(x, y);
    const double s = b.device.seconds(*a, *b.device.mark()) / kOps;
    if (r >= b.o.warmup) per_kernel.push_back(s);
  }
  std::sort(per_kernel.begin(), per_kernel.end());
  b.data.launch_s = per_kernel[per_kernel.size() / 2];
}

void bench_copies(Bench& b) {
  const int64_t top = b.o.quick ? (int64_t{1} << 24) : (int64_t{1} << 28);  // bytes
  for (int64_t bytes = int64_t{1} << 16; bytes <= top; bytes *= 4) {
    const int64_t n = bytes / static_cast<int64_t>(at::elementSize(b.opt.dtype().toScalarType()));
    const at::Tensor src = at::randn({n}, b.opt), dst = at::empty({n}, b.opt);
    const at::NoGradGuard no_grad;
    const Timing t = b.timer.time([&] { dst.copy_(src); });
    b.data.copies.push_back({2.0 * static_cast<double>(bytes), t.median});
  }
}

void bench_gemms(Bench& b) {
  // (batch, m, n, k): the transformer, MLP and head shapes of the zoo's test sizes and beyond.
  std::vector<std::array<int64_t, 4>> shapes = {
      {1, 1, 256, 64},     {1, 8, 256, 256},     {1, 8, 10, 256},     {1, 32, 512, 128},
      {1, 65, 576, 192},   {1, 130, 192, 192},   {1, 260, 768, 192},  {1, 520, 192, 768},
      {1, 128, 384, 128},  {1, 512, 128, 512},   {1, 1024, 512, 128}, {1, 64, 1024, 128},
      {1, 512, 1024, 128}, {1, 192, 192, 520},   {1, 768, 192, 520},  {1, 128, 128, 1024},
      {1, 512, 512, 512},  {1, 1024, 1024, 256}, {1, 100, 100, 100},  {1, 33, 65, 17},
      {6, 65, 65, 64},     {24, 65, 64, 65},     {16, 128, 128, 64},  {16, 128, 64, 128},
      {2, 64, 64, 64},     {8, 64, 64, 64},      {4, 8, 8, 8},        {1, 2048, 256, 256}};
  if (b.o.quick) shapes.resize(10);
  for (const auto& [batch, m, n, k] : shapes) {
    const OpSpec op = zoo::bmm_op("mm", static_cast<double>(batch), m, n, k);
    const at::Tensor x = b.leaf({batch, m, k}), w = b.leaf({batch, k, n});
    b.add("gemm", op, 1, false, false,
          [&] { return batch == 1 ? at::mm(x[0], w[0]) : at::bmm(x, w); });
  }
  // Linear layers forward and backward (a check of the backward products, not fitted).
  for (const auto& [rows, in, out] :
       std::vector<std::array<int64_t, 3>>{{520, 192, 576}, {512, 128, 512}, {8, 256, 256}}) {
    const at::Tensor x = b.leaf({rows, in}), w = b.leaf({out, in}), bias = b.leaf({out});
    b.add("linear", zoo::linear_op("linear", static_cast<double>(rows), in, out), 1, false, true,
          [&] { return at::linear(x, w, bias); });
  }
}

void bench_convs(Bench& b) {
  // (c_in, c_out, kernel, side, stride, batch)
  std::vector<std::array<int64_t, 6>> shapes = {
      {16, 16, 3, 32, 1, 8}, {32, 32, 3, 16, 1, 8},  {64, 64, 3, 8, 1, 8},  {16, 32, 3, 32, 2, 4},
      {3, 16, 3, 32, 1, 4},  {64, 128, 1, 16, 1, 4}, {3, 192, 4, 32, 4, 8}, {128, 128, 3, 16, 1, 2},
      {16, 16, 3, 32, 1, 1}, {32, 32, 3, 16, 1, 1},  {64, 64, 3, 8, 1, 1},  {32, 64, 3, 16, 2, 2},
      {3, 16, 3, 32, 1, 1},  {3, 192, 4, 32, 4, 1}};
  if (b.o.quick) shapes.resize(3);
  for (const auto& [ci, co, k, side, stride, batch] : shapes) {
    const int64_t pad = k == stride ? 0 : k / 2;
    const OpSpec op = zoo::conv_op("conv", ci, co, k, side, side, stride, pad);
    const at::Tensor w0 = b.leaf({co, ci, k, k}, false),
                     x0 = b.leaf({batch, ci, side, side}, false);
    b.add("conv", op, static_cast<int>(batch), false, false,
          [&] { return at::conv2d(x0, w0, {}, stride, pad); });
    for (const ConvPass pass : {ConvPass::dgrad, ConvPass::wgrad}) {
      const bool dgrad = pass == ConvPass::dgrad;
      if (dgrad && ci == 3) continue;  // an image's convolution is a first layer: no dgrad
      const Timing t = b.timer.backward([&] {
        const at::Tensor x = x0.detach().requires_grad_(dgrad),
                         w = w0.detach().requires_grad_(!dgrad);
        at::Tensor y = at::conv2d(x, w, {}, stride, pad);
        return std::make_pair(y, at::ones_like(y));
      });
      b.data.cases.push_back(
          {"conv", op, static_cast<int>(batch), false, true, pass, t.median, t.spread});
    }
  }
}

void bench_shaped_elt(Bench& b, EltClass c, int64_t n, const OpSpec& op);

// One element-wise class at `n` elements: its op spec and the LibTorch call.
void bench_elt(Bench& b, EltClass c, int64_t n) {
  const std::string name = zoo::elt_name(c);
  const OpSpec op = zoo::elt_op(name, c, static_cast<double>(n));
  auto timed = [&](const std::function<at::Tensor()>& fn, bool backward = true) {
    b.add("elementwise", op, 1, false, backward, fn);
  };
  const at::Tensor flat = b.leaf({n}), rows128 = b.leaf({n / 128, 128});
  switch (c) {
    case EltClass::copy: {
      const at::Tensor x = b.leaf({n / 64, 64});
      return timed([&] { return x.t().contiguous(); });
    }
    case EltClass::fill:
      return timed([&] { return at::zeros({n}, b.opt); }, false);
    case EltClass::add:
      return timed([&] { return flat + flat; });  // backward: the fork's accumulation
    case EltClass::add_bcast: {
      const at::Tensor x = b.leaf({n / 256, 256}, false), p = b.leaf({256});
      return timed([&] { return x + p; });
    }
    case EltClass::reduce:
      return timed([&] { return rows128.mean(1); });
    case EltClass::relu:
      return timed([&] { return at::relu(flat); });
    case EltClass::gelu:
      return timed([&] { return at::gelu(flat); });
    case EltClass::gelu_tanh:
      return timed([&] { return at::gelu(flat, "tanh"); });
    case EltClass::tanh:
      return timed([&] { return at::tanh(flat); });
    case EltClass::scale:
      return timed([&] { return flat / 8.0; });
    case EltClass::mask: {
      const at::Tensor x = b.leaf({n / 4096, 64, 64});
      const at::Tensor m = at::ones({64, 64}, b.opt.dtype(at::kBool)).triu(1);
      return timed([&] { return x.masked_fill(m, -1e9); });
    }
    case EltClass::softmax:
      return timed([&] { return at::softmax(rows128, -1); });
    case EltClass::log_softmax:
      return timed([&] { return at::log_softmax(rows128, -1); });
    default:
      return bench_shaped_elt(b, c, n, op);
  }
}

// Classes with parameters or shapes of their own.
void bench_shaped_elt(Bench& b, EltClass c, int64_t n, const OpSpec& op) {
  auto add = [&](const std::function<at::Tensor()>& fn, const OpSpec& spec) {
    b.add("elementwise", spec, 1, false, true, fn);
  };
  const at::Tensor rows128 = b.leaf({n / 128, 128});
  if (c == EltClass::layer_norm) {
    const at::Tensor x = b.leaf({n / 192, 192}), w = b.leaf({192}), bias = b.leaf({192});
    return add([&] { return at::layer_norm(x, {192}, w, bias); }, op);
  }
  if (c == EltClass::batch_norm) {
    const int64_t ch = std::max<int64_t>(1, n / 1024);
    const at::Tensor x = b.leaf({4, ch, 16, 16}), w = b.leaf({ch}), bias = b.leaf({ch});
    return add([&] { return at::batch_norm(x, w, bias, {}, {}, true, 0.1, 1e-5, false); }, op);
  }
  if (c == EltClass::pool) {
    const at::Tensor x = b.leaf({2, std::max<int64_t>(1, n / 2048), 32, 32});
    return add([&] { return at::max_pool2d(x, 3, 2, 1); }, op);
  }
  if (c == EltClass::select) {
    const at::Tensor x = b.leaf({1, n / 128, 128});
    return add([&] { return x.select(1, 0); }, op);
  }
  if (c == EltClass::nll) {
    const at::Tensor target = at::zeros({n / 128}, b.opt.dtype(at::kLong));
    return add([&] { return at::nll_loss(rows128, target, {}, at::Reduction::None); }, op);
  }
  if (c == EltClass::gather) {  // the embedding's forward and backward (scatter_add)
    const at::Tensor table = b.leaf({1024, 128});
    const at::Tensor ids = at::randint(1024, {n / 128}, b.opt.dtype(at::kLong));
    const OpSpec emb = zoo::embedding_op("embedding", static_cast<double>(n / 128), 128, 1024);
    return add([&] { return at::embedding(table, ids); }, emb);
  }
}

void bench_elementwise(Bench& b) {
  std::vector<int64_t> sizes = {int64_t{1} << 14, int64_t{1} << 16, int64_t{1} << 18,
                                int64_t{1} << 20};
  if (b.o.quick) sizes = {int64_t{1} << 14, int64_t{1} << 18};
  for (EltClass c : zoo::all_elt_classes()) {
    if (c == EltClass::dropout || c == EltClass::scatter_add) continue;  // dropout: by traffic
    for (int64_t n : sizes) bench_elt(b, c, n);
  }
}

// Attention as models/layers.cpp runs it, from a fused qkv [b, s, 3 d].
void bench_attention(Bench& b) {
  std::vector<std::array<int64_t, 5>> shapes = {// heads, seq, head dim, batch, causal
                                                {3, 65, 64, 4, 0},
                                                {2, 128, 64, 4, 0},
                                                {2, 64, 64, 8, 1},
                                                {12, 128, 64, 2, 1}};
  if (b.o.quick) shapes.resize(2);
  const bool fused = models::kHasFusedAttention;
  for (const auto& [heads, s, hd, batch, causal] : shapes) {
    const OpSpec op = zoo::attention_op("attention", heads, s, s, hd, causal != 0, 0);
    const at::Tensor qkv = b.leaf({batch, s, 3 * heads * hd});
    b.add("attention", op, static_cast<int>(batch), false, true, [&] {
      const auto parts = qkv.view({batch, s, 3, heads, hd}).permute({2, 0, 3, 1, 4});
      const auto q = parts[0], k = parts[1], v = parts[2];
      at::Tensor out;
      if (fused) {
        out = models::fused_attention(q, k, v, 0.0, causal != 0);
      } else {
        auto scores = at::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
        if (causal) {
          const auto future = at::ones({s, s}, b.opt.dtype(at::kBool)).triu(1);
          scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
        }
        out = at::matmul(at::softmax(scores, -1), v);
      }
      return out.transpose(1, 2).reshape({batch, s, heads * hd});
    });
  }
}

at::ScalarType scalar_type_of(const std::string& dtype) {
  if (dtype == "float32") return at::kFloat;
  if (dtype == "float64") return at::kDouble;
  if (dtype == "bfloat16") return at::kBFloat16;
  if (dtype == "float16") return at::kHalf;
  throw InputError(
      fmt::format("microbench: dtype {} is not one LibTorch computes in (float32, "
                  "float64, bfloat16, float16)",
                  dtype));
}

// The CPU's model name (/proc/cpuinfo), or "" where there is none.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
  }
  return "";
}

std::string machine_words(const Device& device, const MicrobenchOptions& o) {
  const unsigned cores = std::thread::hardware_concurrency();
  const std::string what = device.is_cuda() ? device.describe() : "CPU " + cpu_model();
  return fmt::format("{} ({} hardware threads), {} intra-op thread(s), {}", what, cores, o.threads,
                     o.dtype);
}

}  // namespace

zoo::MicrobenchData run_microbench(const MicrobenchOptions& o,
                                   const std::function<void(const std::string&)>& progress) {
  configure_compute_thread(o.threads, 0, o.pin);
  const std::unique_ptr<Device> device = make_device(o.torch_device, 0);
  device->bind(0);
  Bench b{*device,
          Timer(*device, o),
          at::TensorOptions().dtype(scalar_type_of(o.dtype)).device(device->torch_device()),
          {},
          o};
  b.data.device = o.device;
  b.data.dtype = o.dtype;
  b.data.machine = machine_words(*device, o);
  b.data.async = device->is_cuda();
  b.data.units = o.units;
  b.data.units_source = o.units_source;
  b.data.fused_attention = models::kHasFusedAttention;  // as models/layers.cpp without dropout
  auto say = [&](const std::string& what) {
    if (progress) progress(what);
  };
  say("fixed costs: an operator, an autograd node, a parameter tensor");
  probe_fixed_costs(b);
  say("copies (bandwidth)");
  bench_copies(b);
  say("GEMMs");
  bench_gemms(b);
  say("convolutions");
  bench_convs(b);
  say("element-wise classes");
  bench_elementwise(b);
  say("attention");
  bench_attention(b);
  return b.data;
}

}  // namespace pipetwin::exec
