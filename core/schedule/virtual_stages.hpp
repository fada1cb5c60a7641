// Virtual stages: a device hosting v model chunks, and which stage each chunk is.
//
// A pipeline of D devices may cut the model into S = v * D stages, each device hosting v of them
// (docs/design.md "The schedule IR": a stage is not a device). Two layouts are in use:
//
//   interleaved  chunk j of device d holds stage d + j * D: Megatron-LM's interleaved layout
//                (Narayanan et al., SC'21, Section 2.2), for interleaved-1f1b.
//   v-shape      v = 2; device d holds stage d and stage 2D - 1 - d, so the first and the last
//                stage share device 0 and the loss is computed where the input is read: the
//                layout of ZB-V (Qi et al., ICLR 2024, Section 6) and of DualPipeV (DeepSeek-V3).
//
// The planner places stages with virtual_stage_layout(); the generators of those schedules check
// the shape carries their layout and say so when it does not (schedule_refusal).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/schedule/schedule.hpp"

namespace pipetwin {

enum class StageLayout : uint8_t { kOnePerDevice, kInterleaved, kVShape };

// The layout a schedule needs: kVShape for zbv and dualpipev, kInterleaved for interleaved-1f1b,
// kOnePerDevice for the other split-backward schedules (zb-h1, zb-h2); kOnePerDevice too for
// schedules that accept any placement.
StageLayout stage_layout_of(const std::string& schedule);
// Model chunks per device a schedule runs with by default (2 for the V shapes, else 1).
int default_virtual_stages(const std::string& schedule);

// stage -> device for `devices` devices hosting `v` chunks each in `layout`. InputError when v
// does not fit the layout (the V shape needs v = 2, one per device needs v = 1).
std::vector<int> virtual_stage_layout(StageLayout layout, int devices, int v,
                                      const std::string& schedule);

// Why `schedule` cannot run `shape` (normalized or not): its layout, or too few micro-batches
// (zbv needs M >= 2D - 1, dualpipev M >= 2D, interleaved-1f1b with v > 1 M a multiple of D,
// 1f1b one stage per device); "" when it can. The generators throw this as their InputError, and
// the planner reports it for a schedule it skips.
std::string schedule_refusal(const std::string& schedule, const PipelineShape& shape);

// Throws schedule_refusal() as an InputError when it is not "".
void require_runnable(const std::string& schedule, const PipelineShape& shape);

// `shape` with its stages placed as `schedule` needs on `devices` devices of `v` chunks each
// (num_stages = devices * v, stage_device from virtual_stage_layout).
PipelineShape lay_out_stages(const std::string& schedule, PipelineShape shape, int devices, int v);

}  // namespace pipetwin
