#include "exec/platform/device.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>

#include <unistd.h>

#include <fmt/format.h>

#include "core/error.hpp"
#include "exec/platform/cuda_device.hpp"
#include "exec/platform/host.hpp"
#include "exec/platform/memory_tracker.hpp"

namespace pipetwin::exec {

namespace {

std::atomic<int64_t> g_host_waits{0};

class CpuMark : public Mark {
 public:
  CpuMark() : at(std::chrono::steady_clock::now()) {}
  explicit CpuMark(std::chrono::steady_clock::time_point t) : at(t) {}
  std::chrono::steady_clock::time_point at;
};

class CpuDevice : public Device {
 public:
  explicit CpuDevice(int slot) : slot_(slot) {}

  c10::Device torch_device() const override { return c10::Device(c10::kCPU); }
  std::string describe() const override { return "cpu"; }
  void bind(int lane) override { (void)lane; }
  std::unique_ptr<Mark> mark() override { return std::make_unique<CpuMark>(); }
  std::unique_ptr<Mark> start_mark(std::chrono::steady_clock::time_point host_now) override {
    return std::make_unique<CpuMark>(host_now);
  }
  double seconds(const Mark& from, const Mark& to) override {
    count_host_wait();
    return elapsed(from, to);
  }
  double elapsed(const Mark& from, const Mark& to) override {
    return std::chrono::duration<double>(static_cast<const CpuMark&>(to).at -
                                         static_cast<const CpuMark&>(from).at)
        .count();
  }
  void synchronize() override { count_host_wait(); }
  void wait(const Mark& m) override {
    (void)m;
    count_host_wait();
  }
  // The work a CPU lane's thread issued is done when its call returns.
  void wait_for(const Mark& m) override { (void)m; }
  void hand_over(const at::Tensor& t) override { (void)t; }
  double read(const at::Tensor& t) override {
    count_host_wait();
    return t.item<double>();
  }
  at::Tensor from_host(const at::Tensor& host) override { return host.clone(); }
  int64_t capacity_bytes() const override {
    return static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  }
  int64_t live_bytes() const override { return MemoryTracker::live_bytes(slot_); }
  int64_t peak_bytes() const override { return MemoryTracker::peak_bytes(slot_); }
  void reset_peak() override { MemoryTracker::reset_peak(slot_); }

 private:
  int slot_;
};

// "cuda" -> -1 (spread), "cuda:3" -> 3; InputError for anything else.
int cuda_index(const std::string& where) {
  if (where == "cuda") return -1;
  if (where.rfind("cuda:", 0) == 0) {
    const std::string digits = where.substr(5);
    if (!digits.empty() && digits.size() <= 4 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(c) != 0; }))
      return std::stoi(digits);
  }
  throw InputError(
      fmt::format("--device: \"{}\" is not a device (cpu, cuda or cuda:I expected)", where));
}

}  // namespace

int64_t Device::host_waits() {
  return g_host_waits.load(std::memory_order_relaxed);
}

void Device::count_host_wait() {
  g_host_waits.fetch_add(1, std::memory_order_relaxed);
}

#ifdef PIPETWIN_WITH_CUDA
// The one place that knows whether the CUDA path was compiled (exec/CMakeLists.txt sets it
// where LibTorch has CUDA).
bool built_with_cuda() {
  return true;
}
#else
bool built_with_cuda() {
  return false;
}
int cuda_device_count() {
  return 0;
}
std::unique_ptr<Device> make_cuda_device(int index) {
  (void)index;
  return nullptr;
}
void wait_for_current_stream(const at::Tensor& t) {
  (void)t;
}
std::shared_ptr<void> record_ready(const at::Tensor& t) {
  (void)t;
  return nullptr;
}
void use_when_ready(const std::shared_ptr<void>& ready, const at::Tensor& t) {
  (void)ready, (void)t;
}
#endif

std::unique_ptr<Device> make_device(const std::string& where, int slot) {
  if (where == "cpu") return std::make_unique<CpuDevice>(slot);
  const int index = cuda_index(where);
  if (!built_with_cuda()) {
    throw InputError(fmt::format(
        "--device: {} asked for, but this pipetwin was built against a LibTorch without CUDA",
        where));
  }
  const int count = cuda_device_count();
  if (count == 0)
    throw InputError(fmt::format("--device: {} asked for, but no GPU is visible", where));
  if (index >= count) {
    throw InputError(fmt::format("--device: {} asked for, but only {} GPU(s) are visible (0 .. {})",
                                 where, count, count - 1));
  }
  std::unique_ptr<Device> gpu = make_cuda_device(index >= 0 ? index : slot % count);
  start_autograd_workers(gpu->torch_device());  // before any stage thread is pinned (host.hpp)
  return gpu;
}

std::string resolve_device(const std::string& where) {
  if (where != "auto") return where;
  return built_with_cuda() && cuda_device_count() > 0 ? "cuda" : "cpu";
}

std::string catalog_name_for_gpu(const std::string& gpu_name, int64_t memory_bytes) {
  std::string n = gpu_name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  const double gib = static_cast<double>(memory_bytes) / (1024.0 * 1024.0 * 1024.0);
  const auto has = [&](const char* s) { return n.find(s) != std::string::npos; };
  // Memory tells the catalog's variants of one chip apart (the driver's name may not).
  if (has("h200")) return "h200-sxm";
  if (has("h100")) return "h100-sxm";
  if (has("a100")) return gib > 48 ? "a100-80gb" : "a100-40gb";
  if (has("v100")) return gib > 20 ? "v100-32gb" : "v100-16gb";
  if (has("rtx 4090")) return "rtx-4090";
  if (has("2080 ti")) return "rtx-2080-ti";
  if (has("rtx 5000")) return "quadro-rtx-5000";
  if (has("p40")) return "tesla-p40";
  if (has(" l4")) return "l4";
  return "";
}

}  // namespace pipetwin::exec
