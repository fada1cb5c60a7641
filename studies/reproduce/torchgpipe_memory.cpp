// torchgpipe Table 3, the U-Net memory benchmark (Section 4.2.2): "For 1, 2, 4 and 8 GPUs, we
// found maximum (B, C) to occupy each number of devices. In all settings, the input size is set
// to 3 x 192 x 192, the output size to 1 x 192 x 192, and the batch size to 32."
//
// Per row of the table we report the parameter count of our U-Net(B, C) descriptor, the total
// memory our model predicts for the row's setting (as torchgpipe measures it: the caching
// allocator's reserved peak, torchgpipe.hpp measured_bytes), and whether the row's model fits
// on 1, 2, 4 and 8 GPUs. The paper gives the largest model per GPU count, which implies a fit
// pattern: the Pipeline-k model fits on n >= k GPUs and not on fewer (and Naive-1 is the largest
// model trained without torchgpipe, so the Pipeline-1 model does not fit naively). Finally, per
// GPU count, the largest U-Net we find that fits, over a grid of (B, C), against the paper's.
//
// The batch, the chunk counts, the search grid and the notes' text are in
// experiments/reference/torchgpipe-entry.json ("memory"). Where the paper leaves the chunk count
// open we use, per setting, the M (dividing the batch)
// that needs the least memory: with checkpointing a device keeps every micro-batch's stage input
// but the saved activations of only one micro-batch, so more, smaller micro-batches need less.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "profiles/zoo/zoo.hpp"
#include "studies/reproduce/torchgpipe.hpp"

namespace pipetwin::sim::torchgpipe {

namespace {

struct Fit {
  std::vector<double> allocated;  // per GPU: the tensors' peak
  std::vector<double> peaks;      // per GPU: as torchgpipe measures it (measured_bytes)
  int chunks = 0;
  double max_allocated() const { return *std::max_element(allocated.begin(), allocated.end()); }
  double max_peak() const { return *std::max_element(peaks.begin(), peaks.end()); }
  double total() const {
    double t = 0;
    for (double p : peaks) t += p;
    return t;
  }
};

// Memory of U-Net(B, C) on n GPUs: the naive setting (no pipeline, no checkpointing, one GPU) or
// torchgpipe's (GPipe, checkpointing, balance by size) with the least-memory chunk count.
// `chunk_choices`: the data's chunk counts when empty.
Fit evaluate(const Setup& setup, const std::string& model, int n, bool pipeline,
             const std::vector<int>& chunk_choices = {}) {
  const Data::Memory& d = setup.data->memory;
  const Profile profile = sgd_profile(setup, model);
  const std::vector<int>& choices = chunk_choices.empty() ? d.chunks : chunk_choices;
  Fit best;
  for (int m : pipeline ? choices : std::vector<int>{1}) {
    const RunSetting& run = pipeline ? d.pipeline : d.naive;
    PlanRequest r = request(setup, model, profile, n, run.schedule, d.batch, pipeline ? m : 1,
                            run.checkpoint, run.partitioner);
    r.allow_oom = true;
    Fit f;
    try {
      f.allocated = allocated_peaks(make_plan(r));
    } catch (const InputError&) {
      continue;  // e.g. fewer layers than stages
    }
    for (const double a : f.allocated) f.peaks.push_back(measured_bytes(setup, a));
    f.chunks = m;
    if (best.peaks.empty() || f.max_allocated() < best.max_allocated()) best = f;
  }
  return best;
}

// Whether a fit fits: after the allocator has released its cache (torchgpipe::fits, what we
// report), or, the pessimistic rule kept for comparison, with the full fragmentation reserve.
enum class FitRule { kAfterRelease, kFullReserve };

bool fits(const Setup& setup, const Fit& f, FitRule rule = FitRule::kAfterRelease) {
  if (f.peaks.empty()) return false;
  if (rule == FitRule::kAfterRelease) return torchgpipe::fits(setup, f.max_allocated());
  const double reserved =
      setup.framework ? setup.framework->reserved_bytes(f.max_allocated()) : f.max_allocated();
  return reserved <= setup.cluster.device.memory_bytes;
}

std::string unet(int B, int C) {
  return fmt::format("unet:B={},C={}", B, C);
}

// The largest B (>= the search's min_depth) for which U-Net(B, C) fits on n GPUs; 0: not even
// the least (fit shrinks as B grows, so a binary search).
int largest_depth(const Setup& setup, int n, int C, FitRule rule = FitRule::kAfterRelease) {
  const Data::Memory& d = setup.data->memory;
  auto ok = [&](int B) {
    return fits(setup, evaluate(setup, unet(B, C), n, true, d.search_chunks), rule);
  };
  if (!ok(d.min_depth)) return 0;
  int lo = d.min_depth, hi = 2 * d.min_depth;
  while (ok(hi)) {
    lo = hi;
    hi *= 2;
  }
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    (ok(mid) ? lo : hi) = mid;
  }
  return lo;
}

// Per width C of the search, the deepest U-Net(B, C) that fits on n GPUs (largest_depth).
std::map<int, int> deepest_per_width(const Setup& setup, int n) {
  std::map<int, int> out;
  for (int C : setup.data->memory.widths) out[C] = largest_depth(setup, n, C);
  return out;
}

// The largest U-Net (by parameters) among the deepest per width.
std::pair<std::string, double> largest_fitting(const std::map<int, int>& deepest) {
  std::pair<std::string, double> best{"none", 0};
  for (const auto& [C, B] : deepest) {
    if (B == 0) continue;
    const auto params = static_cast<double>(zoo::describe_model(unet(B, C)).unique_parameters());
    if (params > best.second) best = {fmt::format("(B, C) = ({}, {})", B, C), params};
  }
  return best;
}

}  // namespace

