#include "exec/platform/tensor_io.hpp"

#include <fstream>
#include <iterator>

#include <ATen/core/ivalue.h>
#include <fmt/format.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "core/error.hpp"
#include "core/json_io.hpp"

namespace pipetwin::exec {

void save_tensors(const std::string& path, const std::vector<at::Tensor>& tensors) {
  c10::List<at::Tensor> list;
  for (const auto& t : tensors) list.push_back(t.detach().contiguous());
  const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(list));
  write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));
}

std::vector<at::Tensor> load_tensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open", path));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  c10::IValue v;
  try {
    v = torch::jit::pickle_load(bytes);
  } catch (const std::exception&) {
    throw InputError(fmt::format("{}: not a pickled tensor list", path));
  }
  if (!v.isTensorList()) throw InputError(fmt::format("{}: not a pickled tensor list", path));
  std::vector<at::Tensor> out;
  for (const at::Tensor& t : v.toTensorVector()) out.push_back(t);
  return out;
}

}  // namespace pipetwin::exec
