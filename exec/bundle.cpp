#include "exec/bundle.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
#include <fmt/format.h>

namespace pipetwin::exec {

namespace {

int64_t total_numel(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}

}  // namespace

at::Tensor pack_bundle(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) throw std::invalid_argument("an empty bundle");
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) {
      throw std::invalid_argument(
          fmt::format("bundle tensor {} of {} is undefined", i, tensors.size()));
    }
    if (tensors[i].scalar_type() != tensors[0].scalar_type()) {
      throw std::invalid_argument(fmt::format("bundle tensor {} is {}, tensor 0 is {}", i,
                                              c10::toString(tensors[i].scalar_type()),
                                              c10::toString(tensors[0].scalar_type())));
    }
  }
  if (tensors.size() == 1) return tensors[0].contiguous();
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat, 0);
}

at::Tensor packed_like(const std::vector<at::Tensor>& like) {
  if (like.size() == 1) return like[0];
  return at::empty({total_numel(like)}, like.at(0).options());
}

std::vector<at::Tensor> unpack_bundle(const at::Tensor& packed,
                                      const std::vector<at::Tensor>& like) {
  if (like.size() == 1) return {packed};
  if (packed.numel() != total_numel(like)) {
    throw std::invalid_argument(fmt::format("a bundle of {} elements, expected {} in {} tensors",
                                            packed.numel(), total_numel(like), like.size()));
  }
  std::vector<at::Tensor> out;
  int64_t at_elem = 0;
  for (const auto& l : like) {
    out.push_back(packed.narrow(0, at_elem, l.numel()).view(l.sizes()));
    at_elem += l.numel();
  }
  return out;
}

}  // namespace pipetwin::exec
