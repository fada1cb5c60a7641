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
// does, was slower here: new events are mostly due soon, so they belong near the top.) The heap
// keeps each event's time already mapped to its ordered bits, and picks the earliest child
// without branching: the GPipe case went from 13.0 to 23.5 M actions/s on an Intel Xeon VM,
// where mapping the time at every comparison had made pop() 55% of the engine's time.
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
    sift_up(heap_.size() - 1, Entry{time_key(time), next_seq_++, id, kind, epoch});
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // The earliest event; the queue must not be empty.
  Event pop() {
    const Entry top = heap_.front();
    const Entry last = heap_.back();
    heap_.pop_back();
    const size_t n = heap_.size();
    if (n != 0) {
      const unsigned __int128 last_key = key(last);
      size_t hole = 0;
      for (;;) {
        const size_t first = hole * kArity + 1;
        if (first >= n) break;
        size_t best = first;
        unsigned __int128 best_key = key(heap_[first]);
        const size_t end = first + kArity < n ? first + kArity : n;
        for (size_t c = first + 1; c < end; ++c) {
          const unsigned __int128 k = key(heap_[c]);
          const bool less = k < best_key;
          best = less ? c : best;
          best_key = less ? k : best_key;
        }
        if (!(best_key < last_key)) break;
        heap_[hole] = heap_[best];
        hole = best;
      }
      heap_[hole] = last;
    }
    return Event{key_time(top.time_key), top.seq, top.id, top.kind, top.epoch};
  }
  void clear() {
    heap_.clear();
    next_seq_ = 0;
  }
  void reserve(size_t n) { heap_.reserve(n); }

 private:
  static constexpr size_t kArity = 4;
  // An event as the heap keeps it: the time already mapped to its ordered bits (time_key), so
  // that comparing two events is one 128-bit comparison with nothing to compute first (mapping
  // the time at every comparison cost the engine a tenth of its time).
  struct Entry {
    uint64_t time_key = 0;
    uint64_t seq = 0;
    int32_t id = 0;
    uint8_t kind = 0;
    uint32_t epoch = 0;
  };
  // Puts `e` into the hole at `hole`, moving later ancestors down.
  void sift_up(size_t hole, const Entry& e) {
    const unsigned __int128 k = key(e);
    while (hole > 0) {
      const size_t parent = (hole - 1) / kArity;
      if (!(k < key(heap_[parent]))) break;
      heap_[hole] = heap_[parent];
      hole = parent;
    }
    heap_[hole] = e;
  }
  // The time's bits mapped so that unsigned order is numeric order (-0 counts as +0), and back.
  static uint64_t time_key(double time) {
    auto u = std::bit_cast<uint64_t>(time + 0.0);
    return u ^ (static_cast<uint64_t>(static_cast<int64_t>(u) >> 63) | (uint64_t{1} << 63));
  }
  static double key_time(uint64_t k) {
    const uint64_t u = (k >> 63) != 0 ? k ^ (uint64_t{1} << 63) : ~k;
    return std::bit_cast<double>(u);
  }
  // (time, seq) as one 128-bit integer, so that comparing two keys takes no branch (replicas in
  // lockstep and balanced stages make many equal times, which a branch on them mispredicts).
  static unsigned __int128 key(const Entry& e) {
    return (static_cast<unsigned __int128>(e.time_key) << 64) | e.seq;
  }
  std::vector<Entry> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace pipetwin::sim
