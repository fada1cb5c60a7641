// `pipetwin.plan(...)` and `pipetwin.Plan`: `pipetwin plan` from Python.
//
// plan() takes the CLI's plan flags as keywords (plan_options.hpp) and `schedules=`,
// `allow_oom=` and `output=` (-o: the plan is written there too, the file the CLI writes), and
// returns a Plan: the plan itself (core/plan.hpp), with the planner's memory note and, for
// schedule="auto", one row per schedule tried. A Plan is what simulate() takes; it saves to and
// loads from the CLI's plan JSON ("pipetwin.plan" v1), pickles as that JSON, and compares equal to
// another with the same JSON.
//
// Thread-safety: the planning itself runs with the GIL released; a Plan object is immutable from
// Python.
#pragma once

#include <string>

#include <pybind11/pybind11.h>

#include "core/json_io.hpp"
#include "core/plan.hpp"

namespace pipetwin::python {

namespace py = pybind11;

struct PlanObject {
  explicit PlanObject(Plan p = {}) : plan(std::move(p)) {}

  Plan plan;
  // One line when the fastest partition ignoring memory would not fit (sim/planner.hpp make_plan).
  std::string memory_note;
  // schedule="auto": per candidate tried, its outcome (the table `pipetwin plan` prints); else [].
  Json search = Json::array();
};

void bind_plan(py::module_& m);

}  // namespace pipetwin::python
