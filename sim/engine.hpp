// Engine: a discrete-event simulator of tasks on FIFO streams with dependencies and rendezvous.
//
// It knows nothing of pipelines. A TaskGraph gives tasks with durations; each task belongs to a
// stream (a FIFO server: a device's compute stream, a copy engine, a communicator) that runs its
// tasks one at a time in the given order. A task starts when it is at the head of its stream,
// the stream is idle, and all its dependencies are satisfied; a dependency is satisfied when its
// predecessor ends, or `offset` seconds after the predecessor starts (a gradient bucket that is
// ready part-way through a backward). Tasks of a rendezvous group (a send and its receive, the
// members of an all-reduce) start together, once every member could start. Events at equal times
// are processed in the order they were scheduled (event_queue.hpp), so runs are deterministic.
//
// Streams may share a capacity (processor sharing): streams in one sharing group — the compute
// streams of two vCPUs that are hyper-threads of one physical core, say — slow each other down.
// A task runs at its own speed while it is alone in its group and at `shared_duration` speed
// while one other task of the group runs too; each further co-runner adds as much again, so
// with n running a task takes duration + (n - 1) x (shared_duration - duration) (a GPU's four
// stream sets of saturating kernels, shared_duration = 2 x duration, each get a quarter). Streams
// of a group may also run on one core (more pipeline stages than vCPUs): then the co-runners on
// other cores slow a task as above, counted once per busy core, and the n tasks running on its
// own core take turns, each at 1/n of that speed. When a
// task of the group starts or ends, the remaining work of the others is carried over at the new
// speed and their end rescheduled.
// Edge offsets (a successor released before its predecessor ends: an all-reduce bucket whose
// gradients are ready mid-backward) stay at their unshared times, an approximation.
//
// Locks: a task may hold a lock while it runs, so that tasks of different streams holding the
// same lock run one at a time (PyTorch's autograd engine runs every backward pass on a GPU on the
// one worker thread it keeps for that GPU, whichever of the GPU's stream sets the pass is for). A
// task that could start but finds its lock held waits; when the lock is released the waiter that
// became ready first starts.
//
// Cold starts: a task may cost more when its stream sat idle before it (its working set left the
// caches meanwhile); the extra is a function of that wait, given per task, and stretches the
// task's durations (and its edge offsets) by one factor fixed when it starts.
//
// Network (optional): a task may move data as flows over shared links (sim/network/flow_model.hpp:
// max-min fair sharing, rates recomputed whenever a flow starts or ends). Such a task ends when
// the last of its flows has sent its bytes, plus its latency; the other members of its
// rendezvous group (a receive, the other ranks of an all-reduce) end with it. Its `duration`
// is then unused. Without network data every task takes its duration, as before.
//
// Thread-safety: an Engine is not thread-safe; use one per thread. A TaskGraph is immutable once
// prepared and may be shared by engines on several threads.
#pragma once

#include <cstdint>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/event_queue.hpp"
#include "sim/network/flow_model.hpp"

namespace pipetwin::sim {

struct TaskGraph {
  int num_streams = 0;
  std::vector<double> duration;       // per task (seconds)
  std::vector<int32_t> stream;        // per task
  std::vector<int32_t> stream_begin;  // CSR: tasks of each stream, in FIFO order
  std::vector<int32_t> stream_tasks;
  std::vector<int32_t> dep_begin;  // CSR: dependencies of each task
  std::vector<int32_t> dep_pred;
  std::vector<double> dep_offset;    // < 0: at the predecessor's end
  std::vector<int32_t> group;        // per task, -1 for none
  std::vector<int32_t> group_begin;  // CSR: members of each group
  std::vector<int32_t> group_members;
  // Processor sharing (optional): per stream its sharing group (-1: none), and per task its
  // duration while sharing (empty: equal to `duration`).
  std::vector<int32_t> stream_share;
  std::vector<double> shared_duration;
  // Cores (optional): per stream the core it runs on, for streams of one sharing group that take
  // turns on a core (empty: every stream of a group has a core of its own).
  std::vector<int32_t> stream_core;
  // Cold starts (optional): a task that starts after its stream waited w seconds (since the
  // stream's last task ended, or since time 0) takes cold_extra(w) seconds more at its unshared
  // speed, and proportionally more shared: cold_extra is piecewise linear through (0, 0) and
  // (cold_waits[i], cold_extra[task * cold_waits.size() + i]), flat after the last wait. Empty:
  // no cold starts.
  std::vector<double> cold_waits;
  std::vector<double> cold_extra;
  // Locks (optional): per task the lock it holds while it runs (-1: none). A task of a rendezvous
  // group holds none. Empty: no locks.
  std::vector<int32_t> lock;
  // Network (optional): link capacities (bytes/s), per task the flows it moves (CSR into
  // flow_bytes and the per-flow paths) and the latency it pays once they are sent. Empty
  // net_flow_begin: no network; else it has num_tasks() + 1 entries.
  std::vector<double> net_capacity;
  std::vector<int32_t> net_flow_begin;
  std::vector<double> net_latency;
  std::vector<double> flow_bytes;
  std::vector<int32_t> flow_path_begin{0}, flow_path_links;

