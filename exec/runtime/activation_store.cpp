#include "exec/runtime/activation_store.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"

namespace pipetwin::exec {

namespace fs = std::filesystem;
using elastic::Tier;

namespace {

constexpr char kMagic[8] = {'P', 'T', 'W', 'A', 'C', 'T', 'S', '1'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kPage = 4096;
constexpr int kMaxDims = 8;
constexpr int32_t kNone = -1, kWriting = -2;

// The first bytes of both files (the header page).
struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  int64_t first_id, samples, memory_slots, slot_bytes;
  int32_t dtype, dims;
  int64_t shape[kMaxDims];
  uint64_t checksum;  // FNV-1a of the bytes above
};

uint64_t fnv1a(const void* data, size_t n) {
  uint64_t h = 1469598103934665603ULL;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

int64_t round_up(int64_t x, int64_t to) {
  return (x + to - 1) / to * to;
}

std::string shape_text(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

std::string errno_text() {
  return std::strerror(errno);
}

FileHeader make_header(const CacheLayout& l, int64_t memory_slots) {
  FileHeader h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kVersion;
  h.header_bytes = sizeof(FileHeader);
  h.first_id = l.first_id;
  h.samples = l.samples;
  h.memory_slots = memory_slots;
  h.slot_bytes = l.slot_bytes();
  h.dtype = static_cast<int32_t>(l.dtype);
  h.dims = static_cast<int32_t>(l.shape.size());
  for (size_t d = 0; d < l.shape.size(); ++d) h.shape[d] = l.shape[d];
  h.checksum = fnv1a(&h, offsetof(FileHeader, checksum));
  return h;
}

void full_pread(int fd, void* dst, int64_t n, int64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, static_cast<size_t>(n), offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw InputError(fmt::format("{}: cannot read {} bytes at offset {}: {}", path, n, offset,
                                   got == 0 ? "the file is short" : errno_text()));
    }
    p += got;
    n -= got;
    offset += got;
  }
}

void full_pwrite(int fd, const void* src, int64_t n, int64_t offset, const std::string& path) {
  const auto* p = static_cast<const char*>(src);
  while (n > 0) {
    const ssize_t put = ::pwrite(fd, p, static_cast<size_t>(n), offset);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) {
      throw std::runtime_error(
          fmt::format("{}: cannot write {} bytes at offset {}: {}", path, n, offset, errno_text()));
    }
    p += put;
    n -= put;
    offset += put;
  }
}

}  // namespace

struct ActivationStore::SlotHeader {
  int32_t boundary;  // -1 none, -2 being written; read and written through std::atomic_ref
  int32_t writer;    // the process that wrote the entry
  int64_t sample;    // the sample id (a check)
};

ActivationStore::ActivationStore(const CacheOptions& options, const std::string& job,
                                 CacheLayout layout, Role role, int process)
    : layout_(std::move(layout)), process_(process) {
  options.validate();
  if (layout_.samples < 1 || layout_.first_id < 0) {
    throw InputError(fmt::format("autocache: {} samples from id {}: nothing to cache",
                                 layout_.samples, layout_.first_id));
  }
  if (layout_.shape.size() > static_cast<size_t>(kMaxDims)) {
    throw InputError(fmt::format("autocache: a per-sample shape of {} dimensions (at most {})",
                                 layout_.shape.size(), kMaxDims));
  }
  slot_bytes_ = layout_.slot_bytes();
  stride_ = round_up(std::max<int64_t>(slot_bytes_, 1), 64);
  const double budget = options.memory_budget_bytes;
  memory_slots_ = std::isfinite(budget)
                      ? std::min<int64_t>(layout_.samples, static_cast<int64_t>(budget) / stride_)
                      : layout_.samples;
  index_offset_ = kPage;
  data_offset_ = round_up(index_offset_ + layout_.samples * 16, kPage);
  memory_bytes_ = data_offset_ + memory_slots_ * stride_;
  disk_bytes_ = kPage + (layout_.samples - memory_slots_) * stride_;
  const fs::path dir = options.dir.empty() ? fs::path("/dev/shm") / ("pipetwin-cache-" + job)
                                           : fs::path(options.dir);
  const fs::path spill = !options.spill_dir.empty() ? fs::path(options.spill_dir)
                         : !options.dir.empty()
                             ? dir
                             : fs::temp_directory_path() / ("pipetwin-cache-" + job);
  memory_path_ = (dir / "activations.mem").string();
  if (memory_slots_ < layout_.samples) disk_path_ = (spill / "activations.disk").string();
  try {
    if (role == Role::kCreate) {
      create_files(options);
    } else {
      open_files();
    }
  } catch (...) {
    if (owner_) remove_files();
    if (map_) ::munmap(map_, static_cast<size_t>(memory_bytes_));
    if (memory_fd_ >= 0) ::close(memory_fd_);
    if (disk_fd_ >= 0) ::close(disk_fd_);
    throw;
  }
}

