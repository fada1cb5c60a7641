// Transition overheads: what a pipeline transformation costs (PipeTransformer Appendix F.5,
// Table 4, "Overheads of pipe transformation (seconds)"), the simulator's defaults.
//
//   transition                     overall   C (CUDA context)  P (pipeline warm-up)  D (DDP)
//   initialization (length = 8)      18.2         16.6               0.7               0.9
//   length is compressed 8 -> 4      10.2          8.3               1.3               0.6
//   length is compressed 4 -> 2       5.5          3.8               2.1               0.7
//   length is compressed 2 -> 1       9.5          2.3               6.1               1.0
// (copied in experiments/reference/pipetransformer-table4-transition.csv). The 4 -> 2 row's
// parts add up to 6.6 s, not the printed 5.5 s; we keep the printed figures as they are.
//
// How we apply them (the paper measures these four transitions only):
//  - start of training at length K: the overall time of the row of length K (initialization
//    for 8);
//  - compression to length K that starts new processes (AutoDP): the overall time of the row
//    "compressed to K" — new processes create CUDA contexts, the pipeline warms up, DDP is
//    rebuilt;
//  - any other re-partition at length K (a freeze step that keeps K, or compression without
//    AutoDP): P + D of that row — no process is created, so no CUDA context;
//  - lengths the table lacks take the row of the nearest length (by log2), e.g. 16 -> 8's row.
// The state a new replica receives is timed separately by the cost model (autodp.hpp).
//
// Other figures (say, measured on the machine a live run used) load from a CSV of the layout of
// experiments/reference/pipetransformer-table4-transition.csv: '#' comment lines, a header, one
// row per length with the columns length_after, overall_s, cuda_context_s, pipeline_warmup_s
// and ddp_s (any others, such as the transition's name, are ignored; cells hold no commas).
//
// Thread-safety: plain value type.
#pragma once

#include <string>
#include <vector>

namespace pipetwin::elastic {

struct TransitionRow {
  int length = 1;  // pipeline length after the transition
  double overall_s = 0;
  double cuda_context_s = 0;
  double pipeline_warmup_s = 0;
  double ddp_s = 0;
};

struct TransitionOverheads {
  std::vector<TransitionRow> rows;

  static TransitionOverheads table4();  // the defaults above
  static TransitionOverheads none();    // every transition free
  TransitionOverheads scaled(double factor) const;

  const TransitionRow* row(int length) const;  // nearest length; nullptr when there are no rows
  double start_s(int K) const;
  double compression_s(int K, bool new_processes) const;
  double repartition_s(int K) const;
};

// Reads the CSV described above; errors name the file, the row and the column.
TransitionOverheads load_transition_overheads(const std::string& path);

}  // namespace pipetwin::elastic
