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
// For a tensor handed from one thread's stream to another's without a host wait (the in-process
// transport): record_ready, by the producer, marks the point of its current stream after which
// `t` is made (an event; null for a CPU tensor); use_when_ready, by the consumer, makes its
// current stream wait for that point and keeps `t`'s memory from reuse until the consumer's work
// with it is done.
std::shared_ptr<void> record_ready(const at::Tensor& t);
void use_when_ready(const std::shared_ptr<void>& ready, const at::Tensor& t);

}  // namespace pipetwin::exec
