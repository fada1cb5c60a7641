// StageRuntime's state: its parameters and buffers (by name, for checkpoints), loading them, and
// the gradients of a range of its layers (stage.hpp).
#include <algorithm>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "exec/runtime/stage.hpp"
#include "exec/runtime/stage_internal.hpp"

namespace pipetwin::exec {

std::string shape_of(const at::Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.size(d));
  return out + "]";
}

std::vector<at::Tensor> StageRuntime::buffers() const {
  std::vector<at::Tensor> out;
  for (const auto& l : slots_.at(current_)->layers) {
    for (const auto& b : l.ptr()->buffers()) out.push_back(b);
  }
  return out;
}

std::vector<std::pair<int, std::string>> StageRuntime::parameter_names() const {
  std::vector<std::pair<int, std::string>> out;
  const auto& layers = slots_.at(current_)->layers;
  for (size_t l = 0; l < layers.size(); ++l) {
    for (const auto& item : layers[l].ptr()->named_parameters()) {
      out.emplace_back(spec_.layers[l], item.key());
    }
  }
  return out;
}

std::vector<std::pair<int, std::string>> StageRuntime::buffer_names() const {
  std::vector<std::pair<int, std::string>> out;
  const auto& layers = slots_.at(current_)->layers;
  for (size_t l = 0; l < layers.size(); ++l) {
    for (const auto& item : layers[l].ptr()->named_buffers()) {
      out.emplace_back(spec_.layers[l], item.key());
    }
  }
  return out;
}

void StageRuntime::load_state(const std::vector<at::Tensor>& params,
                              const std::vector<at::Tensor>& buffers) {
  const auto own_params = parameters();
  const auto own_buffers = this->buffers();
  auto copy = [this](const std::vector<at::Tensor>& to, const std::vector<at::Tensor>& from,
                     const char* what) {
    if (to.size() != from.size()) {
      throw std::invalid_argument(fmt::format("stage {}: {} {} given, the stage has {}",
                                              spec_.stage, from.size(), what, to.size()));
    }
    for (size_t i = 0; i < to.size(); ++i) {
      if (!to[i].sizes().equals(from[i].sizes())) {
        throw std::invalid_argument(fmt::format("stage {}: {} {} has shape {}, expected {}",
                                                spec_.stage, what, i, shape_of(from[i]),
                                                shape_of(to[i])));
      }
    }
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < to.size(); ++i) {
      at::Tensor dst = to[i];
      dst.copy_(from[i]);
    }
  };
  copy(own_params, params, "parameters");
  copy(own_buffers, buffers, "buffers");
}

std::vector<at::Tensor> StageRuntime::gradients(int first_layer, int last_layer) const {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < grads_.size(); ++i) {
    if (param_layer_[i] >= std::max(first_layer, spec_.frozen_layers) &&
        param_layer_[i] <= last_layer) {
      out.push_back(grads_[i]);
    }
  }
  return out;
}

std::vector<at::Tensor> StageRuntime::parameters() const {
  return slots_.at(current_)->params;
}

}  // namespace pipetwin::exec
