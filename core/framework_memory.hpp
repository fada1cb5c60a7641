// Framework memory: what a training framework holds on a GPU beyond the tensors the memory walk
// (core/memory.hpp) counts, per device kind and framework version.
//
// The walk's peak is what PyTorch calls "allocated" (torch.cuda.max_memory_allocated): the bytes
// of live tensors. On top of it a PyTorch process holds
//
//   reserved   the CUDA caching allocator's segments (torch.cuda.max_memory_reserved, called
//              max_memory_cached before PyTorch 1.4). The allocator rounds every request up to
//              a 512-byte block, takes requests of at most 1 MiB from 2 MiB segments, requests
//              below 10 MiB from 20 MiB segments, and larger ones rounded up to 2 MiB
//              (AllocatorRules, c10/cuda/CUDACachingAllocator.cpp); freed blocks stay cached and
//              split, so at the peak part of the reserved bytes is free but unusable: the
//              fragmentation, 1 - allocated / reserved. Workspaces PyTorch draws through the
//              allocator (cuDNN's always, cuBLAS's since PyTorch 1.11) add their segments here.
//   process    what nvidia-smi shows: reserved + the CUDA context (the driver's state and the
//              kernel images it loaded: PyTorch's, cuDNN's, cuBLAS's; outside the allocator) +
//              workspaces the libraries allocate themselves (cuBLAS before PyTorch 1.11).
//
// So reserved(a) = a / (1 - fragmentation) + in-allocator workspace segments, and
// process(a) = reserved(a) + context + out-of-allocator workspaces.
//
// The figures are documented constants, each with its source, in hardware/frameworks.json
// (format "pipetwin.frameworks" version 1): allocator rules, software stacks (framework and CUDA
// versions: workspaces, fragmentation) and, per device kind, the stack the papers ran on it and
// its CUDA context. A device the file does not list (CPU devices) has no framework memory.
//
//   {"format": "pipetwin.frameworks", "version": 1,
//    "allocators": [{"name": "pytorch-cuda-caching", "min_block_bytes": {"value": 512,
//                    "source": "..."}, ...}],
//    "stacks": [{"name": "pytorch-1.x-cuda10", "description": "...",
//                "allocator": "pytorch-cuda-caching", "cublas_workspace_bytes": {...},
//                "cublas_workspace_in_allocator": {"value": false, "source": "..."},
//                "cudnn_workspace_bytes": {...}, "fragmentation": {...}}],
//    "devices": [{"device": "tesla-p40", "stack": "pytorch-1.x-cuda10",
//                 "context_bytes": {...}, "source": "..."}]}
//
// A bad field is an InputError naming the file and the field.
//
// The planner, the simulator's report and sweeps count a plan's GPU memory as process(a) of each
// memory's tensors (sim/memory_pools.hpp), with the entry framework_memory_of() finds for the
// cluster's device in Catalog::default_dir()'s frameworks.json; CPU devices get none.
//
// Thread-safety: value types and pure functions; FrameworkCatalog is immutable after load;
// cached_framework_catalog() and framework_memory_of() load each folder once under a mutex.
#pragma once

#include <map>
#include <string>

#include "core/cluster.hpp"
#include "core/json_io.hpp"
#include "core/memory.hpp"

namespace pipetwin {

// A documented figure and where it comes from.
struct Sourced {
  double value = 0;
  std::string source;
};

// PyTorch's CUDA caching allocator, as c10/cuda/CUDACachingAllocator.cpp names its constants.
struct AllocatorRules {
  std::string name;
  double min_block = 512;                       // kMinBlockSize: requests round up to a multiple
  double small_size = 1024.0 * 1024;            // kSmallSize: the largest small-pool request
  double small_segment = 2 * 1024.0 * 1024;     // kSmallBuffer: a small-pool segment
  double large_segment = 20 * 1024.0 * 1024;    // kLargeBuffer: a segment for mid-size requests
  double min_large_alloc = 10 * 1024.0 * 1024;  // kMinLargeAlloc: from here requests get their own
  double round_large = 2 * 1024.0 * 1024;       // kRoundLarge: ... rounded up to a multiple
  std::string source;

