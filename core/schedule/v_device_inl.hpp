// make_v_schedule's definition (v_device.hpp).
#pragma once

#include "core/schedule/virtual_stages.hpp"

namespace pipetwin {

template <typename EmitDevice>
Schedule make_v_schedule(const std::string& name, const PipelineShape& shape, EmitDevice emit) {
  ScheduleBuilder b(name, shape);
  require_runnable(name, b.shape());
  const int D = b.shape().devices_per_replica;
  for (int step = 0; step < b.N(); ++step) {
    for (int r = 0; r < D; ++r) {
      VDevice v(b, r, step);
      emit(v, D, r, b.M());
      v.optimizer_steps();
    }
  }
  return b.finish(/*stashes_weights=*/true);
}

}  // namespace pipetwin
