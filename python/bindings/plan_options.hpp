// The option tables (sim/option_table.hpp) as keyword arguments: bind_option_spec takes each
// keyword a table names (its long flag name, dashes as underscores) into its field, as the CLI
// binds the same table to its flags, so a keyword has the flag's default and parsing and a value
// the CLI refuses raises the CLI's message. The plan request's keywords, `plan(...)` and
// `sweep(...)` alike, are studies/plan_options.hpp's table (--model, --profile, --cluster,
// --catalog, --dtype, --optimizer, -K/--stages, --schedule, --virtual-stages, -B/--batch,
// -M/--chunks, --partitioner, --dp, --checkpoint-mode, --checkpoint, --frozen, --iterations).
//
// Thread-safety: as Options (GIL held).
#pragma once

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "core/cluster.hpp"
#include "python/bindings/options.hpp"
#include "sim/option_table.hpp"
#include "studies/plan_options.hpp"

namespace pipetwin::python {

// Takes the keyword of `spec`, if given, into its field of `values`: by the field's type (bool,
// an integer, a number) or, for a string, by the table's kind (a word, a path, a count or auto).
template <class Values>
void bind_option_spec(Options& o, Values& values, const sim::OptionSpec<Values>& spec) {
  const std::string name = spec.keyword();
  std::visit(
      [&](auto member) {
        auto& value = values.*member;
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, bool>) {
          o.flag(name.c_str(), value);
        } else if constexpr (std::is_same_v<T, double>) {
          o.real(name.c_str(), value);
        } else if constexpr (std::is_same_v<T, std::string>) {
          if (spec.kind == sim::OptionKind::kPath) {
            o.path(name.c_str(), value);
          } else if (spec.kind == sim::OptionKind::kCountOrAuto) {
            o.count_or_auto(name.c_str(), value);
          } else {
            o.text(name.c_str(), value);
          }
        } else {
          o.integer(name.c_str(), value);
        }
      },
      spec.value);
}

// Every entry of `specs`, in the table's order.
template <class Values>
void bind_option_specs(Options& o, Values& values,
                       const std::vector<sim::OptionSpec<Values>>& specs) {
  for (const auto& spec : specs) bind_option_spec(o, values, spec);
}

// Takes the plan keywords `which` (default: every one) the caller gave into `flags`, in the
// table's order.
void bind_plan_flags(Options& options, sim::PlanOptions& flags,
                     const std::vector<sim::PlanOption>& which = sim::all_plan_options());

// The hardware catalog of --catalog: `dir`, or the default one (PIPETWIN_DATA's hardware/).
Catalog load_catalog(const std::string& dir);

}  // namespace pipetwin::python