ActivationStore::~ActivationStore() {
  if (owner_) remove_files();
  if (map_) ::munmap(map_, static_cast<size_t>(memory_bytes_));
  if (memory_fd_ >= 0) ::close(memory_fd_);
  if (disk_fd_ >= 0) ::close(disk_fd_);
}

void ActivationStore::create_files(const CacheOptions&) {
  auto make_dir = [this](const fs::path& d) {
    std::error_code ec;
    const bool existed = fs::exists(d, ec);
    fs::create_directories(d, ec);
    if (ec)
      throw InputError(fmt::format("autocache: cannot create {}: {}", d.string(), ec.message()));
    if (!existed) created_dirs_.push_back(d.string());
  };
  auto make_file = [](const std::string& path, int64_t bytes, bool reserve) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
      throw InputError(fmt::format("autocache: cannot create {}: {}", path, errno_text()));
    // Reserve the memory file's pages now: a full /dev/shm then fails here, with a message,
    // rather than with SIGBUS at the first write into the mapping.
    const int rc = reserve ? ::posix_fallocate(fd, 0, bytes) : (::ftruncate(fd, bytes) ? errno : 0);
    if (rc != 0) {
      ::close(fd);
      throw InputError(fmt::format(
          "autocache: cannot make {} {} bytes: {} (choose --cache-memory or --cache-dir)", path,
          bytes, std::strerror(rc)));
    }
    return fd;
  };
  make_dir(fs::path(memory_path_).parent_path());
  owner_ = true;
  memory_fd_ = make_file(memory_path_, memory_bytes_, true);
  void* m = ::mmap(nullptr, static_cast<size_t>(memory_bytes_), PROT_READ | PROT_WRITE, MAP_SHARED,
                   memory_fd_, 0);
  if (m == MAP_FAILED) {
    throw InputError(fmt::format("autocache: cannot map {}: {}", memory_path_, errno_text()));
  }
  map_ = static_cast<char*>(m);
  const FileHeader h = make_header(layout_, memory_slots_);
  for (int64_t i = 0; i < layout_.samples; ++i) {
    auto* s = reinterpret_cast<SlotHeader*>(map_ + index_offset_ + i * 16);
    s->boundary = kNone;
    s->writer = -1;
    s->sample = layout_.first_id + i;
  }
  std::memcpy(map_, &h, sizeof(h));
  if (!disk_path_.empty()) {
    make_dir(fs::path(disk_path_).parent_path());
    disk_fd_ = make_file(disk_path_, disk_bytes_, false);
    full_pwrite(disk_fd_, &h, sizeof(h), 0, disk_path_);
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void ActivationStore::check_file(int fd, const std::string& path, int64_t expected) const {
  FileHeader h{};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    throw InputError(fmt::format("{}: cannot stat the activation cache: {}", path, errno_text()));
  }
  if (st.st_size < static_cast<off_t>(sizeof(FileHeader))) {
    throw InputError(fmt::format("{}: the activation cache file is short ({} bytes, {} expected)",
                                 path, st.st_size, expected));
  }
  full_pread(fd, &h, sizeof(h), 0, path);
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) {
    throw InputError(fmt::format("{}: not a pipetwin activation cache (bad magic)", path));
  }
  if (h.version != kVersion || h.header_bytes != sizeof(FileHeader) ||
      h.checksum != fnv1a(&h, offsetof(FileHeader, checksum))) {
    throw InputError(fmt::format("{}: the activation cache's header is corrupt", path));
  }
  const FileHeader want = make_header(layout_, memory_slots_);
  if (std::memcmp(&h, &want, sizeof(h)) != 0) {
    const std::vector<int64_t> shape(h.shape, h.shape + std::clamp(h.dims, 0, kMaxDims));
    throw InputError(fmt::format(
        "{}: the activation cache holds {} samples from id {} of shape {} ({} in memory), this "
        "run needs {} from id {} of shape {} ({} in memory)",
        path, h.samples, h.first_id, shape_text(shape), h.memory_slots, layout_.samples,
        layout_.first_id, shape_text(layout_.shape), memory_slots_));
  }
  if (st.st_size != static_cast<off_t>(expected)) {
    throw InputError(fmt::format("{}: the activation cache file is {} bytes, {} expected ({})",
                                 path, st.st_size, expected,
                                 st.st_size < expected ? "short" : "too long"));
  }
}

