// Fault injection: how tests make the executor fail on purpose (faults in the
// executor), read from one place: the environment variable PIPETWIN_FAULT.
//
// Two spellings:
//   MODE@KEY=V[,KEY=V...]            e.g. "throw@step=3,rank=1", "kill@checkpoint=4,rank=0",
//                                    "hang@step=2", "diskfull@checkpoint=4,rank=1",
//                                    "kill@transition=22,rank=1"
//   device=D,action=I,mode=MODE      the older per-action form (fires at action I of device D)
// Modes: throw (the stage raises an error), exit (the process exits with status 3), kill (the
// process sends itself SIGKILL: no handler, no flush, as the OOM killer would), hang (the thread
// stops answering forever), diskfull (the checkpoint writer's file-size limit drops to 512 bytes
// with SIGXFSZ ignored, so its writes fail with EFBIG as on a full disk; the limit is restored
// afterwards). Keys: step (a training step, 0-based, so step=S fires after S steps are done:
// in the compute stream of a device of the rank, before its first compute action of that
// global optimizer step), checkpoint (the
// checkpoint taken after that step: diskfull applies while the rank writes its file; the other
// modes fire after every rank's file is durable and before the manifest, the worst moment for
// consistency), transition (the elastic transition after that step: fires once the first
// stage's state has crossed between the ranks and before the rest, the worst moment for a
// re-plan), rank (default: every rank), restart (only in the job started after that many
// restarts: the launcher of `train --on-rank-loss continue` sets PIPETWIN_RESTART_COUNT; default:
// every job), device and action (the older form).
//
// We chose the environment over a flag because the faults must reach processes the launcher
// starts (`--nproc`) and code far from the command line (stream threads, the checkpoint writer)
// without threading test options through production interfaces.
//
// Thread-safety: a Fault is an immutable value once parsed; fire() and the hooks may be called
// from any thread.
#pragma once

#include <cstdint>
#include <string>

namespace pipetwin::exec {

class Fault {
 public:
  enum class Mode { kNone, kThrow, kExit, kKill, kHang, kDiskFull };

  // Parses PIPETWIN_FAULT (no fault when unset or empty); InputError naming the variable on a
  // malformed value.
  static Fault from_environment();
  static Fault parse(const std::string& text);

  Mode mode() const { return mode_; }
  bool armed() const { return mode_ != Mode::kNone; }
  const std::string& text() const { return text_; }

  // Stream code of `device` on `rank` is about to run action `index` of its list, belonging to
  // global optimizer step `step`; `compute` tells whether it is a compute action.
  void at_action(int rank, int device, int index, int64_t step, bool compute) const;
  // Every rank's file of the checkpoint after `step` is durable; the manifest is next.
  void at_checkpoint(int rank, int64_t step) const;
  // The elastic transition after `step` is half-way through moving layer state.
  void at_transition(int rank, int64_t step) const;
  // Whether the writer of `rank`'s checkpoint file after `step` should run out of disk.
  bool disk_full(int rank, int64_t step) const;

  [[noreturn]] void fire() const;

 private:
  bool on_rank(int rank) const { return rank_ < 0 || rank_ == rank; }

  Mode mode_ = Mode::kNone;
  std::string text_;
  int rank_ = -1, device_ = -1, action_ = -1;
  int64_t step_ = -1, checkpoint_ = -1, transition_ = -1;
};

// Lowers the soft file-size limit of this process to `bytes` (SIGXFSZ ignored, so writes past it
// fail with EFBIG) until destroyed, which restores the previous limit and signal disposition.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(uint64_t bytes);
  ~FileSizeLimit();
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  uint64_t old_soft_ = 0;
  bool active_ = false;
  void (*old_handler_)(int) = nullptr;
};

}  // namespace pipetwin::exec
