#include "core/precision.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace pipetwin {

namespace {

constexpr double kMasterBytes = 4;  // float32 master weights and optimizer state

// Bytes the step moves per byte of the weights it updates, for `moments` state buffers of that
// precision (the plain-dtype row of the header; the mixed row is the same per master byte).
double traffic_per_weight_byte(int moments) {
  return 3.0 + 2.0 * moments;
}

const std::vector<OptimizerKind>& optimizer_table() {
  static const std::vector<OptimizerKind> table = {{"sgd", 0}, {"momentum", 1}, {"adam", 2}};
  return table;
}

}  // namespace

const std::vector<DtypeInfo>& dtype_table() {
  // tfloat32 stores float32 and multiplies on the tensor cores' 19-bit path (NVIDIA A100 white
  // paper): float32's bytes, its own peak, no master copy.
  static const std::vector<DtypeInfo> table = {
      {"float32", 4, false, "float32", true},   {"tfloat32", 4, false, "tfloat32", false},
      {"float16", 2, true, "float16", true},    {"bfloat16", 2, true, "bfloat16", true},
      {"float64", 8, false, "float64", true},
  };
  return table;
}

std::vector<std::string> dtype_names() {
  std::vector<std::string> out;
  for (const auto& d : dtype_table()) out.push_back(d.name);
  return out;
}

const DtypeInfo& dtype_info(const std::string& name, const std::string& origin) {
  for (const auto& d : dtype_table()) {
    if (d.name == name) return d;
  }
  throw InputError(fmt::format("{}: unknown dtype \"{}\" (known: {})", origin, name,
                               fmt::join(dtype_names(), ", ")));
}

std::vector<std::string> executable_dtype_names() {
  std::vector<std::string> out;
  for (const auto& d : dtype_table()) {
    if (d.executable) out.push_back(d.name);
  }
  return out;
}

double dtype_bytes(const std::string& name, const std::string& origin) {
  return dtype_info(name, origin).bytes;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> out;
  for (const auto& o : optimizer_table()) out.push_back(o.name);
  return out;
}

OptimizerKind parse_optimizer(const std::string& name, const std::string& origin) {
  for (const auto& o : optimizer_table()) {
    if (o.name == name) return o;
  }
  throw InputError(fmt::format("{}: unknown optimizer \"{}\" (known: {})", origin, name,
                               fmt::join(optimizer_names(), ", ")));
}

bool is_mixed_precision(const std::string& dtype) {
  return dtype_info(dtype).mixed;
}

ParamBytes param_bytes(const std::string& dtype, const OptimizerKind& optimizer) {
  const double e = dtype_bytes(dtype, "dtype");
  ParamBytes b;
  b.weight = e;
  b.gradient = e;
  if (is_mixed_precision(dtype)) {
    b.master = kMasterBytes;
    b.state = optimizer.moments * kMasterBytes;
    // Read and write the master weight, read the gradient, write the 2-byte weight, and read and
    // write each state buffer.
    b.step_traffic = 2 * kMasterBytes + b.gradient + b.weight + 2 * b.state;
  } else {
    b.state = optimizer.moments * e;
    b.step_traffic = traffic_per_weight_byte(optimizer.moments) * e;
  }
  return b;
}

void apply_optimizer(Profile& profile, const OptimizerKind& optimizer, const std::string& origin) {
  if (profile.optimizer == optimizer.name) return;
  double time_ratio = 0;
  if (profile.optimizer.empty()) {
    bool any_step = false;
    for (const auto& l : profile.layers) any_step = any_step || l.optimizer_step_s > 0;
    if (any_step) {
      throw InputError(fmt::format(
          "{} {}: the profile of {} does not say which optimizer its step times were measured "
          "with (field \"optimizer\"); profile again with `pipetwin profile --optimizer {}`",
          origin, optimizer.name, profile.model, optimizer.name));
    }
  } else {
    const OptimizerKind measured = parse_optimizer(profile.optimizer, "profile: optimizer");
    time_ratio =
        traffic_per_weight_byte(optimizer.moments) / traffic_per_weight_byte(measured.moments);
  }
  // Weights held in the 2-byte dtype (analytic and synthetic mixed-precision profiles) have their
  // float32 master copy in the optimizer's bytes; measured ones (autocast) hold float32 weights.
  const bool two_byte_weights = is_mixed_precision(profile.dtype) && profile.source != "measured";
  const ParamBytes per_param = param_bytes(profile.dtype, optimizer);
  for (auto& l : profile.layers) {
    if (two_byte_weights) {
      l.optimizer_bytes = l.param_bytes / per_param.weight * per_param.optimizer();
    } else {
      l.optimizer_bytes = optimizer.moments * l.param_bytes;
    }
    l.optimizer_step_s *= time_ratio;
    l.optimizer_new_version_s *= time_ratio;
  }
  profile.optimizer = optimizer.name;
}

}  // namespace pipetwin
