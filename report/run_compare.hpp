// The verdict of one group of the report (report/scan.hpp): its prediction next to its median
// measured run, with the runs' spread and the predictions' spread and what they say of the
// error, as `pipetwin compare PREDICTED RUN... --also-predicted PREDICTION...` prints it.
//
// Computed by compare's own code (report/compare.hpp): repeats_of picks the median run and the two
// spreads, compare_metrics and compare_timelines the rows, noise_verdict the verdict line, so
// the page and the terminal cannot disagree. The prediction compared is the group's chosen one
// (the unnumbered X.sim when there is one); the other predictions only widen the predictions'
// range, as --also-predicted's do.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>

#include "report/compare.hpp"
#include "report/scan.hpp"

namespace pipetwin::report {

struct RunComparison {
  Comparison comparison;  // spread and predictions set from the group's members
  NoiseVerdict verdict;
};

// nullopt when the group lacks metrics on either side (metrics are derived from pipetwin
// timelines, so a foreign Chrome trace alone gives none).
std::optional<RunComparison> compare_run_group(const RunGroup& g);

// "within the noise (4 runs, 5 predictions)", "outside the noise (...)", or "one run": the
// verdict in a table cell.
std::string verdict_summary(const RunComparison& c);

}  // namespace pipetwin::report
