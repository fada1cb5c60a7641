// EventQueue: the discrete-event engine's agenda.
//
// A binary min-heap of (time, sequence) keys: events at equal times come out in the order they
// were scheduled, so a simulation is deterministic — identical inputs give identical outputs,
// bit for bit, on any machine and thread count.
//
// Thread-safety: not thread-safe; one queue per simulation.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

namespace pipetwin::sim {

struct Event {
  double time = 0;
  uint64_t seq = 0;
  int32_t id = 0;     // what the event is about (a task, an edge)
  uint8_t kind = 0;   // meaning chosen by the simulation
  uint32_t epoch = 0; // lets a simulation discard superseded events
};

class EventQueue {
 public:
  void push(double time, int32_t id, uint8_t kind, uint32_t epoch = 0) {
    heap_.push(Event{time, next_seq_++, id, kind, epoch});
  }
  bool empty() const { return heap_.empty(); }
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    return e;
  }
  void clear() {
    heap_ = {};
    next_seq_ = 0;
  }
  void reserve(size_t n) {
    std::vector<Event> storage;
    storage.reserve(n);
    heap_ = Heap(Later{}, std::move(storage));
  }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const {
      return a.time != b.time ? a.time > b.time : a.seq > b.seq;
    }
  };
  using Heap = std::priority_queue<Event, std::vector<Event>, Later>;
  Heap heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace pipetwin::sim
