// Golden simulator outputs: every plan under tests/data/golden/ is simulated again and its metrics
// and timeline digest are compared with the checked-in ones, so that a change that moves any
// prediction (a cost term, a schedule's order, a partition, the metrics' arithmetic) fails here
// until the outputs are regenerated on purpose with scripts/update-golden.sh and the diff reviewed.
//
// Per golden <name>:
//   <name>.plan.json     the fixed plan (a synthetic model with unequal layers, shipped cluster)
//   <name>.metrics.json  what `pipetwin simulate --metrics` writes; compared field by field,
//                        numbers within a relative 1e-9
//   <name>.digest.txt    one line per action, sorted by device and start: device, stream, start
//                        and end in ms rounded to 1 ns, and the action; compared as exact text
//
// With PIPETWIN_UPDATE_GOLDEN=1 the digests are rewritten instead of compared (the metrics are
// still compared: they were just written by the CLI, and must equal what the test computes).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/json_io.hpp"
#include "core/metrics.hpp"
#include "core/plan.hpp"
#include "core/schedule/generators.hpp"
#include "core/schedule/schedule.hpp"
#include "core/timeline.hpp"
#include "sim/pipeline_sim.hpp"
#include "tests/test_util.hpp"

namespace pipetwin {
namespace {

constexpr double kRelativeTolerance = 1e-9;
constexpr int kContext = 3;         // unchanged lines around a change in the digest diff
constexpr int kMaxDiffLines = 40;   // changed lines printed before the diff is cut short
constexpr int kMaxMismatches = 12;  // metric fields printed before the list is cut short
const char* const kRegenerate =
    "if the change is intended, regenerate with scripts/update-golden.sh and review the diff";

std::string golden_dir() {
  return std::string(PIPETWIN_SOURCE_DIR) + "/tests/data/golden";
}
std::string golden_file(const std::string& name, const std::string& suffix) {
  return golden_dir() + "/" + name + suffix;
}

bool update_mode() {
  const char* v = std::getenv("PIPETWIN_UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

// The goldens present: <name> of every <name>.plan.json, sorted.
std::vector<std::string> golden_names() {
  std::vector<std::string> names;
  const std::string suffix = ".plan.json";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(golden_dir(), ec)) {
    const std::string file = entry.path().filename().string();
    if (file.size() > suffix.size() && file.ends_with(suffix)) {
      names.push_back(file.substr(0, file.size() - suffix.size()));
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

// ---- The digest ----

std::string action_text(const Action& a) {
  switch (a.op) {
    case Op::kForward:
    case Op::kBackward:
    case Op::kBackwardInput:
    case Op::kBackwardWeight:
    case Op::kRecompute:
      return fmt::format("{} s{} mb{} v{}", op_name(a.op), a.stage, a.micro_batch, a.version);
    case Op::kSend:
      return fmt::format("send {} s{}->s{} mb{}", payload_name(a.payload), a.stage, a.peer_stage,
                         a.micro_batch);
    case Op::kRecv:
      return fmt::format("recv {} s{}->s{} mb{}", payload_name(a.payload), a.peer_stage, a.stage,
                         a.micro_batch);
    case Op::kAllReduce:
      return fmt::format("{} s{} step{} bucket{}", op_name(a.op), a.stage, a.step, a.bucket);
    case Op::kOptimizerStep:
      return fmt::format("{} s{} step{} ->v{}", op_name(a.op), a.stage, a.step, a.version);
  }
  return "?";
}

// Milliseconds with 6 decimals: 1 ns resolution.
std::string ms(double seconds) {
  return fmt::format("{:.6f}", seconds * 1e3);
}

std::string timeline_digest(const Plan& plan, const Timeline& t, int steps) {
  std::string out = fmt::format(
      "# pipetwin golden digest: {} K={} M={} dp={} checkpoint={}, {} steps\n"
      "# one action per line, sorted by device, then start; times in ms rounded to 1 ns\n"
      "# device stream start_ms end_ms action\n",
      plan.schedule, plan.num_stages(), plan.chunks, plan.dp, checkpoint_name(plan.checkpoint),
      steps);
  for (int d = 0; d < t.num_devices(); ++d) {
    out += fmt::format("# d{} = {}\n", d, t.device_names[static_cast<size_t>(d)]);
  }
  std::vector<TimelineEvent> events = t.events;
  std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) {
    if (a.device != b.device) return a.device < b.device;
    if (a.start_s != b.start_s) return a.start_s < b.start_s;
    const auto sa = stream_of(a.action.op), sb = stream_of(b.action.op);
    if (sa != sb) return sa < sb;
    return a.end_s < b.end_s;
  });
  for (const auto& e : events) {
    out +=
        fmt::format("d{} {:<10} {:>12} {:>12}  {}\n", e.device, stream_name(stream_of(e.action.op)),
                    ms(e.start_s), ms(e.end_s), action_text(e.action));
  }
  return out;
}

// ---- Comparing metrics ----

// Walks `expected` and `actual` together; records "path: what differs" for every difference
// (numbers beyond the relative tolerance, other values unequal, keys or lengths differing).
void compare_json(const Json& expected, const Json& actual, const std::string& path,
                  std::vector<std::string>& out) {
  const std::string where = path.empty() ? "(document)" : path;
  if (expected.is_number() && actual.is_number()) {
    const double e = expected.get<double>(), a = actual.get<double>();
    const double scale = std::max(std::abs(e), std::abs(a));
    if (std::abs(e - a) > kRelativeTolerance * scale) {
      out.push_back(fmt::format("{}: expected {}, got {} (relative {:+.3g})", where,
                                expected.dump(), actual.dump(), e != 0 ? (a - e) / e : 1.0));
    }
    return;
  }
  if (expected.type() != actual.type()) {
    out.push_back(fmt::format("{}: expected {}, got {}", where, expected.dump(), actual.dump()));
    return;
  }
  if (expected.is_object()) {
    for (const auto& [key, value] : expected.items()) {
      const std::string child = path.empty() ? key : path + "." + key;
      if (!actual.contains(key)) {
        out.push_back(fmt::format("{}: expected {}, missing now", child, value.dump()));
      } else {
        compare_json(value, actual.at(key), child, out);
      }
    }
    for (const auto& [key, value] : actual.items()) {
      if (!expected.contains(key)) {
        const std::string child = path.empty() ? key : path + "." + key;
        out.push_back(fmt::format("{}: not in the golden, now {}", child, value.dump()));
      }
    }
    return;
  }
  if (expected.is_array()) {
    if (expected.size() != actual.size()) {
      out.push_back(
          fmt::format("{}: expected {} elements, got {}", where, expected.size(), actual.size()));
    }
    for (size_t i = 0; i < std::min(expected.size(), actual.size()); ++i) {
      compare_json(expected[i], actual[i], fmt::format("{}[{}]", path, i), out);
    }
    return;
  }
  if (expected != actual) {
    out.push_back(fmt::format("{}: expected {}, got {}", where, expected.dump(), actual.dump()));
  }
}

// ---- A unified diff of two texts ----

// A unified-style diff (`---`/`+++` header, `@@` hunks with kContext lines of context) of the
// lines that differ, cut short after kMaxDiffLines changed lines. The common head and tail are
// skipped first; the rest is aligned by a longest common subsequence (quadratic, so only on a
// middle of moderate size: past that it is shown as replaced wholesale).
std::string unified_diff(const std::string& expected_text, const std::string& actual_text,
                         const std::string& expected_label, const std::string& actual_label) {
  const auto a = split_lines(expected_text), b = split_lines(actual_text);
  size_t head = 0;
  while (head < a.size() && head < b.size() && a[head] == b[head]) ++head;
  size_t tail = 0;
  while (tail < a.size() - head && tail < b.size() - head &&
         a[a.size() - 1 - tail] == b[b.size() - 1 - tail]) {
    ++tail;
  }
  const size_t n = a.size() - head - tail, m = b.size() - head - tail;
  // The edit script of the middle: ' ' both, '-' expected only, '+' actual only.
  struct Edit {
    char kind;
    size_t ai, bi;  // line indices in a and b (of the line shown, and where the other stands)
  };
  std::vector<Edit> edits;
  for (size_t i = 0; i < head; ++i) edits.push_back({' ', i, i});
  if (n * m <= 4'000'000) {
    std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
    for (size_t i = n; i-- > 0;) {
      for (size_t j = m; j-- > 0;) {
        lcs[i][j] = a[head + i] == b[head + j] ? lcs[i + 1][j + 1] + 1
                                               : std::max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[head + i] == b[head + j]) {
        edits.push_back({' ', head + i++, head + j++});
      } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
        edits.push_back({'-', head + i++, head + j});
      } else {
        edits.push_back({'+', head + i, head + j++});
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) edits.push_back({'-', head + i, head});
    for (size_t j = 0; j < m; ++j) edits.push_back({'+', head + n, head + j});
  }
  for (size_t k = 0; k < tail; ++k) edits.push_back({' ', head + n + k, head + m + k});

  std::string out = fmt::format("--- {}\n+++ {}\n", expected_label, actual_label);
  int shown = 0;
  size_t k = 0;
  while (k < edits.size()) {
    if (edits[k].kind == ' ') {
      ++k;
      continue;
    }
    // A hunk: from kContext lines before this change to kContext lines after the last change
    // that follows within 2 * kContext unchanged lines.
    const size_t begin = k > kContext ? k - kContext : 0;
    size_t end = k;
    for (size_t run = 0; end < edits.size() && run <= 2 * kContext; ++end) {
      run = edits[end].kind == ' ' ? run + 1 : 0;
    }
    while (end > k && edits[end - 1].kind == ' ') --end;
    end = std::min(edits.size(), end + kContext);
    size_t a_count = 0, b_count = 0;
    for (size_t x = begin; x < end; ++x) {
      if (edits[x].kind != '+') ++a_count;
      if (edits[x].kind != '-') ++b_count;
    }
    out += fmt::format("@@ -{},{} +{},{} @@\n", edits[begin].ai + 1, a_count, edits[begin].bi + 1,
                       b_count);
    auto line = [&](const Edit& e) {
      out += e.kind;
      out += e.kind == '+' ? b[e.bi] : a[e.ai];
      out += '\n';
    };
    for (size_t x = begin; x < end;) {
      if (edits[x].kind == ' ') {
        line(edits[x++]);
        continue;
      }
      // A run of changed lines: its '-' lines, then its '+' lines. Past the budget, the first of
      // each (half the budget left each), so that both sides of the first change show.
      size_t run_end = x;
      while (run_end < end && edits[run_end].kind != ' ') ++run_end;
      const int run = static_cast<int>(run_end - x);
      if (shown + run <= kMaxDiffLines) {
        for (; x < run_end; ++x) line(edits[x]);
        shown += run;
        continue;
      }
      const int each = std::max(1, (kMaxDiffLines - shown) / 2);
      int minus = 0, plus = 0;
      for (size_t y = x; y < run_end; ++y) {
        if (edits[y].kind == '-' && minus++ < each) line(edits[y]);
      }
      for (size_t y = x; y < run_end; ++y) {
        if (edits[y].kind == '+' && plus++ < each) line(edits[y]);
      }
      size_t rest = 0;
      for (size_t y = x; y < edits.size(); ++y) rest += edits[y].kind != ' ';
      rest -= static_cast<size_t>(std::min(minus, each) + std::min(plus, each));
      return out + fmt::format("... ({} more changed lines)\n", rest);
    }
    k = end;
  }
  return out;
}

// ---- The tests ----

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, SimulationMatchesCheckedInOutputs) {
  const std::string name = GetParam();
  const std::string plan_path = golden_file(name, ".plan.json");
  const Plan plan = load_plan(plan_path);
  const PlanContext ctx(plan, 0);
  const sim::SimResult r = sim::simulate_plan(ctx);

  const std::string metrics_path = golden_file(name, ".metrics.json");
  const Json expected_metrics = load_json_file(metrics_path);
  std::vector<std::string> mismatches;
  compare_json(expected_metrics, metrics_to_json(r.metrics), "", mismatches);
  if (!mismatches.empty()) {
    std::string list;
    for (size_t i = 0; i < mismatches.size() && i < kMaxMismatches; ++i) {
      list += "  " + mismatches[i] + "\n";
    }
    if (mismatches.size() > kMaxMismatches) {
      list += fmt::format("  ... ({} more)\n", mismatches.size() - kMaxMismatches);
    }
    ADD_FAILURE() << fmt::format(
        "{}: {} metric fields differ from the golden (relative tolerance {:g}):\n{}{}",
        metrics_path, mismatches.size(), kRelativeTolerance, list, kRegenerate);
  }

  const std::string digest_path = golden_file(name, ".digest.txt");
  const std::string digest = timeline_digest(plan, r.timeline, r.metrics.steps);
  if (update_mode()) {
    write_file_atomic(digest_path, digest);
    return;
  }
  ASSERT_TRUE(std::filesystem::exists(digest_path))
      << digest_path << " is missing; " << kRegenerate;
  const std::string expected_digest = test::read_text(digest_path);
  if (digest != expected_digest) {
    ADD_FAILURE() << fmt::format(
        "{}: the simulated timeline differs from the golden:\n{}{}", digest_path,
        unified_diff(expected_digest, digest, "tests/data/golden/" + name + ".digest.txt",
                     "simulated now"),
        kRegenerate);
  }
}

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Plans, Golden, ::testing::ValuesIn(golden_names()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Golden);

// Every registered schedule has a golden of its own name, and checkpointing and data
// parallelism are covered: a new schedule fails here until scripts/update-golden.sh has it.
TEST(GoldenCoverage, EveryScheduleCheckpointingAndDataParallel) {
  for (const auto& info : schedule_catalog()) {
    const std::string path = golden_file(info.name, ".plan.json");
    if (!std::filesystem::exists(path)) {
      ADD_FAILURE() << "no golden for schedule " << info.name << " (" << path
                    << "); add it to scripts/update-golden.sh";
      continue;
    }
    EXPECT_EQ(load_plan(path).schedule, info.name) << path;
  }
  bool checkpoint = false, data_parallel = false;
  for (const auto& name : golden_names()) {
    const Plan plan = load_plan(golden_file(name, ".plan.json"));
    checkpoint = checkpoint || plan.checkpoint != Checkpoint::kNone;
    data_parallel = data_parallel || plan.dp > 1;
    EXPECT_TRUE(std::filesystem::exists(golden_file(name, ".metrics.json"))) << name;
  }
  EXPECT_TRUE(checkpoint) << "no golden plan with checkpointing";
  EXPECT_TRUE(data_parallel) << "no golden plan with dp > 1";
}

// The diff a failure prints: hunks with context, changed lines marked.
TEST(GoldenDiff, ShowsChangedLinesWithContext) {
  std::string a, b;
  for (int i = 1; i <= 20; ++i) {
    a += std::to_string(i) + "\n";
    b += (i == 5 ? std::string("five") : std::to_string(i)) + "\n";
  }
  b += "21\n";
  EXPECT_EQ(unified_diff(a, b, "old", "new"),
            "--- old\n+++ new\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
            "@@ -18,3 +18,4 @@\n 18\n 19\n 20\n+21\n");
  EXPECT_EQ(unified_diff(a, a, "old", "new"), "--- old\n+++ new\n");

  // Past kMaxDiffLines changed lines: the first of each side, then the count left out.
  std::string c, d;
  for (int i = 0; i < 100; ++i) {
    c += fmt::format("a{}\n", i);
    d += fmt::format("b{}\n", i);
  }
  const auto lines = split_lines(unified_diff(c, d, "old", "new"));
  ASSERT_EQ(lines.size(), 3u + kMaxDiffLines + 1);
  EXPECT_EQ(lines[2], "@@ -1,100 +1,100 @@");
  EXPECT_EQ(lines[3], "-a0");
  EXPECT_EQ(lines[3 + kMaxDiffLines / 2], "+b0");
  EXPECT_EQ(lines.back(), fmt::format("... ({} more changed lines)", 200 - kMaxDiffLines));
}

}  // namespace
}  // namespace pipetwin
