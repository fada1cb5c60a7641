// MemoryTracker: live and peak tensor bytes per device, measured on CPU.
//
// On CPU there is no allocator statistic per device, so pipetwin installs a counting allocator in
// front of LibTorch's CPU allocator (c10::SetCPUAllocator). Each allocation is attributed to the
// device that the allocating thread works for (set with ScopedDevice by the executor's stage
// threads, -1 when none), and credited back to the same device when freed, wherever that happens.
// Autograd's saved activations, gradients, optimizer state and received tensors are all counted,
// which is what the memory model (core/memory.hpp) predicts. On CUDA the executor reads the
// caching allocator's statistics instead.
//
// Thread-safety: all functions are thread-safe; counters are atomics.
#pragma once

#include <cstdint>

namespace pipetwin::exec {

class MemoryTracker {
 public:
  static constexpr int kMaxDevices = 256;

  // Installs the counting allocator (idempotent). Tensors allocated before are not counted.
  static void install();
  static bool installed();

  static int64_t live_bytes(int device);
  static int64_t peak_bytes(int device);
  // Starts a new peak measurement: peak := live.
  static void reset_peak(int device);

  // Attributes allocations of the calling thread to `device` while in scope.
  class ScopedDevice {
   public:
    explicit ScopedDevice(int device);
    ~ScopedDevice();
    ScopedDevice(const ScopedDevice&) = delete;
    ScopedDevice& operator=(const ScopedDevice&) = delete;

   private:
    int previous_;
  };
  static int current_device();
};

}  // namespace pipetwin::exec
