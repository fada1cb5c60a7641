// Device: the hardware one schedule device (or the profiler) runs on — where its tensors live,
// which stream each of its threads issues work to, how that work is timed, and how many bytes it
// holds. The executor's workers and the profiler talk to this interface alone (docs/design.md
// "Platform behind an interface"); make_device() picks the implementation:
//
//   CpuDevice   host memory; a thread's work runs as it is issued, so a mark is the steady
//               clock's reading; bytes from the counting allocator (memory_tracker.hpp), under
//               the schedule device's own slot.
//   CudaDevice  one GPU (exec/platform/cuda_device.cpp, compiled only where LibTorch has CUDA:
//               PIPETWIN_WITH_CUDA is the one guard). Each lane (the compute, send, recv and
//               collective streams of a schedule device, worker.hpp) issues to its own CUDA stream
//               taken from LibTorch's pool — torchgpipe's compute and copy streams (Section 3.3).
//               Marks are CUDA events; the time between two marks is the GPU's. A lane that uses
//               what another lane made waits for that lane's mark on the GPU (wait_for: the stream
//               waits for the event, the host does not) and tells the allocator it uses the
//               tensor (hand_over), as torchgpipe's "wait" and record_stream do; the host waits
//               for the GPU only where it needs a number (synchronize, seconds, read). Bytes from
//               the CUDA caching allocator's statistics: a GPU that hosts several schedule devices
//               reports its whole figure to each of them.
//
// Host waits: every call that makes the host wait for the device's work — synchronize(), wait(),
// seconds() and read() — counts in host_waits(), the process's total over all devices, on the CPU
// as on a GPU (the CPU's work is done when its call returns, but the call is what a GPU would wait
// in), so a test on the CPU sees how often the executor would stall a GPU's host.
//
// Thread-safety: every function may be called from any thread; bind() affects the calling
// thread only; a Mark is used on the device that made it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace pipetwin::exec {

// A point in a device's work: when everything issued before it on the marking thread's stream is
// done. Opaque; made by Device::mark().
class Mark {
 public:
  virtual ~Mark() = default;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual c10::Device torch_device() const = 0;
  // "cpu", or the GPU's name and index: "NVIDIA H100 80GB HBM3 (cuda:0)".
  virtual std::string describe() const = 0;
  bool is_cuda() const { return torch_device().is_cuda(); }

  // Makes the calling thread issue its work to lane `lane` (0 .. kLanes-1) of this device.
  static constexpr int kLanes = 4;
  virtual void bind(int lane) = 0;

  // A mark at this point of the calling thread's stream.
  virtual std::unique_ptr<Mark> mark() = 0;
  // The clock's zero, taken by a thread of no lane: a mark standing for `host_now`, the caller's
  // reading of the steady clock just before (CPU: that reading, so devices of one process share
  // it exactly; CUDA: an event on the compute lane, which must be idle).
  virtual std::unique_ptr<Mark> start_mark(std::chrono::steady_clock::time_point host_now) = 0;
  // Seconds from `from` to `to`, waiting until `to` is reached (a host wait).
  virtual double seconds(const Mark& from, const Mark& to) = 0;
  // Seconds from `from` to `to`, both reached already (their lanes synchronized since): no wait.
  virtual double elapsed(const Mark& from, const Mark& to) = 0;
  // Waits until the work the calling thread issued is done (a host wait).
  virtual void synchronize() = 0;
  // Waits until `m` is reached (a host wait).
  virtual void wait(const Mark& m) = 0;
  // Work the calling thread issues from now on starts after `m` (made by any lane of any device
  // of this process) is reached; the host goes on at once.
  virtual void wait_for(const Mark& m) = 0;
  // The calling thread's lane uses `t`, which another lane made: its memory is not reused before
  // the work this lane issues with it is done.
  virtual void hand_over(const at::Tensor& t) = 0;
  // The value of a one-element tensor of this device, as a double (a host wait).
  virtual double read(const at::Tensor& t) = 0;

  // Host waits of all devices of this process so far (above).
  static int64_t host_waits();

  // A host tensor's copy in this device's memory (always a copy: the host batch stays the
  // loader's). CUDA: staged through pinned memory and copied without a host wait, ordered before
  // the work the calling thread issues next.
  virtual at::Tensor from_host(const at::Tensor& host) = 0;

  // The memory this device has: the GPU's, or the host's physical memory.
  virtual int64_t capacity_bytes() const = 0;
  virtual int64_t live_bytes() const = 0;
  virtual int64_t peak_bytes() const = 0;
  virtual void reset_peak() = 0;

 protected:
  static void count_host_wait();
};

// `where`: "cpu", "cuda" or "cuda:I". `slot`: the memory-tracker slot a CpuDevice counts under
// (the schedule device). "cuda" spreads schedule devices over the visible GPUs (slot modulo the
// GPU count; one GPU hosts them all as stream sets). InputError for anything else, and for CUDA
// where this build or machine has none.
std::unique_ptr<Device> make_device(const std::string& where, int slot);

// "auto" -> "cuda" where this build has CUDA and a GPU is visible, else "cpu"; anything else is
// returned as given.
std::string resolve_device(const std::string& where);

// Whether this build was compiled against a LibTorch with CUDA.
bool built_with_cuda();

// The hardware catalog's name (hardware/devices.json) for a GPU that calls itself `gpu_name`
// with `memory_bytes` of memory ("NVIDIA H100 80GB HBM3" -> "h100-sxm"); "" when none matches.
std::string catalog_name_for_gpu(const std::string& gpu_name, int64_t memory_bytes);

}  // namespace pipetwin::exec
