// Running a Sweep: all cores, resumable, shardable, deterministic.
//
//   threads      `jobs` workers (std::thread) take points in index order from a shared counter;
//                the calling thread writes rows in index order as soon as every earlier row of
//                the shard is done, so the file is the same bytes whatever the thread count.
//   appending    rows are appended with one write() per batch of whole lines and the file is
//                fdatasync'd at safe points (every `sync_interval_s`, and before returning), so
//                a killed sweep keeps every row it wrote and a crash loses at most the last
//                second. (The CSV is appended to, not written whole through a temp file and a
//                rename as other outputs are: appending in place is what makes resume cheap.)
//   stopping     when `stop` becomes true (the CLI sets it on SIGINT) or `limit` new points are
//                done, workers take no new point, finish the ones they hold, and every finished
//                point is written: an interrupted sweep loses no finished point.
//   resuming     an existing file is read back: its header must be this sweep's header, its
//                k-th row must carry the inputs of the shard's k-th point; those points are not
//                recomputed. A last record cut short by a crash (no '\n', or the wrong number of
//                fields) is torn: it is cut off and recomputed. Anything else is an InputError
//                naming the file, the line and the field, as is a file of another sweep.
//   sharding     shard i of n (0 <= i < n) owns the points with index % n == i, so a SLURM job
//                array (--array=0-(n-1), --shard $SLURM_ARRAY_TASK_ID/n) splits any grid
//                evenly; merge_sweeps() (results.hpp) puts the shards back together.
//
// Thread-safety: run_sweep() uses its own threads; the Sweep is shared read-only.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "studies/sweep/sweep.hpp"

namespace pipetwin::sim {

struct SweepProgress {
  int64_t total = 0;    // points in this shard
  int64_t resumed = 0;  // found done in the file
  int64_t done = 0;     // done now, including resumed ones
  double elapsed_s = 0;
  double rate = 0;  // points computed per second in this run
};

struct RunOptions {
  std::string output;                       // the CSV
  int jobs = 0;                             // worker threads; 0: hardware concurrency
  int shard = 0, shards = 1;                // run shard `shard` of `shards`
  int64_t limit = -1;                       // compute at most this many new points (-1: all)
  const std::atomic<bool>* stop = nullptr;  // set to stop early (SIGINT)
  std::function<void(const SweepProgress&)> progress;  // called on the calling thread
  // Called on the worker thread, under the pool's lock, after each computed point: lets a test
  // (or an embedding program) raise `stop` after an exact number of points.
  std::function<void()> point_done;
  double progress_interval_s = 0.2;
  double sync_interval_s = 1.0;
};

struct RunResult {
  int64_t total = 0;     // points in this shard
  int64_t resumed = 0;   // already in the file
  int64_t computed = 0;  // computed by this run
  bool complete = false;
  bool repaired = false;  // a torn last record was cut off
};

RunResult run_sweep(const Sweep& sweep, const RunOptions& options);

// Every point allocates and frees schedules of up to 10^5 actions. glibc hands such large blocks
// back to the kernel on free and faults fresh pages in for the next point, which costs a quarter
// of a sweep's time; this raises its mmap and trim thresholds (process-wide, once) so freed
// memory is reused. run_sweep() and plan_capacity() call it.
void keep_freed_memory();

// "i/n" -> (i, n); InputError naming --shard for anything else.
std::pair<int, int> parse_shard(const std::string& text);

}  // namespace pipetwin::sim
