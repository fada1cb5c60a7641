// ActivationStore: AutoCache live — the machine's cache of F_frozen outputs, keyed by sample id
// and shared by every process (pipeline replica) on the machine (PipeTransformer Section 3.4,
// Figure 8, Appendix D.1 and E: AutoCache).
//
// Section 3.4: "The cache must be shared across processes in real time, as creating and warming
// up a dedicated cache for each model replica slow down the training. This is achieved by
// spawning a dedicated daemon process to hold cache in shared memory that all training processes
// can access in real time." Here the shared memory is a file mapped MAP_SHARED by every process
// of the job on the machine (no daemon: the page cache holds it; /dev/shm is memory):
//
//   <cache dir>/activations.mem   file header | one slot header per sample | memory slots
//   <spill dir>/activations.disk  file header | disk slots (read with pread, written with pwrite)
//
// The cache dir defaults to /dev/shm/pipetwin-cache-<job> (job: "port<MASTER_PORT>" in a c10d
// job, so all its processes agree and concurrent jobs, which need distinct ports, do not
// collide; "pid<pid>" for one process). The spill dir defaults to the cache dir when one is
// given, else to a per-job folder under the system temp dir, because a spill "to the disk"
// (Section 3.4) into /dev/shm would be memory again.
//
// Slots. One F_frozen output per sample, fixed size: the output's per-sample shape must be the
// same at every boundary the run may freeze at (it is for the zoo's transformers: [tokens, dim]
// after the embedding and after every block; uniform_slot_shape() refuses a model where it is
// not). Appendix D.1: "we build a sample unique ID by returning index in the get_item() function
// ... we can find a sample's hidden feature with O(1) time": sample id i lives at slot i.
//
// Slot headers (16 bytes, all in the mapped file, also for disk slots, so a lookup never touches
// the disk): the boundary the entry was computed at (-1 none, -2 being written), the process
// that wrote it, and the sample id (a check). A writer sets -2, writes the data, then stores the
// new boundary with release order — written last, so a reader never takes a half-written entry:
// it loads the boundary (acquire), copies the data, and loads it again; if it changed, the entry
// counts as missing and the sample runs from its input. A slot is only ever rewritten at a
// larger boundary (lazy replacement moves up), so the check has no ABA case. Within an epoch the
// elastic sampler gives each sample to one replica once; epochs are separated by collectives; so
// in practice no two processes touch a slot at once.
//
// What one replica's F_frozen does per step (frozen_forward), per sample, with ActivationCache's
// rules (core/elastic/autocache.hpp): hit (entry at the current boundary F): read it; stale (an
// entry at c < F): read it, run only the frozen layers [c, F), rewrite it at F — Figure 8, "feed
// them to the next 4 layers to compute activations for layer 7, then replace the existing cache
// ... without running any sample through any frozen layers twice"; miss: run all frozen layers
// [0, F) on the input, write it. Samples with the same starting layer run as one batch.
//
// Tiers. ActivationCache keeps entries in host memory in the order they arrive while they fit
// the budget. One process cannot know in which order the others wrote, so here the tier is a
// function of the sample id, the same in every process: the first floor(budget / slot bytes)
// ids of the machine's subset live in memory, the rest on disk (the budget covers the entries,
// not the 16-byte headers). With the sampler's random order every step finds the same share of
// its samples on disk as ActivationCache would once full. Disk entries are prefetched as
// Appendix E's sliding window does ("move the window to prefetch the caching that the training
// requires and delete the caching that is consumed from the CPU host memory"): the worker asks
// prefetch() for the next step's samples (posix_fadvise WILLNEED, read-ahead by the kernel), and
// a disk entry once read is dropped from the page cache (DONTNEED).
//
// Files. The machine's first process creates them (truncating any left-over of a crashed job of
// the same name); the others open them after a barrier and check the header (magic, version,
// checksum, layout) and the sizes: a wrong, short or corrupt file is an InputError naming it,
// never a crash — and since a mapped file that shrinks would fault on access, verify() checks
// the sizes again before every batch. The store that created the files removes them (and the
// folders it made) when it is destroyed: the trainer destroys it after a barrier at the end of
// the run, or as a failing run unwinds (unlinking is safe while other processes still map the
// files). A process killed hard (SIGKILL, a crash) leaves the folder behind: activations.mem in
// /dev/shm holds host memory until it is removed by hand (rm -r /dev/shm/pipetwin-cache-*) or
// the machine reboots; a later job of the same name truncates and rebuilds it.
//
// Thread-safety: frozen_forward, prefetch and count_passes may run concurrently on several
// compute threads (replicas of one process) for disjoint samples; set_boundary, take_stats,
// track_passes and remove_files are for the trainer's thread between windows.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "core/elastic/autocache.hpp"

