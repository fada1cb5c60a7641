#include "core/framework_memory.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "core/error.hpp"

namespace pipetwin {

namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "pipetwin.frameworks";
constexpr int kVersion = 1;

std::string checked_source(const JsonView& v) {
  const JsonView s = v.at("source");
  std::string text = s.as_string();
  if (text.empty()) s.fail("give where the figure comes from");
  return text;
}

// {"value": number >= 0, "source": "..."}
Sourced sourced(const JsonView& v) {
  if (!v.raw().is_object()) v.fail("expected an object with value and source");
  v.allow_only({"value", "source"});
  return {v.nonneg("value"), checked_source(v)};
}

Sourced sourced_positive(const JsonView& v) {
  Sourced s = sourced(v);
  if (!(s.value > 0)) v.at("value").fail("must be positive");
  return s;
}

AllocatorRules allocator_from_json(const JsonView& j) {
  j.allow_only({"name", "min_block_bytes", "small_size_bytes", "small_segment_bytes",
                "large_segment_bytes", "min_large_alloc_bytes", "round_large_bytes", "source"});
  AllocatorRules a;
  a.name = j.string("name");
  a.min_block = sourced_positive(j.at("min_block_bytes")).value;
  a.small_size = sourced_positive(j.at("small_size_bytes")).value;
  a.small_segment = sourced_positive(j.at("small_segment_bytes")).value;
  a.large_segment = sourced_positive(j.at("large_segment_bytes")).value;
  a.min_large_alloc = sourced_positive(j.at("min_large_alloc_bytes")).value;
  a.round_large = sourced_positive(j.at("round_large_bytes")).value;
  a.source = checked_source(j);
  if (a.small_segment < a.small_size)
    j.at("small_segment_bytes").fail("must hold the largest small request (small_size_bytes)");
  if (a.large_segment < a.min_large_alloc)
    j.at("large_segment_bytes").fail("must hold requests below min_large_alloc_bytes");
  return a;
}

FrameworkStack stack_from_json(const JsonView& j, const std::map<std::string, AllocatorRules>& al) {
  j.allow_only({"name", "description", "allocator", "cublas_workspace_bytes",
                "cublas_workspace_in_allocator", "cudnn_workspace_bytes", "fragmentation"});
  FrameworkStack s;
  s.name = j.string("name");
  s.description = j.string_or("description", "");
  const JsonView alloc = j.at("allocator");
  const auto it = al.find(alloc.as_string());
  if (it == al.end()) alloc.fail(fmt::format("unknown allocator \"{}\"", alloc.as_string()));
  s.allocator = it->second;
  s.cublas_workspace = sourced(j.at("cublas_workspace_bytes"));
  const JsonView in = j.at("cublas_workspace_in_allocator");
  if (!in.raw().is_object()) in.fail("expected an object with value and source");
  in.allow_only({"value", "source"});
  s.cublas_workspace_in_allocator = in.at("value").as_bool();
  s.cublas_workspace_in_allocator_source = checked_source(in);
  s.cudnn_workspace = sourced(j.at("cudnn_workspace_bytes"));
  s.fragmentation = sourced(j.at("fragmentation"));
  if (s.fragmentation.value >= 1) j.at("fragmentation").at("value").fail("must be below 1");
  return s;
}

}  // namespace

double AllocatorRules::block_bytes(double bytes) const {
  if (bytes < min_block) return min_block;
  return min_block * std::ceil(bytes / min_block);
}

double AllocatorRules::segment_bytes(double bytes) const {
  const double block = block_bytes(bytes);
  if (block <= small_size) return small_segment;
  if (block < min_large_alloc) return large_segment;
  return round_large * std::ceil(block / round_large);
}

double FrameworkMemory::allocator_workspace_bytes() const {
  double b = 0;
  if (stack.cublas_workspace_in_allocator && stack.cublas_workspace.value > 0)
    b += stack.allocator.segment_bytes(stack.cublas_workspace.value);
  if (stack.cudnn_workspace.value > 0)
    b += stack.allocator.segment_bytes(stack.cudnn_workspace.value);
  return b;
}

double FrameworkMemory::outside_workspace_bytes() const {
  return stack.cublas_workspace_in_allocator ? 0.0 : stack.cublas_workspace.value;
}

double FrameworkMemory::reserved_bytes(double allocated) const {
  return allocated / (1 - stack.fragmentation.value) + allocator_workspace_bytes();
}

