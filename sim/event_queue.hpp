// EventQueue: the discrete-event engine's agenda.
//
// A min-heap of (time, sequence) keys: events at equal times come out in the order they were
// scheduled, so a simulation is deterministic — identical inputs give identical outputs, bit for
// bit, on any machine and thread count. Keys are unique (the sequence number breaks every tie),
// so the order events come out in does not depend on how the heap is laid out.
//
// Pushing and popping are most of a simulation's work (one task-end event per task, up to
// 1.6 x 10^5 tasks per sweep point), so the heap is 4-ary (children of slot i at 4i+1..4i+4, half
// as deep as a binary heap, a node's children on one or two cache lines), sifts a hole rather than
// swapping, and compares keys without branching. Against std::priority_queue, bench/sim_bench's
// engine runs went from 99 to 60 us (1F1B, K = 4, M = 16, 8 steps) and from 236 to 208 us (GPipe,
// K = 8, M = 32, dp = 4) on the 2-core development machine. (Sifting bottom-up, as std::pop_heap
// does, was slower here: new events are mostly due soon, so they belong near the top.)
//
// Thread-safety: not thread-safe; one queue per simulation.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace pipetwin::sim {

struct Event {
  double time = 0;
  uint64_t seq = 0;
  int32_t id = 0;      // what the event is about (a task, an edge)
  uint8_t kind = 0;    // meaning chosen by the simulation
  uint32_t epoch = 0;  // lets a simulation discard superseded events
};

class EventQueue {
 public:
  void push(double time, int32_t id, uint8_t kind, uint32_t epoch = 0) {
    heap_.emplace_back();
    sift_up(heap_.size() - 1, Event{time, next_seq_++, id, kind, epoch});
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // The earliest event; the queue must not be empty.
  Event pop() {
    const Event top = heap_.front();
    const Event last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n == 0) return top;
    size_t hole = 0;
    for (;;) {
      const size_t first = hole * kArity + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = first + kArity < n ? first + kArity : n;
      for (size_t c = first + 1; c < end; ++c) {
        if (earlier(heap_[c], heap_[best])) best = c;
      }
      if (!earlier(heap_[best], last)) break;
      heap_[hole] = heap_[best];
      hole = best;
    }
    heap_[hole] = last;
    return top;
  }
  void clear() {
    heap_.clear();
    next_seq_ = 0;
  }
  void reserve(size_t n) { heap_.reserve(n); }

 private:
  static constexpr size_t kArity = 4;
  // Puts `e` into the hole at `hole`, moving later ancestors down.
  void sift_up(size_t hole, const Event& e) {
    while (hole > 0) {
      const size_t parent = (hole - 1) / kArity;
      if (!earlier(e, heap_[parent])) break;
      heap_[hole] = heap_[parent];
      hole = parent;
    }
    heap_[hole] = e;
  }
  // (time, seq) as one 128-bit integer, so that comparing two keys takes no branch (replicas in
  // lockstep and balanced stages make many equal times, which a branch on them mispredicts). The
  // time's bits are mapped so that unsigned order is numeric order (-0 counts as +0).
  static unsigned __int128 key(const Event& e) {
    auto u = std::bit_cast<uint64_t>(e.time + 0.0);
    u ^= static_cast<uint64_t>(static_cast<int64_t>(u) >> 63) | (uint64_t{1} << 63);
    return (static_cast<unsigned __int128>(u) << 64) | e.seq;
  }
  static bool earlier(const Event& a, const Event& b) { return key(a) < key(b); }
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace pipetwin::sim
