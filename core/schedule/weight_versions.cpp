#include "core/schedule/weight_versions.hpp"

#include "core/schedule/liveness.hpp"

namespace pipetwin {

std::vector<char> steps_writing_new_version(const CompiledSchedule& cs) {
  std::vector<char> out(static_cast<size_t>(cs.num_actions()), 0);
  const Liveness lv(cs);
  for (int d = 0; d < cs.num_devices(); ++d) {
    for (LivenessCursor c(lv, d); !c.done(); c.finish()) {
      const int id = c.next_id();
      const Action& a = cs.action(id);
      c.start();
      if (a.op == Op::kOptimizerStep && a.version > 0 && c.pinned(a.stage, a.version - 1))
        out[static_cast<size_t>(id)] = 1;
    }
  }
  return out;
}

}  // namespace pipetwin