double FrameworkMemory::reserved_bytes(double allocated, double reservable) const {
  return std::min(reserved_bytes(allocated),
                  std::max(reservable, allocated + allocator_workspace_bytes()));
}

bool FrameworkMemory::fits_after_release(double allocated, double reservable) const {
  return allocated + allocator_workspace_bytes() <= reservable;
}

double FrameworkMemory::process_bytes(double allocated) const {
  return reserved_bytes(allocated) + context.value + outside_workspace_bytes();
}

double FrameworkMemory::fixed_bytes() const {
  return process_bytes(0);
}

double FrameworkMemory::allocatable_bytes(double capacity) const {
  return std::max(0.0, (capacity - fixed_bytes()) * (1 - stack.fragmentation.value));
}

double measured_bytes(const FrameworkMemory& fw, MemoryMeasure measure, double allocated) {
  switch (measure) {
    case MemoryMeasure::kAllocated:
      return allocated;
    case MemoryMeasure::kReserved:
      return fw.reserved_bytes(allocated);
    case MemoryMeasure::kProcess:
      return fw.process_bytes(allocated);
  }
  return allocated;
}

void apply_framework_memory(MemoryWalk& walk, const FrameworkMemory& fw, MemoryMeasure measure) {
  for (auto& d : walk.devices) d.peak_bytes = measured_bytes(fw, measure, d.peak_bytes);
  for (double& b : walk.after_action) b = measured_bytes(fw, measure, b);
}

FrameworkCatalog framework_catalog_from_json(const JsonView& doc) {
  doc.check_format(kFormat, kVersion);
  doc.allow_only({"format", "version", "description", "allocators", "stacks", "devices"});
  std::map<std::string, AllocatorRules> allocators;
  for (const auto& j : doc.at("allocators").items()) {
    AllocatorRules a = allocator_from_json(j);
    if (!allocators.emplace(a.name, a).second)
      j.at("name").fail(fmt::format("duplicate allocator \"{}\"", a.name));
  }
  std::map<std::string, FrameworkStack> stacks;
  for (const auto& j : doc.at("stacks").items()) {
    FrameworkStack s = stack_from_json(j, allocators);
    if (!stacks.emplace(s.name, s).second)
      j.at("name").fail(fmt::format("duplicate stack \"{}\"", s.name));
  }
  std::map<std::string, FrameworkMemory> devices;
  for (const auto& j : doc.at("devices").items()) {
    j.allow_only({"device", "stack", "context_bytes", "source"});
    FrameworkMemory m;
    m.device = j.string("device");
    const JsonView stack = j.at("stack");
    const auto it = stacks.find(stack.as_string());
    if (it == stacks.end()) stack.fail(fmt::format("unknown stack \"{}\"", stack.as_string()));
    m.stack = it->second;
    m.context = sourced(j.at("context_bytes"));
    m.source = checked_source(j);
    if (!devices.emplace(m.device, m).second)
      j.at("device").fail(fmt::format("duplicate device \"{}\"", m.device));
  }
  return FrameworkCatalog::from_devices(std::move(devices));
}

FrameworkCatalog FrameworkCatalog::from_devices(std::map<std::string, FrameworkMemory> devices) {
  FrameworkCatalog c;
  c.devices_ = std::move(devices);
  return c;
}

FrameworkCatalog FrameworkCatalog::load(const std::string& path) {
  return load_json_as(path, framework_catalog_from_json);
}

FrameworkCatalog FrameworkCatalog::load_dir(const std::string& hardware_dir) {
  const fs::path path = fs::path(hardware_dir) / "frameworks.json";
  if (!fs::is_regular_file(path)) return {};
  return load(path.string());
}

const FrameworkMemory* FrameworkCatalog::for_device(const std::string& device) const {
  const auto it = devices_.find(device);
  return it == devices_.end() ? nullptr : &it->second;
}

const FrameworkCatalog& cached_framework_catalog(const std::string& hardware_dir) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<const FrameworkCatalog>> loaded;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = loaded[hardware_dir];
  if (!slot)
    slot = std::make_unique<const FrameworkCatalog>(FrameworkCatalog::load_dir(hardware_dir));
  return *slot;
}

const FrameworkMemory* framework_memory_of(const DeviceSpec& device) {
  if (device.kind == "cpu") return nullptr;
  return cached_framework_catalog(Catalog::default_dir()).for_device(device.name);
}

}  // namespace pipetwin
