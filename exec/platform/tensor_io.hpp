// Tensors to and from files: the executor's saved parameters (and, later, its checkpoints).
//
// A list of tensors is pickled (torch.save's payload format, readable by torch.load in Python
// through torch.jit's pickle) and written atomically: temporary file, fsync, rename.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipetwin::exec {

void save_tensors(const std::string& path, const std::vector<at::Tensor>& tensors);
// Throws InputError naming the path when it is missing or not a pickled tensor list.
std::vector<at::Tensor> load_tensors(const std::string& path);

}  // namespace pipetwin::exec
