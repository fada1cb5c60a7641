// A verb's options as a table, declared once for the command line and the Python API.
//
// Each entry names an option as CLI11 does ("-K,--stages"), says what it does (the --help text),
// and points at the field of the verb's options struct it sets, whose initial value is the one
// default. The CLI binds a table to CLI11 flags (cli/plan_flags.hpp add_option_spec); the Python
// API binds it to keyword arguments of the long names, dashes as underscores (`--checkpoint-mode`
// is `checkpoint_mode=`; python/bindings/plan_options.hpp bind_option_specs), so a flag and its
// keyword cannot drift apart. The tables: studies/plan_options.hpp (plan requests),
// studies/sweep/sweep_options.hpp (sweep), sim/simulate_options.hpp (simulate --plan),
// sim/elastic_options.hpp (simulate --elastic).
//
// Thread-safety: values; the tables are built once (function-local statics) and read-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace pipetwin::sim {

// How the Python API takes a string option: a word (str), a path (str or os.PathLike), or a
// count or "auto" (an int or a str, -M and --virtual-stages). Numbers and flags go by the field's
// type.
enum class OptionKind : uint8_t { kText, kPath, kCountOrAuto };

template <class Values>
struct OptionSpec {
  using Member = std::variant<std::string Values::*, int Values::*, long Values::*,
                              uint64_t Values::*, double Values::*, bool Values::*>;

  const char* names;  // CLI11's: "-K,--stages"
  std::string help;
  Member value;
  OptionKind kind = OptionKind::kText;
  bool show_default = false;  // --help shows the default

  // The long name as a Python keyword: "-K,--stages" -> "stages", "--checkpoint-mode" ->
  // "checkpoint_mode".
  std::string keyword() const {
    std::string name = names;
    const size_t dashes = name.rfind("--");
    name = name.substr(dashes == std::string::npos ? 0 : dashes + 2);
    std::replace(name.begin(), name.end(), '-', '_');
    return name;
  }
};

// The entry of `option` in `specs`, a table whose entries follow the enum `Option`'s order.
template <class Values, class Option>
const OptionSpec<Values>& spec_of(const std::vector<OptionSpec<Values>>& specs, Option option) {
  return specs.at(static_cast<size_t>(option));
}

}  // namespace pipetwin::sim
