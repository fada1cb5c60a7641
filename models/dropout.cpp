#include "models/dropout.hpp"

#include <algorithm>
#include <array>
#include <mutex>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

namespace pipetwin::models {

namespace {

// The calling thread's dropout key (dropout.hpp).
struct DropoutState {
  bool scoped = false;
  uint64_t key = 0;
};
thread_local DropoutState t_dropout;

// One lock per GPU (index modulo the array) and one for the CPU: the draws of one device's
// default generator, whichever stream set makes them.
std::mutex& device_lock(const c10::Device& device) {
  static std::array<std::mutex, 17> locks;
  if (!device.is_cuda()) return locks[16];
  return locks[static_cast<size_t>(std::max<int>(0, device.index())) % 16];
}

// The calling thread's CPU generator, seeded for this draw.
at::Generator& cpu_generator(uint64_t seed) {
  thread_local at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(0);
  std::lock_guard<std::mutex> lock(gen.mutex());  // bernoulli_ takes it too; never contended
  gen.set_current_seed(seed);
  return gen;
}

}  // namespace

uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

DropoutKey::DropoutKey(uint64_t key) : saved_scoped_(t_dropout.scoped), saved_key_(t_dropout.key) {
  t_dropout.scoped = true;
  t_dropout.key = key;
}

DropoutKey::~DropoutKey() {
  t_dropout.scoped = saved_scoped_;
  t_dropout.key = saved_key_;
}

uint64_t micro_batch_dropout_key(uint64_t seed, int replica, int micro_batch) {
  const uint64_t who = (static_cast<uint64_t>(static_cast<uint32_t>(replica)) << 32) |
                       static_cast<uint32_t>(micro_batch);
  return mix64(mix64(seed) ^ mix64(who));
}

std::optional<uint64_t> site_seed(uint64_t site) {
  if (!t_dropout.scoped) return std::nullopt;
  return mix64(t_dropout.key ^ mix64(site + 1));
}

at::Tensor with_site_generator(const c10::Device& device, uint64_t site,
                               const std::function<at::Tensor()>& draw) {
  const std::optional<uint64_t> seed = site_seed(site);
  if (!seed) return draw();
  std::lock_guard<std::mutex> lock(device_lock(device));
  at::Generator gen = at::globalContext().defaultGenerator(device);
  at::Tensor saved;
  {
    // The generator's own mutex guards its state; the kernel below takes it again to read it.
    std::lock_guard<std::mutex> g(gen.mutex());
    saved = gen.get_state();
    gen.set_current_seed(*seed);  // CUDA: Philox offset 0
  }
  // Put the state back also when the draw throws.
  struct Restore {
    at::Generator& gen;
    const at::Tensor& state;
    ~Restore() {
      std::lock_guard<std::mutex> g(gen.mutex());
      gen.set_state(state);
    }
  } restore{gen, saved};
  return draw();
}

at::Tensor keyed_dropout(const at::Tensor& x, double p, uint64_t site, bool training) {
  if (!training || p == 0) return x;
  if (!x.device().is_cpu()) {
    // LibTorch's fused kernel (native_dropout on a GPU) from the seeded Philox stream.
    return with_site_generator(x.device(), site, [&] { return at::dropout(x, p, true); });
  }
  const std::optional<uint64_t> seed = site_seed(site);
  if (!seed) return at::dropout(x, p, true);
  // What at::dropout runs on a CPU tensor, from the thread's generator.
  at::Tensor noise = at::empty_like(x);
  noise.bernoulli_(1 - p, cpu_generator(*seed));
  noise.div_(1 - p);
  return x * noise;
}

}  // namespace pipetwin::models
