// The plan request's keywords, `plan(...)` and `sweep(...)` alike: the CLI's plan flags
// (cli/plan_flags.hpp, PlanFlags: --model, --profile, --cluster, --catalog, --dtype,
// --optimizer, -K/--stages, --schedule, --virtual-stages, -B/--batch, -M/--chunks,
// --partitioner, --dp, --checkpoint-mode, --checkpoint, --frozen, --iterations) bound from Python
// keywords of the same names, with PlanFlags' defaults and PlanFlags' parsing, so a value the CLI
// refuses raises the CLI's message.
//
// Thread-safety: as Options (GIL held).
#pragma once

#include <string>

#include "cli/plan_flags.hpp"
#include "core/cluster.hpp"
#include "python/bindings/options.hpp"

namespace pipetwin::python {

// Takes every plan keyword the caller gave into `flags`.
void bind_plan_flags(Options& options, cli::PlanFlags& flags);

// The hardware catalog of --catalog: `dir`, or the default one (PIPETWIN_DATA's hardware/).
Catalog load_catalog(const std::string& dir);

}  // namespace pipetwin::python
