// CompiledSchedule's checks over a linked schedule: weight versions consistent along each
// stage, and progress (the schedule runs to the end with no circular wait). Split from
// compiled.cpp, which builds the links.
#include <fmt/format.h>

#include "core/error.hpp"
#include "core/schedule/compiled.hpp"

namespace pipetwin {

namespace {

size_t at(int32_t i) {
  return static_cast<size_t>(i);
}

}  // namespace

void CompiledSchedule::check_versions(const std::string& origin) const {
  const auto& sh = schedule_.shape;
  std::vector<int32_t> current;
  for (int d = 0; d < num_devices(); ++d) {
    current.assign(at(sh.num_stages), 0);
    const int rep = d / sh.devices_per_replica;
    const auto& list = schedule_.devices[at(d)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      auto& cur = current[at(a.stage)];
      int32_t expect = -1;
      switch (a.op) {
        case Op::kForward:
          expect = cur;
          break;
        case Op::kBackward:
        case Op::kBackwardInput:
        case Op::kBackwardWeight:
        case Op::kRecompute:
          // The forward came earlier on this device and was checked: its version is the one
          // the order gave it.
          expect = schedule_.stashes_weights
                       ? action(forward_of(rep, a.stage, a.micro_batch)).version
                       : cur;
          break;
        case Op::kOptimizerStep:
          expect = ++cur;
          break;
        default:
          continue;
      }
      if (a.version != expect) {
        throw InputError(
            fmt::format("{}: device {} action {} ({}): declares weight version {} but "
                        "the order gives {}",
                        origin, d, i, describe(a), a.version, expect));
      }
    }
  }
}

void CompiledSchedule::check_progress(const std::string& origin) const {
  // Timeless run: every action completes the moment it can start. Stuck actions mean deadlock.
  const int n = num_actions();
  std::vector<int32_t> pending(at(n)), out_begin(at(n) + 1, 0), dependents(deps_.size());
  for (const auto& d : deps_) ++out_begin[at(d.pred) + 1];
  for (int id = 0; id < n; ++id) out_begin[at(id) + 1] += out_begin[at(id)];
  std::vector<int32_t> fill(out_begin.begin(), out_begin.end() - 1);
  for (int id = 0; id < n; ++id) {
    pending[at(id)] = static_cast<int32_t>(deps(id).size());
    for (const auto& d : deps(id)) dependents[at(fill[at(d.pred)]++)] = id;
  }
  std::vector<int32_t> head(at(num_streams()), 0);
  std::vector<int32_t> group_ready(at(std::max(0, num_groups())), 0);
  std::vector<char> ready(at(n), 0), done(at(n), 0);
  std::vector<int32_t> work;
  for (int s = 0; s < num_streams(); ++s) {
    if (!stream_actions(s).empty()) work.push_back(stream_actions(s)[0]);
  }
  int completed = 0;
  auto at_head = [&](int id) {
    const auto acts = stream_actions(stream(id));
    const auto h = at(head[at(stream(id))]);
    return h < acts.size() && acts[h] == id;
  };
  auto complete = [&](int id) {
    done[at(id)] = 1;
    ++completed;
    const auto s = at(stream(id));
    ++head[s];
    const auto acts = stream_actions(static_cast<int>(s));
    if (at(head[s]) < acts.size()) work.push_back(acts[at(head[s])]);
    for (int32_t k = out_begin[at(id)]; k < out_begin[at(id) + 1]; ++k) {
      if (--pending[at(dependents[at(k)])] == 0) work.push_back(dependents[at(k)]);
    }
  };
  while (!work.empty()) {
    const int id = work.back();
    work.pop_back();
    if (done[at(id)] || ready[at(id)] || pending[at(id)] > 0 || !at_head(id)) continue;
    const int g = group(id);
    if (g < 0) {
      complete(id);
      continue;
    }
    ready[at(id)] = 1;
    const auto members = group_members(g);
    if (++group_ready[at(g)] == static_cast<int32_t>(members.size())) {
      for (int32_t m : members) complete(m);
    }
  }
  if (completed < n) throw_deadlock(head, completed, origin);
}

void CompiledSchedule::throw_deadlock(const std::vector<int32_t>& head, int completed,
                                      const std::string& origin) const {
  std::string stuck;
  int shown = 0;
  for (int s = 0; s < num_streams() && shown < 4; ++s) {
    const auto acts = stream_actions(s);
    const auto h = at(head[at(s)]);
    if (h >= acts.size()) continue;
    stuck += fmt::format("{}device {} {} stream waits at action {} ({})", shown ? "; " : "",
                         s / kStreamsPerDevice,
                         stream_name(static_cast<StreamKind>(s % kStreamsPerDevice)),
                         ref(acts[h]).index, describe(action(acts[h])));
    ++shown;
  }
  throw InputError(fmt::format("{}: schedule deadlocks after {} of {} actions: {}", origin,
                               completed, num_actions(), stuck));
}

}  // namespace pipetwin