void ActivationStore::open_files() {
  memory_fd_ = ::open(memory_path_.c_str(), O_RDWR | O_CLOEXEC);
  if (memory_fd_ < 0) {
    throw InputError(
        fmt::format("{}: cannot open the activation cache: {}", memory_path_, errno_text()));
  }
  check_file(memory_fd_, memory_path_, memory_bytes_);
  if (!disk_path_.empty()) {
    disk_fd_ = ::open(disk_path_.c_str(), O_RDWR | O_CLOEXEC);
    if (disk_fd_ < 0) {
      throw InputError(
          fmt::format("{}: cannot open the activation cache: {}", disk_path_, errno_text()));
    }
    check_file(disk_fd_, disk_path_, disk_bytes_);
  }
  void* m = ::mmap(nullptr, static_cast<size_t>(memory_bytes_), PROT_READ | PROT_WRITE, MAP_SHARED,
                   memory_fd_, 0);
  if (m == MAP_FAILED) {
    throw InputError(fmt::format("autocache: cannot map {}: {}", memory_path_, errno_text()));
  }
  map_ = static_cast<char*>(m);
}

void ActivationStore::verify() const {
  auto size_ok = [](int fd, const std::string& path, int64_t expected) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(expected)) {
      throw InputError(fmt::format(
          "{}: the activation cache file is {} bytes, {} expected: it was truncated or replaced "
          "while the run used it",
          path, st.st_size, expected));
    }
  };
  size_ok(memory_fd_, memory_path_, memory_bytes_);
  if (disk_fd_ >= 0) size_ok(disk_fd_, disk_path_, disk_bytes_);
  if (std::memcmp(map_, kMagic, sizeof(kMagic)) != 0) {
    throw InputError(fmt::format("{}: the activation cache's header is corrupt", memory_path_));
  }
}

int64_t ActivationStore::index_of(int64_t id) const {
  const int64_t i = id - layout_.first_id;
  if (i < 0 || i >= layout_.samples) {
    throw InputError(fmt::format("autocache: sample id {} outside the cache's {}..{}", id,
                                 layout_.first_id, layout_.first_id + layout_.samples - 1));
  }
  return i;
}

Tier ActivationStore::tier_of(int64_t id) const {
  return index_of(id) < memory_slots_ ? Tier::kMemory : Tier::kDisk;
}

ActivationStore::SlotHeader& ActivationStore::header(int64_t id) const {
  static_assert(sizeof(SlotHeader) == 16);
  return *reinterpret_cast<SlotHeader*>(map_ + index_offset_ + index_of(id) * 16);
}

int ActivationStore::entry_boundary(int64_t id, const SlotHeader& h) const {
  const int32_t b =
      std::atomic_ref<int32_t>(const_cast<int32_t&>(h.boundary)).load(std::memory_order_acquire);
  const int F = boundary_.load();
  if (h.sample != id || b == 0 || b < kWriting || b > F) {
    throw InputError(fmt::format(
        "{}: the slot of sample {} holds sample {} at boundary {} (the run is at {}): the "
        "activation cache is corrupt",
        memory_path_, id, h.sample, b, F));
  }
  return b > 0 ? b : kNone;  // being written counts as none
}

