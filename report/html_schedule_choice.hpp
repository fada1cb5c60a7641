// The report's "Schedule choice by micro-batch count" section (report/schedule_choice.hpp):
// per sweep CSV and group, a headline ("zb-h2 for M = 8-16, zbv for M = 24-64"), a table with
// one row per M (the fastest schedule that fits, its iteration time and peak memory, the
// runner-up and how much it lost, the schedules that did not fit with their peak memory, those
// that could not run, and the rows where the choice flips), and two line charts drawn by
// report.js: iteration time and peak memory against M, one line per schedule, points that do
// not fit hollow on dashed segments, the winner of each M ringed, the flips as vertical marks and
// the device memory as a horizontal line.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "core/json_io.hpp"
#include "report/scan.hpp"
#include "report/schedule_choice.hpp"

namespace pipetwin::report {

// The article of one CSV file: its groups (at most `max_groups`, the rest counted), each a
// table and two charts whose specs are appended to `charts` (the page's data.charts, drawn into
// .line-host[data-chart=i]).
std::string schedule_choice_html(const CsvFile& f, const ScheduleChoice& choice, Json& charts,
                                 size_t max_groups = 8);

// The chart specs of one group: iteration time and peak memory against M.
Json schedule_choice_charts(const ScheduleChoiceGroup& g);

}  // namespace pipetwin::report