namespace {

// The rows of one row of Table 3: parameters, memory usage, and where the row's model fits.
void setting_rows(const Setup& setup, const ReferenceTable& ref, size_t i, const TextArgs& args,
                  ReproTable& t) {
  const Data::Memory& d = setup.data->memory;
  const std::string config = ref.cell(i, "config");
  const int devices = static_cast<int>(ref.number(i, "devices"));
  const int B = static_cast<int>(ref.number(i, "B")), C = static_cast<int>(ref.number(i, "C"));
  const std::string item = fmt::format("{} ({}, {})", config, B, C);
  const bool naive = config.rfind("Naive", 0) == 0;
  t.rows.push_back({item, "parameters", ref.number(i, "parameters"),
                    static_cast<double>(zoo::describe_model(unet(B, C)).unique_parameters()), "",
                    ""});
  const Fit own = evaluate(setup, unet(B, C), devices, !naive);
  t.rows.push_back({item, "memory usage", ref.number(i, "memory_gib"), own.total() / kGiB, "GiB",
                    d.usage(TextArgs(args)
                                .set("devices", devices)
                                .set("chunks", own.chunks)
                                .set("peak_gib", own.max_peak() / kGiB))});
  if (naive) {
    t.rows.push_back({item + " on 1 GPU", "fits (1 = yes)", 1.0, fits(setup, own) ? 1.0 : 0.0, "",
                      d.naive_fits(args)});
    return;
  }
  for (int n : d.gpu_counts) {
    const Fit f = n == devices ? own : evaluate(setup, unet(B, C), n, true);
    t.rows.push_back({fmt::format("{} on {} GPU(s)", item, n), "fits (1 = yes)",
                      n >= devices ? 1.0 : 0.0, fits(setup, f) ? 1.0 : 0.0, "",
                      d.fits(TextArgs(args).set("peak_gib", f.max_peak() / kGiB))});
  }
  if (devices == 1) {
    const Fit f = evaluate(setup, unet(B, C), 1, false);
    t.rows.push_back({item + " naively on 1 GPU", "fits (1 = yes)", 0.0, fits(setup, f) ? 1.0 : 0.0,
                      "", d.naive_on_one(TextArgs(args).set("peak_gib", f.max_peak() / kGiB))});
  }
}

// The search's values for the notes: min_width, max_width, search_chunks ("16, 32").
TextArgs search_args(const Data::Memory& d, const TextArgs& args) {
  return TextArgs(args)
      .set("min_width", *std::min_element(d.widths.begin(), d.widths.end()))
      .set("max_width", *std::max_element(d.widths.begin(), d.widths.end()))
      .set("search_chunks", fmt::format("{}", fmt::join(d.search_chunks, ", ")));
}

// Per pipeline row of Table 3: the largest U-Net we find on its GPU count, and the deepest at
// its width.
void largest_rows(const Setup& setup, const ReferenceTable& ref, size_t i, const TextArgs& args,
                  ReproTable& t) {
  const Data::Memory& d = setup.data->memory;
  const int n = static_cast<int>(ref.number(i, "devices"));
  const std::map<int, int> deepest = deepest_per_width(setup, n);
  const auto [name, params] = largest_fitting(deepest);
  const TextArgs search = search_args(d, args);
  t.rows.push_back({fmt::format("largest U-Net on {} GPU(s)", n), "parameters",
                    ref.number(i, "parameters"), params, "",
                    d.largest(TextArgs(search).set("model", name))});
  const int C = static_cast<int>(ref.number(i, "C"));
  t.rows.push_back(
      {fmt::format("largest U-Net on {} GPU(s) at C = {}", n, C), "B", ref.number(i, "B"),
       static_cast<double>(deepest.count(C) ? deepest.at(C) : largest_depth(setup, n, C)), "",
       d.deepest(search)});
}

}  // namespace

