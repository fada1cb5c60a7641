#include "exec/runtime/bundle.hpp"

#include <stdexcept>

#include <ATen/ATen.h>
#include <c10/core/ScalarType.h>
#include <fmt/format.h>

namespace pipetwin::exec {

namespace {

int64_t total_numel(const std::vector<at::Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}

// The dtype every tensor of `ts` converts to without loss (bfloat16 and float16 meet in float32).
at::ScalarType common_dtype(const std::vector<at::Tensor>& ts) {
  at::ScalarType t = ts.at(0).scalar_type();
  for (const auto& x : ts) t = c10::promoteTypes(t, x.scalar_type());
  return t;
}

}  // namespace

at::Tensor pack_bundle(const std::vector<at::Tensor>& tensors) {
  if (tensors.empty()) throw std::invalid_argument("an empty bundle");
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].defined()) {
      throw std::invalid_argument(
          fmt::format("bundle tensor {} of {} is undefined", i, tensors.size()));
    }
    const at::ScalarType t = tensors[i].scalar_type(), t0 = tensors[0].scalar_type();
    if (t != t0 && !(c10::isFloatingType(t) && c10::isFloatingType(t0))) {
      throw std::invalid_argument(fmt::format("bundle tensor {} is {}, tensor 0 is {}", i,
                                              c10::toString(t), c10::toString(t0)));
    }
  }
  if (tensors.size() == 1) return tensors[0].contiguous();
  const at::ScalarType dtype = common_dtype(tensors);
  std::vector<at::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}).to(dtype));
  return at::cat(flat, 0);
}

at::Tensor packed_like(const std::vector<at::Tensor>& like) {
  if (like.size() == 1) return like[0];
  return at::empty({total_numel(like)}, like.at(0).options().dtype(common_dtype(like)));
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
    out.push_back(packed.narrow(0, at_elem, l.numel()).view(l.sizes()).to(l.scalar_type()));
    at_elem += l.numel();
  }
  return out;
}

}  // namespace pipetwin::exec
