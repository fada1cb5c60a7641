#include "exec/platform/memory_tracker.hpp"

#include <array>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include "models/torch_compat.hpp"

namespace pipetwin::exec {

namespace {

struct Counters {
  std::array<std::atomic<int64_t>, MemoryTracker::kMaxDevices + 1> live{};
  std::array<std::atomic<int64_t>, MemoryTracker::kMaxDevices + 1> peak{};
};

Counters& counters() {
  static Counters c;
  return c;
}

thread_local int tls_device = -1;

size_t slot_of(int device) {
  return device >= 0 && device < MemoryTracker::kMaxDevices ? static_cast<size_t>(device) + 1 : 0;
}

void add(size_t slot, int64_t bytes) {
  auto& c = counters();
  const int64_t now = c.live[slot].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = c.peak[slot].load(std::memory_order_relaxed);
  while (now > peak && !c.peak[slot].compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

// What the counting allocator keeps per allocation: the wrapped DataPtr and whom to credit,
// keyed by the data pointer. The context of the DataPtr we hand out is the data pointer itself,
// as c10::Allocator::raw_allocate requires (oneDNN kernels allocate through it).
struct Entry {
  c10::DataPtr inner;
  int64_t bytes;
  size_t slot;
};

std::mutex& table_mutex() {
  static std::mutex mu;
  return mu;
}

std::unordered_map<void*, Entry>& table() {
  static auto* t = new std::unordered_map<void*, Entry>();  // outlives static destruction
  return *t;
}

void release(void* data) {
  Entry e;
  {
    std::lock_guard<std::mutex> lock(table_mutex());
    auto it = table().find(data);
    if (it == table().end()) return;
    e = std::move(it->second);
    table().erase(it);
  }
  add(e.slot, -e.bytes);
  // e.inner frees the memory through the wrapped allocator when it goes out of scope.
}

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) PIPETWIN_ALLOCATOR_CONST override {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (data == nullptr || n == 0) return inner;
    const size_t slot = slot_of(tls_device);
    add(slot, static_cast<int64_t>(n));
    {
      std::lock_guard<std::mutex> lock(table_mutex());
      table()[data] = Entry{std::move(inner), static_cast<int64_t>(n), slot};
    }
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
#if PIPETWIN_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

 private:
  c10::Allocator* base_;
};

std::once_flag install_once;
std::atomic<bool> is_installed{false};

}  // namespace

void MemoryTracker::install() {
  std::call_once(install_once, [] {
    static CountingAllocator allocator(c10::GetCPUAllocator());
    c10::SetCPUAllocator(&allocator, /*priority=*/100);
    is_installed = true;
  });
}

bool MemoryTracker::installed() {
  return is_installed;
}

int64_t MemoryTracker::live_bytes(int device) {
  return counters().live[slot_of(device)].load();
}
int64_t MemoryTracker::peak_bytes(int device) {
  return counters().peak[slot_of(device)].load();
}
void MemoryTracker::reset_peak(int device) {
  const size_t s = slot_of(device);
  counters().peak[s].store(counters().live[s].load());
}

MemoryTracker::ScopedDevice::ScopedDevice(int device) : previous_(tls_device) {
  tls_device = device;
}
MemoryTracker::ScopedDevice::~ScopedDevice() {
  tls_device = previous_;
}
int MemoryTracker::current_device() {
  return tls_device;
}

}  // namespace pipetwin::exec
