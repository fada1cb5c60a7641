// The CUDA side of exec/platform/device.hpp: a Device on one GPU, and what the rest of the executor
// needs of CUDA, so that no other file includes a CUDA header. exec/platform/cuda_device.cpp is
// compiled only where LibTorch has CUDA (exec/CMakeLists.txt); device.cpp stands in for it
// elsewhere (the one guard, PIPETWIN_WITH_CUDA).
//
// Thread-safety: as exec/platform/device.hpp.
#pragma once

#include <memory>

#include <ATen/core/Tensor.h>

#include "exec/platform/device.hpp"

namespace pipetwin::exec {

// Visible GPUs (0 in a build without CUDA).
int cuda_device_count();
// The Device of GPU `index` (null in a build without CUDA).
std::unique_ptr<Device> make_cuda_device(int index);
// Waits until the calling thread's current stream on `t`'s GPU is done; nothing for a CPU tensor.
void wait_for_current_stream(const at::Tensor& t);

}  // namespace pipetwin::exec