bool ActivationStore::read_entry(int64_t id, int at, void* dst, bool* shared) {
  SlotHeader& h = header(id);
  const int64_t i = index_of(id);
  if (i < memory_slots_) {
    std::memcpy(dst, map_ + data_offset_ + i * stride_, static_cast<size_t>(slot_bytes_));
  } else {
    const int64_t off = kPage + (i - memory_slots_) * stride_;
    full_pread(disk_fd_, dst, slot_bytes_, off, disk_path_);
    ::posix_fadvise(disk_fd_, off, stride_, POSIX_FADV_DONTNEED);  // consumed (Appendix E)
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  std::atomic_ref<int32_t> b(h.boundary);
  *shared = std::atomic_ref<int32_t>(h.writer).load(std::memory_order_relaxed) != process_;
  return b.load(std::memory_order_relaxed) == at;
}

void ActivationStore::write_entry(int64_t id, int at, const void* src) {
  SlotHeader& h = header(id);
  const int64_t i = index_of(id);
  std::atomic_ref<int32_t> b(h.boundary);
  b.store(kWriting, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  if (i < memory_slots_) {
    std::memcpy(map_ + data_offset_ + i * stride_, src, static_cast<size_t>(slot_bytes_));
  } else {
    full_pwrite(disk_fd_, src, slot_bytes_, kPage + (i - memory_slots_) * stride_, disk_path_);
  }
  std::atomic_ref<int32_t>(h.writer).store(process_, std::memory_order_relaxed);
  b.store(at, std::memory_order_release);  // written last
}

void ActivationStore::set_boundary(int boundary, bool enabled) {
  if (boundary < boundary_.load()) {
    throw std::logic_error(
        fmt::format("autocache: the frozen boundary cannot move down ({} after {})", boundary,
                    boundary_.load()));
  }
  boundary_ = boundary;
  enabled_ = enabled && boundary > 0;
}

void ActivationStore::prefetch(const std::vector<int64_t>& ids) const {
  if (disk_fd_ < 0) return;
  for (int64_t id : ids) {
    const int64_t i = index_of(id);
    if (i < memory_slots_) continue;
    const auto& h = header(id);
    if (std::atomic_ref<int32_t>(const_cast<int32_t&>(h.boundary)).load() <= 0) continue;
    ::posix_fadvise(disk_fd_, kPage + (i - memory_slots_) * stride_, stride_, POSIX_FADV_WILLNEED);
  }
}

at::Tensor ActivationStore::frozen_forward(const std::vector<int64_t>& ids, const at::Tensor& input,
                                           const RunFrozen& run) {
  verify();
  const int F = boundary_.load();
  const int64_t n = static_cast<int64_t>(ids.size());
  if (input.size(0) != n || F < 1) {
    throw std::logic_error(
        fmt::format("autocache: {} samples, {} inputs, boundary {}", n, input.size(0), F));
  }
  std::vector<int64_t> sizes{n};
  sizes.insert(sizes.end(), layout_.shape.begin(), layout_.shape.end());
  at::Tensor out = at::empty(sizes, at::TensorOptions().dtype(layout_.dtype));
  char* base = static_cast<char*>(out.data_ptr());
  CacheStats local;
  std::map<int, std::vector<int64_t>> groups;  // first layer to run -> rows
  for (int64_t r = 0; r < n; ++r) {
    const int64_t id = ids[static_cast<size_t>(r)];
    int c = entry_boundary(id, header(id));
    elastic::SampleWork w;
    bool shared = false;
    if (c > 0 && read_entry(id, c, base + r * slot_bytes_, &shared)) {
      w.cached_at = c;
      w.read = tier_of(id);
      local.shared_reads += shared ? 1 : 0;
    } else {
      c = 0;  // none, or rewritten while it was read: run from the input
    }
    w.compute_from = c;
    w.compute_to = F;
    if (c < F) {
      w.write = tier_of(id);
      groups[c].push_back(r);
    }
    local.work.add(w, static_cast<double>(slot_bytes_), static_cast<double>(slot_bytes_));
  }
  for (const auto& [c, rows] : groups) run_group(c, F, rows, ids, input, out, run);
  add_stats(local);
  return out;
}

void ActivationStore::run_group(int c, int F, const std::vector<int64_t>& rows,
                                const std::vector<int64_t>& ids, const at::Tensor& input,
                                at::Tensor& out, const RunFrozen& run) {
  // Rows that start at layer c (0: from the input, else from their entry, read into `out`): run
  // [c, F), put the output in `out` and in the cache.
  char* base = static_cast<char*>(out.data_ptr());
  const at::Tensor index = at::tensor(rows, at::kLong);
  const at::Tensor x = c == 0 ? input.index_select(0, index) : out.index_select(0, index);
  const at::Tensor y = run(x, c, F).contiguous();
  std::vector<int64_t> want{static_cast<int64_t>(rows.size())};
  want.insert(want.end(), layout_.shape.begin(), layout_.shape.end());
  if (y.sizes().vec() != want || y.scalar_type() != layout_.dtype) {
    throw InputError(fmt::format(
        "autocache: F_frozen's output over {} layers is {} {}, the cache's slots hold {} {}", F,
        shape_text(y.sizes().vec()), c10::toString(y.scalar_type()), shape_text(want),
        c10::toString(layout_.dtype)));
  }
  const char* src = static_cast<const char*>(y.data_ptr());
  std::vector<int64_t> ran;
  for (size_t k = 0; k < rows.size(); ++k) {
    const char* row = src + static_cast<int64_t>(k) * slot_bytes_;
    std::memcpy(base + rows[k] * slot_bytes_, row, static_cast<size_t>(slot_bytes_));
    write_entry(ids[static_cast<size_t>(rows[k])], F, row);
    ran.push_back(ids[static_cast<size_t>(rows[k])]);
  }
  count_passes(c, F, ran);
}

void ActivationStore::remove_files() {
  owner_ = false;
  std::error_code ec;
  fs::remove(memory_path_, ec);
  if (!disk_path_.empty()) fs::remove(disk_path_, ec);
  for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) fs::remove(*it, ec);
  created_dirs_.clear();
}

}  // namespace pipetwin::exec