namespace pipetwin::exec {

// `--autocache`: on when the cost model says reading beats the frozen forward pass (auto), always
// once layers are frozen (on), never (off).
enum class AutoCacheMode { kAuto, kOn, kOff };
AutoCacheMode parse_autocache_mode(const std::string& text);  // InputError naming --autocache

struct CacheOptions {
  AutoCacheMode mode = AutoCacheMode::kAuto;
  std::string dir;        // empty: /dev/shm/pipetwin-cache-<job>
  std::string spill_dir;  // empty: `dir` if given, else <temp dir>/pipetwin-cache-<job>
  double memory_budget_bytes = std::numeric_limits<double>::infinity();  // `--cache-memory`
  void validate() const;  // InputError naming the flag
};

// What the slots hold: the machine's samples [first_id, first_id + samples) and the F_frozen
// output of one sample.
struct CacheLayout {
  int64_t first_id = 0;
  int64_t samples = 0;
  std::vector<int64_t> shape;  // per sample
  at::ScalarType dtype = at::kFloat;
  int64_t slot_bytes() const;
};

// The per-sample shape every boundary gives, from (boundary, shape) pairs; InputError when two
// differ ("F_frozen's output per sample is [5, 32] after 3 layers but [5] after 5 ...").
std::vector<int64_t> uniform_slot_shape(
    const std::vector<std::pair<int, std::vector<int64_t>>>& outputs);

// The job's name in default folder names: "port<MASTER_PORT>" in a c10d job, else "pid<pid>".
std::string cache_job_name(bool distributed, int master_port);

struct CacheStats {
  elastic::BatchWork work;  // hits, stale, misses, bytes read and written per tier
  long shared_reads = 0;    // entries read that another process wrote
};

class ActivationStore {
 public:
  enum class Role { kCreate, kOpen };
  // F_frozen layers [from, to) over `x` (the stage runtime's frozen_range).
  using RunFrozen = std::function<at::Tensor(const at::Tensor& x, int from, int to)>;

  // kCreate makes the folders and files (the machine's first process); kOpen maps those another
  // process made, and checks them. `process`: this process's number on the machine (slot
  // headers record the writer). InputError naming the file on any mismatch.
  ActivationStore(const CacheOptions& options, const std::string& job, CacheLayout layout,
                  Role role, int process);
  ~ActivationStore();
  ActivationStore(const ActivationStore&) = delete;
  ActivationStore& operator=(const ActivationStore&) = delete;

  const CacheLayout& layout() const { return layout_; }
  const std::string& memory_path() const { return memory_path_; }
  const std::string& disk_path() const { return disk_path_; }  // empty: nothing spills
  int64_t memory_slots() const { return memory_slots_; }
  elastic::Tier tier_of(int64_t id) const;

  // F_frozen now covers model layers [0, boundary); the cache is used while `enabled`.
  void set_boundary(int boundary, bool enabled);
  int boundary() const { return boundary_.load(); }
  bool enabled() const { return enabled_.load(); }

  // F_frozen's output for one replica's samples `ids` whose inputs are the rows of `input`
  // (see above: hits read, stale entries run [c, F), misses run [0, F); entries rewritten).
  at::Tensor frozen_forward(const std::vector<int64_t>& ids, const at::Tensor& input,
                            const RunFrozen& run);
  // Read-ahead of the disk entries of `ids` (the next step's samples).
  void prefetch(const std::vector<int64_t>& ids) const;
  // InputError when a file shrank or its header changed since it was opened.
  void verify() const;

  // Frozen-layer sample passes: `ids` ran through model layers [from, to) (frozen_forward counts
  // its own; the worker counts F_frozen runs without the cache). Per layer always; per (layer,
  // sample) once track_passes(true) — a test's proof that no sample passes a layer twice.
  void count_passes(int from, int to, const std::vector<int64_t>& ids);
  void track_passes(bool on);
  int64_t passes(int layer) const;          // sample passes through `layer` so far
  int passes(int layer, int64_t id) const;  // needs track_passes
  int max_passes_per_sample() const;        // over every layer and sample tracked
  CacheStats take_stats();                  // since the last call (this process)
  // Unlinks the files, and the folders this store created (the creator's destructor does).
  void remove_files();

 private:
  struct SlotHeader;
  SlotHeader& header(int64_t id) const;
  int64_t index_of(int64_t id) const;  // InputError for an id outside the layout
  int entry_boundary(int64_t id, const SlotHeader& h) const;
  bool read_entry(int64_t id, int at, void* dst, bool* shared);
  void run_group(int c, int F, const std::vector<int64_t>& rows, const std::vector<int64_t>& ids,
                 const at::Tensor& input, at::Tensor& out, const RunFrozen& run);
  void add_stats(const CacheStats& s);
  void write_entry(int64_t id, int at, const void* src);
  void create_files(const CacheOptions& options);
  void open_files();
  void check_file(int fd, const std::string& path, int64_t expected_bytes) const;

  CacheLayout layout_;
  int process_;
  bool owner_ = false;  // created the files: removes them
  int64_t slot_bytes_ = 0, stride_ = 0, memory_slots_ = 0;
  int64_t index_offset_ = 0, data_offset_ = 0, memory_bytes_ = 0, disk_bytes_ = 0;
  std::string memory_path_, disk_path_;
  std::vector<std::string> created_dirs_;
  int memory_fd_ = -1, disk_fd_ = -1;
  char* map_ = nullptr;
  std::atomic<int> boundary_{0};
  std::atomic<bool> enabled_{false};
  mutable std::mutex mu_;  // stats and pass counts
  CacheStats stats_;
  std::vector<int64_t> layer_passes_;
  bool track_ = false;
  std::vector<std::vector<uint16_t>> sample_passes_;  // [layer][id - first_id]
};

}  // namespace pipetwin::exec