  // The block a request of `bytes` occupies (round_size): a multiple of min_block, at least one.
  double block_bytes(double bytes) const;
  // The segment the allocator cudaMallocs when no cached block fits the request
  // (get_allocation_size): small_segment, large_segment, or the block rounded up to round_large.
  double segment_bytes(double bytes) const;
};

// A software stack: framework and CUDA versions.
struct FrameworkStack {
  std::string name;
  std::string description;
  AllocatorRules allocator;
  Sourced cublas_workspace;  // bytes per cuBLAS handle
  bool cublas_workspace_in_allocator = false;
  std::string cublas_workspace_in_allocator_source;
  Sourced cudnn_workspace;  // bytes a convolution's workspace adds at the peak (0: none counted)
  Sourced fragmentation;    // 1 - allocated / reserved at the peak, in [0, 1)
};

// One device kind under the stack the papers ran on it.
struct FrameworkMemory {
  std::string device;
  FrameworkStack stack;
  Sourced context;     // bytes of the CUDA context and loaded kernels
  std::string source;  // why this device runs this stack

  // Workspace segments drawn through the allocator.
  double allocator_workspace_bytes() const;
  // Workspaces the libraries allocate themselves.
  double outside_workspace_bytes() const;
  // The allocator's reserved bytes at a peak of `allocated` tensor bytes.
  double reserved_bytes(double allocated) const;
  // The same when the allocator can reserve at most `reservable` bytes (the GPU less the context
  // and out-of-allocator workspaces). When a cudaMalloc fails, PyTorch's caching allocator frees
  // its cached unused segments and retries before it raises out-of-memory (free_cached_blocks in
  // PyTorch 1.x's CUDACachingAllocator.cpp malloc, release_cached_blocks in 2.x), so the
  // fragmentation reserve gives way as the tensors fill the GPU: min(reserved_bytes(a),
  // max(reservable, a + in-allocator workspaces)). The fragmentation left in split segments
  // that still hold a live block is not modelled: under pressure this is a lower bound.
  double reserved_bytes(double allocated, double reservable) const;
  // The tensors of a peak of `allocated` bytes fit in `reservable` reserved bytes once the cache
  // has been released: allocated + in-allocator workspaces <= reservable.
  bool fits_after_release(double allocated, double reservable) const;
  // What the process holds on the GPU at that peak (nvidia-smi).
  double process_bytes(double allocated) const;
  // What the process holds besides its tensors' reserved bytes: context and workspaces
  // (process_bytes(0)).
  double fixed_bytes() const;
  // The most tensor bytes whose process fits in `capacity` (process_bytes' inverse):
  // (capacity - context - workspaces) x (1 - fragmentation); 0 when the fixed part fills it.
  double allocatable_bytes(double capacity) const;
};

// What a peak counts: the walk's tensors, the allocator's reservation, or the whole process.
enum class MemoryMeasure { kAllocated, kReserved, kProcess };

// `allocated` as `measure` counts it under `fw`.
double measured_bytes(const FrameworkMemory& fw, MemoryMeasure measure, double allocated);

// Raises every device's peak and per-action bytes of a walk (allocated bytes) to `measure`.
void apply_framework_memory(MemoryWalk& walk, const FrameworkMemory& fw, MemoryMeasure measure);

class FrameworkCatalog {
 public:
  // Loads a "pipetwin.frameworks" file.
  static FrameworkCatalog load(const std::string& path);
  // <hardware_dir>/frameworks.json; an empty catalog when the folder has none.
  static FrameworkCatalog load_dir(const std::string& hardware_dir);
  static FrameworkCatalog from_devices(std::map<std::string, FrameworkMemory> devices);

  // The framework memory of a device kind; null when the file does not list it (CPU devices).
  const FrameworkMemory* for_device(const std::string& device) const;
  const std::map<std::string, FrameworkMemory>& devices() const { return devices_; }

 private:
  std::map<std::string, FrameworkMemory> devices_;
};

FrameworkCatalog framework_catalog_from_json(const JsonView& doc);

// FrameworkCatalog::load_dir(hardware_dir), loaded on first use and kept (errors as load()).
const FrameworkCatalog& cached_framework_catalog(const std::string& hardware_dir);
// The framework memory of a cluster's device kind: the entry for device.name in
// Catalog::default_dir()'s frameworks.json (PIPETWIN_DATA); null for CPU devices and for devices
// the file does not list.
const FrameworkMemory* framework_memory_of(const DeviceSpec& device);

}  // namespace pipetwin