ReproTable memory_table(const Setup& setup, const ReferenceTable& ref) {
  const TextArgs args = setup.args();
  ReproTable t = setup.data->memory.table.table(args);
  for (size_t i = 0; i < ref.rows.size(); ++i) setting_rows(setup, ref, i, args, t);
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    if (ref.cell(i, "config").rfind("Pipeline", 0) == 0) largest_rows(setup, ref, i, args, t);
  }
  return t;
}

namespace {

// When a deepest-U-Net row is further off than explain_above: the depths under the pessimistic
// fit rule beside ours and the paper's, which bracket what the allocator does under memory
// pressure.
std::optional<std::string> depth_note(const Setup& setup, const ReferenceTable& ref,
                                      const ReproTable& table3) {
  std::vector<std::string> paper, ours, full;
  bool off = false;
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    if (ref.cell(i, "config").rfind("Pipeline", 0) != 0) continue;
    const int n = static_cast<int>(ref.number(i, "devices"));
    const int C = static_cast<int>(ref.number(i, "C"));
    const std::string item = fmt::format("largest U-Net on {} GPU(s) at C = {}", n, C);
    const auto row = std::find_if(table3.rows.begin(), table3.rows.end(),
                                  [&](const auto& r) { return r.item == item; });
    if (row == table3.rows.end()) continue;
    off = off || std::abs(row->relative_error()) > setup.data->explain_above;
    paper.push_back(fmt::format("{}", row->paper));
    ours.push_back(fmt::format("{}", row->ours));
    full.push_back(fmt::format("{}", largest_depth(setup, n, C, FitRule::kFullReserve)));
  }
  if (!off) return std::nullopt;
  return setup.data->memory.missing_depth(
      TextArgs(setup.args())
          .set("ours", fmt::format("{}", fmt::join(ours, "/")))
          .set("paper", fmt::format("{}", fmt::join(paper, "/")))
          .set("full_reserve", fmt::format("{}", fmt::join(full, "/"))));
}

// The note of one memory row further off than explain_above: what our model lacks.
std::string memory_note(const Setup& setup, const ReferenceTable& ref, size_t i,
                        const Comparison& row) {
  const Data::Memory& d = setup.data->memory;
  const double f = setup.framework ? setup.framework->stack.fragmentation.value : 0.0;
  const double capacity = setup.cluster.device.memory_bytes / kGiB;
  const double n = ref.number(i, "devices");
  const TextArgs args = setup.args();
  const std::string head = d.missing_head(TextArgs(args)
                                              .set("item", row.item)
                                              .set("ours", row.ours)
                                              .set("paper", row.paper)
                                              .set("error_pct", 100 * row.relative_error()));
  if (ref.cell(i, "config").rfind("Naive", 0) == 0) return head + d.missing_naive(args);
  if (row.ours > row.paper) {
    const double tensors = row.ours * (1 - f) / n;
    return head + d.missing_over(TextArgs(args)
                                     .set("tensors_gib", tensors)
                                     .set("tensors_pct", 100 * tensors / capacity)
                                     .set("paper_per_gpu_gib", row.paper / n));
  }
  return head + d.missing_under(args);
}

}  // namespace

std::vector<std::string> memory_notes(const Setup& setup, const ReferenceTable& ref,
                                      const ReproTable& table3) {
  std::vector<std::string> out;
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    const std::string item =
        fmt::format("{} ({}, {})", ref.cell(i, "config"), static_cast<int>(ref.number(i, "B")),
                    static_cast<int>(ref.number(i, "C")));
    const auto row = std::find_if(table3.rows.begin(), table3.rows.end(), [&](const auto& r) {
      return r.item == item && r.metric == "memory usage";
    });
    if (row == table3.rows.end() || !(std::abs(row->relative_error()) > setup.data->explain_above))
      continue;
    out.push_back(memory_note(setup, ref, i, *row));
  }
  if (auto note = depth_note(setup, ref, table3)) out.push_back(std::move(*note));
  return out;
}

}  // namespace pipetwin::sim::torchgpipe
