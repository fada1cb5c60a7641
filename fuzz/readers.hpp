// The readers pipetwin's fuzz targets drive, by format name.
//
// Each reader feeds bytes to one of pipetwin's loaders exactly as a file would be read: JSON
// text through parse_json_text, then the format's loader, then the cheap derived objects a
// command builds next (graph, cost model, plan context, metrics). A reader may reject its input
// only with InputError — the one-line error users see. Any other exception escapes and is a bug:
// libFuzzer reports it as a crash (fuzz_main.cpp), and tests/fuzz_regression_test.cpp replays
// every reproducer saved under fuzz/regressions/<format>/ through the same reader.
//
// Thread-safety: readers are pure functions (the cluster reader loads the catalog once).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pipetwin::fuzz {

using Reader = void (*)(std::string_view bytes);

// The reader of `format` ("profile", "cluster", "plan", "timeline", "metrics", "schedule",
// "model_spec"); nullptr when unknown.
Reader find_reader(std::string_view format);
std::vector<std::string> reader_names();

}  // namespace pipetwin::fuzz
