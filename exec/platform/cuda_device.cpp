// CudaDevice (exec/platform/device.hpp): one GPU. Compiled only where LibTorch has CUDA.
//
// torchgpipe (Section 3.3) gives each partition a compute stream and copies on separate streams
// synchronised by CUDA events, so a copy overlaps the next compute. Here each lane of a schedule
// device — compute, send, recv, collective (worker.hpp) — gets its own stream from LibTorch's
// pool; one thread issues to each lane. An action's end is an event its consumers' streams wait
// for (wait_for: torchgpipe's "wait" on the event recorded after the producer), and a tensor
// handed to another lane is recorded on that lane's stream (hand_over: record_stream), so the
// caching allocator does not give its memory out again while the consumer may still read it; the
// host never waits per action. Several schedule devices on one GPU are stream sets of that GPU.
#include "exec/platform/cuda_device.hpp"

#include <array>
#include <memory>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <fmt/format.h>

namespace pipetwin::exec {

namespace {

class CudaMark : public Mark {
 public:
  // Timing stays enabled (cudaEventDefault): elapsed_time needs it.
  CudaMark() : event(cudaEventDefault) {}
  mutable at::cuda::CUDAEvent event;  // block() is not const
};

const at::cuda::CUDAEvent& event_of(const Mark& m) {
  return static_cast<const CudaMark&>(m).event;
}

// The allocator statistics' aggregate entry (StatType::AGGREGATE in 1.13 and 2.x alike).
constexpr size_t kAggregate = 0;

class CudaDevice : public Device {
 public:
  explicit CudaDevice(int index) : index_(static_cast<c10::DeviceIndex>(index)) {
    // LibTorch sets CUDA up (the caching allocator's per-GPU state among it) lazily, at the first
    // tensor on a GPU, but a run reads the allocator's statistics (reset_peak, live_bytes) before
    // it makes one, which LibTorch 2.x refuses ("Invalid device argument: did you call init?").
    // One empty tensor on the GPU sets it up, in 1.13 and 2.x alike.
    (void)at::empty({0}, at::TensorOptions().device(torch_device()));
    for (auto& s : streams_)
      s = std::make_unique<c10::cuda::CUDAStream>(c10::cuda::getStreamFromPool(false, index_));
  }

  c10::Device torch_device() const override { return c10::Device(c10::kCUDA, index_); }

  std::string describe() const override {
    const cudaDeviceProp* p = at::cuda::getDeviceProperties(index_);
    return fmt::format("{} (cuda:{})", p->name, static_cast<int>(index_));
  }

  void bind(int lane) override {
    c10::cuda::set_device(index_);
    c10::cuda::setCurrentCUDAStream(*streams_.at(static_cast<size_t>(lane)));
  }

  std::unique_ptr<Mark> mark() override {
    auto m = std::make_unique<CudaMark>();
    m->event.record(c10::cuda::getCurrentCUDAStream(index_));
    return m;
  }

  std::unique_ptr<Mark> start_mark(std::chrono::steady_clock::time_point host_now) override {
    (void)host_now;
    auto m = std::make_unique<CudaMark>();
    m->event.record(*streams_[0]);
    return m;
  }

  double seconds(const Mark& from, const Mark& to) override {
    count_host_wait();
    event_of(to).synchronize();
    return elapsed(from, to);
  }

  double elapsed(const Mark& from, const Mark& to) override {
    return static_cast<double>(event_of(from).elapsed_time(event_of(to))) / 1000.0;
  }

  void synchronize() override {
    count_host_wait();
    c10::cuda::getCurrentCUDAStream(index_).synchronize();
  }

  void wait(const Mark& m) override {
    count_host_wait();
    event_of(m).synchronize();
  }

  void wait_for(const Mark& m) override {
    static_cast<const CudaMark&>(m).event.block(c10::cuda::getCurrentCUDAStream(index_));
  }

  void hand_over(const at::Tensor& t) override {
    if (t.defined() && t.is_cuda()) t.record_stream(c10::cuda::getCurrentCUDAStream(index_));
  }

  double read(const at::Tensor& t) override {
    count_host_wait();
    return t.item<double>();
  }

  at::Tensor from_host(const at::Tensor& host) override {
    // From pinned memory the copy is asynchronous for the host; the stream orders it before the
    // work the caller issues next, and the pinned block is not reused before it is done (the
    // caching host allocator records the copy's stream).
    const at::Tensor pinned = host.is_pinned() ? host : host.pin_memory();
    return pinned.to(at::TensorOptions().device(torch_device()), /*non_blocking=*/true,
                     /*copy=*/true);
  }

  int64_t capacity_bytes() const override {
    return static_cast<int64_t>(at::cuda::getDeviceProperties(index_)->totalGlobalMem);
  }

  int64_t live_bytes() const override {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(index_)
        .allocated_bytes[kAggregate]
        .current;
  }
  int64_t peak_bytes() const override {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(index_).allocated_bytes[kAggregate].peak;
  }
  void reset_peak() override { c10::cuda::CUDACachingAllocator::resetPeakStats(index_); }

 private:
  c10::DeviceIndex index_;
  std::array<std::unique_ptr<c10::cuda::CUDAStream>, Device::kLanes> streams_;
};

}  // namespace

int cuda_device_count() {
  return static_cast<int>(c10::cuda::device_count());
}

std::unique_ptr<Device> make_cuda_device(int index) {
  return std::make_unique<CudaDevice>(index);
}

void wait_for_current_stream(const at::Tensor& t) {
  if (t.defined() && t.is_cuda()) c10::cuda::getCurrentCUDAStream(t.device().index()).synchronize();
}

std::shared_ptr<void> record_ready(const at::Tensor& t) {
  if (!t.defined() || !t.is_cuda()) return nullptr;
  auto ready = std::make_shared<at::cuda::CUDAEvent>(cudaEventDisableTiming);
  ready->record(c10::cuda::getCurrentCUDAStream(t.device().index()));
  return ready;
}

void use_when_ready(const std::shared_ptr<void>& ready, const at::Tensor& t) {
  if (!ready || !t.defined() || !t.is_cuda()) return;
  auto* event = static_cast<at::cuda::CUDAEvent*>(ready.get());
  // A copy between GPUs runs on the source GPU's current stream, else on the current device's:
  // both wait, and both keep the memory from reuse until they are past it.
  const c10::cuda::CUDAStream here = c10::cuda::getCurrentCUDAStream();
  const c10::cuda::CUDAStream there = c10::cuda::getCurrentCUDAStream(t.device().index());
  event->block(here);
  t.record_stream(here);
  if (there != here) {
    event->block(there);
    t.record_stream(there);
  }
}

}  // namespace pipetwin::exec
