// Schedule generators, one per file in this folder, and the registry that names them.
//
//   naive           naive model parallel (EPFL report Section 2.1)
//   gpipe           GPipe with torchgpipe's clock-cycle order and checkpointing (Section 2)
//   1f1b            PipeDream-Flush: one-forward-one-backward with a flush per mini-batch
//   pipedream       PipeDream, asynchronous with weight stashing (EPFL report Section 2.4)
//   ddg             Decoupled parallel backprop with delayed gradients (EPFL Section 2.2)
//   feature-replay  Features Replay: delayed backward with recompute (EPFL Section 2.3)
//   ftpipe-async    FTPipe's asynchronous pipeline with recomputation (FTPipe Section 4.2)
//   interleaved-1f1b  1F1B over v chunks per device (Megatron-LM, SC'21, Section 2.2.2)
//   zb-h1, zb-h2    zero-bubble schedules with split backward (Qi et al., ICLR 2024, Section 3)
//   zbv             zero-bubble V-shape, two chunks per device (Qi et al., Section 6)
//   dualpipev       DeepSeek-V3's DualPipe in its V form (two chunks per device)
// Data parallelism (PipelineShape::replicas > 1) applies to every one of them
// (data_parallel.cpp).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/schedule/schedule.hpp"

namespace pipetwin {

Schedule make_naive(const PipelineShape& shape);
Schedule make_gpipe(const PipelineShape& shape);
Schedule make_1f1b(const PipelineShape& shape);
Schedule make_pipedream(const PipelineShape& shape);
Schedule make_ddg(const PipelineShape& shape);
Schedule make_feature_replay(const PipelineShape& shape);
Schedule make_ftpipe_async(const PipelineShape& shape);
Schedule make_interleaved_1f1b(const PipelineShape& shape);
Schedule make_zb_h1(const PipelineShape& shape);
Schedule make_zb_h2(const PipelineShape& shape);
Schedule make_zbv(const PipelineShape& shape);
Schedule make_dualpipev(const PipelineShape& shape);

struct ScheduleInfo {
  std::string name;
  bool asynchronous;  // mini-batches overlap; weights update without a pipeline flush
  std::string summary;
  bool splits_backward = false;  // runs backwards as input and weight halves (action.hpp)
};
const std::vector<ScheduleInfo>& schedule_catalog();
const ScheduleInfo& schedule_info(const std::string& name);  // InputError on unknown names
Schedule make_schedule(const std::string& name, const PipelineShape& shape);

}  // namespace pipetwin