  int num_tasks() const { return static_cast<int>(duration.size()); }
  // Builds the reverse edges the engine walks; call after filling the graph.
  void prepare();
  // CSR: the dependents of each task released when it ends, and those released `early_offset`
  // after it starts (kept apart so that starting a task looks only at the few of the latter).
  std::vector<int32_t> out_begin, out_task;
  std::vector<int32_t> early_begin, early_task;
  std::vector<double> early_offset;
};

class DeadlockError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Engine {
 public:
  // Simulates the graph; start/end times land in the vectors (resized to the task count).
  // Throws DeadlockError when tasks remain that can never start.
  void run(const TaskGraph& g, std::vector<double>& start, std::vector<double>& end);

 private:
  void reset(const TaskGraph& g, std::vector<double>& start, std::vector<double>& end);
  void reset_locks(const TaskGraph& g);
  [[noreturn]] void stalled(const TaskGraph& g, int completed) const;  // throws DeadlockError
  void try_start(const TaskGraph& g, int32_t task, double now);
  void start_task(const TaskGraph& g, int32_t task, double now);
  // Processor sharing: re-times the running tasks of `share` after its membership changed.
  void reshare(const TaskGraph& g, int share, double now);
  // Locks: whether `task` may start as far as its lock goes (else it is queued for the lock), and
  // the lock's release when it ends (the first waiter starts).
  bool take_lock(const TaskGraph& g, int32_t task);
  void release_lock(const TaskGraph& g, int32_t task, double now);
  // Cold starts: the factor on task t's durations after its stream waited `wait` seconds.
  double cold_scale(const TaskGraph& g, size_t t, double wait) const;
  // For a running task of a sharing group: the tasks taking turns on its core (itself included)
  // and the other cores of the group that are busy.
  std::pair<double, double> co_runners(const TaskGraph& g, const std::vector<int32_t>& run,
                                       int32_t task);
  // Network: starts a task's flows (or marks it as waiting for its group's), and ends the tasks
  // whose flows are sent by `now`.
  void reset_network(const TaskGraph& g);
  bool start_flows(const TaskGraph& g, size_t t, double now);
  void network_due(const TaskGraph& g, double now);
  void schedule_network_check();
  int share_of(const TaskGraph& g, int32_t task) const {
    return g.stream_share.empty()
               ? -1
               : g.stream_share[static_cast<size_t>(g.stream[static_cast<size_t>(task)])];
  }

  EventQueue queue_;
  std::vector<int32_t> pending_;
  std::vector<int32_t> head_;
  std::vector<uint8_t> busy_;
  std::vector<uint8_t> ready_;
  std::vector<int32_t> group_ready_;
  // Processor sharing state: per task the work left (fraction of the task), the time it was last
  // updated, and an epoch that invalidates superseded end events; per share the running tasks.
  std::vector<double> left_, since_, rate_;
  std::vector<uint32_t> epoch_;
  std::vector<std::vector<int32_t>> running_;
  std::vector<int32_t> busy_cores_;  // co_runners' scratch
  // Cold starts (only when the graph has them): per stream the end of its last task, per task
  // the factor its durations were stretched by when it started.
  std::vector<double> last_end_, scale_;
  // Locks (only when the graph has them): per lock its holder (-1: free) and its waiters in the
  // order they became ready; per task whether it waits.
  std::vector<int32_t> lock_holder_;
  std::vector<std::vector<int32_t>> lock_waiters_;
  std::vector<uint8_t> lock_queued_;
  // Network (only when the graph has it): the flows in progress, per flow its task, per task the
  // flows it still moves and whether it ends with another member of its group; an epoch that
  // invalidates superseded checks.
  network::FlowModel net_;
  std::vector<int32_t> flow_task_, flows_left_, done_;
  std::vector<uint8_t> follower_;
  uint32_t net_epoch_ = 0;
  double net_check_at_ = 0;  // the pending check's time (infinity: none)
  std::vector<double>* start_ = nullptr;
  std::vector<double>* end_ = nullptr;
};

}  // namespace pipetwin::sim
