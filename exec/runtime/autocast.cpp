#include "exec/runtime/autocast.hpp"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <exception>
#include <map>

#include "core/error.hpp"
#include "core/precision.hpp"
#include "models/layered_model.hpp"
#include "models/torch_compat.hpp"

namespace pipetwin::exec {

Precision parse_precision(const std::string& text, const std::string& flag) {
  // The dtype's row in core/precision.hpp's table decides; here only its LibTorch types.
  const DtypeInfo& d = dtype_info(text, flag);
  if (!d.executable) {
    throw InputError(fmt::format("{}: the executor does not train in {} (it trains in: {})", flag,
                                 text, fmt::join(executable_dtype_names(), ", ")));
  }
  Precision p;
  if (d.name == "float64") {
    p.float64 = true;
  } else if (d.mixed) {
    p.autocast = d.name == "bfloat16" ? at::kBFloat16 : at::kHalf;
  }
  return p;
}

Precision parse_precision_flags(const std::string& dtype, bool float64) {
  if (dtype.empty()) return parse_precision(float64 ? "float64" : "float32");
  const Precision p = parse_precision(dtype);
  if (float64 && !p.float64)
    throw InputError(fmt::format("--float64: means --dtype float64, but --dtype is {}", dtype));
  return p;
}

std::string precision_name(const Precision& p) {
  if (p.autocast == at::kBFloat16) return "bfloat16";
  if (p.autocast == at::kHalf) return "float16";
  return p.float64 ? "float64" : "float32";
}

std::string precision_tag(const Precision& p) {
  if (p.autocast == at::kBFloat16) return "bf16";
  if (p.autocast == at::kHalf) return "f16";
  return p.float64 ? "f64" : "f32";
}

at::ScalarType weight_dtype(const Precision& p) {
  return p.float64 ? at::kDouble : at::kFloat;
}

c10::DeviceType autocast_device_type(const std::string& device) {
  return device.rfind("cuda", 0) == 0 ? c10::DeviceType::CUDA : c10::DeviceType::CPU;
}

void check_precision_device(const Precision& p, const std::string& device) {
  if (p.autocast == at::kHalf && autocast_device_type(device) != c10::DeviceType::CUDA) {
    throw InputError(fmt::format(
        "--dtype float16: float16 autocast needs --device cuda (LibTorch's CPU autocast supports "
        "bfloat16 only; the device here is {})",
        device));
  }
}

at::Tensor float32_if_reduced(const at::Tensor& y) {
  const bool reduced = y.scalar_type() == at::kBFloat16 || y.scalar_type() == at::kHalf;
  return reduced ? y.to(at::kFloat) : y;
}

void check_cpu_autocast_trains(models::LayeredModel& model, const at::Tensor& input,
                               at::ScalarType dtype) {
  std::map<int, at::Tensor> values{{models::LayeredModel::kModelInput, input}};
  for (int l = 0; l < static_cast<int>(model.layers.size()); ++l) {
    auto& layer = model.layers[static_cast<size_t>(l)];
    try {
      std::map<int, at::Tensor> in;
      for (const auto& [k, v] : values)
        in[k] = v.is_floating_point() ? v.detach().requires_grad_(true) : v;
      {
        const AutocastGuard guard(at::kCPU, dtype);
        model.forward_layers({l}, in);
      }
      const at::Tensor y = in.at(l);
      if (y.requires_grad()) float32_if_reduced(y).sum().backward();
      values[l] = y.detach();
    } catch (const std::exception& e) {  // c10::Error, or oneDNN's own (dnnl::error)
      const auto* c10 = dynamic_cast<const c10::Error*>(&e);
      const std::string what = c10 ? c10->what_without_backtrace() : e.what();
      throw InputError(fmt::format(
          "--dtype {}: layer {} ({}) of model {} cannot train under this CPU's autocast: {}",
          precision_name({false, dtype}), l, layer.name, model.name,
          what.substr(0, what.find('\n'))));
    }
    for (auto& p : layer.parameters()) p.mutable_grad() = at::Tensor();
  }
}

AutocastGuard::AutocastGuard(c10::DeviceType device, at::ScalarType dtype, bool enabled)
    : device_(device), enabled_(enabled) {
  if (!enabled_) return;
  const models::AutocastState was = models::autocast_state(device_);
  was_enabled_ = was.enabled;
  was_dtype_ = was.dtype;
  models::set_autocast_state(device_, {true, dtype});
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  // Python's torch.autocast.__exit__: the outermost region's end drops the cast cache.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  models::set_autocast_state(device_, {was_enabled_, was_dtype_});
}

}  // namespace pipetwin::exec
