#include "exec/runtime/board.hpp"

#include <fmt/format.h>

namespace pipetwin::exec {

Board::Board(const CompiledSchedule& cs, AbortSignal& abort)
    : cs_(cs),
      abort_(abort),
      done_(new std::atomic<uint8_t>[static_cast<size_t>(cs.num_actions())]),
      lowest_layer_done_(new std::atomic<int>[static_cast<size_t>(cs.num_actions())]),
      marks_(static_cast<size_t>(cs.num_actions())) {
  for (int i = 0; i < cs.num_actions(); ++i) {
    done_[static_cast<size_t>(i)] = 0;
    lowest_layer_done_[static_cast<size_t>(i)] = INT_MAX;
  }
}

void Board::mark_done(int id, std::shared_ptr<const Mark> end) {
  Waiters::Woken woken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (end) marks_[static_cast<size_t>(id)] = std::move(end);
    done_[static_cast<size_t>(id)].store(1, std::memory_order_release);
    woken = waiters_.collect();
  }
  Waiters::notify(woken);
}

void Board::mark_layer(int id, int layer, std::shared_ptr<const Mark> at) {
  Waiters::Woken woken;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& lowest = lowest_layer_done_[static_cast<size_t>(id)];
    if (layer >= lowest.load()) return;
    if (at) marks_[static_cast<size_t>(id)] = std::move(at);
    lowest.store(layer);
    woken = waiters_.collect();
  }
  Waiters::notify(woken);
}

std::vector<std::shared_ptr<const Mark>> Board::dependency_marks(int id) {
  std::vector<std::shared_ptr<const Mark>> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& d : cs_.deps(id)) {
    const auto& m = marks_[static_cast<size_t>(d.pred)];
    if (m) out.push_back(m);
  }
  return out;
}

bool Board::satisfied(const Dependency& d) const {
  if (done(d.pred)) return true;
  return d.from_layer >= 0 &&
         lowest_layer_done_[static_cast<size_t>(d.pred)].load() <= d.from_layer;
}

void Board::wait_dependencies(int id) {
  const auto deps = cs_.deps(id);
  bool ready = true;
  for (const auto& d : deps) ready = ready && satisfied(d);
  if (ready) return;
  std::unique_lock<std::mutex> lock(mu_);
  waiters_.wait(
      abort_, lock,
      [&] {
        for (const auto& d : deps) {
          if (!satisfied(d)) return false;
        }
        return true;
      },
      fmt::format("the dependencies of action {} ({})", cs_.ref(id).index,
                  describe(cs_.action(id))));
}

}  // namespace pipetwin::exec
