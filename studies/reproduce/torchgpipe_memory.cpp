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
// Where the paper leaves the chunk count open we use, per setting, the M (dividing the batch)
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

constexpr int kBatch = 32;

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
Fit evaluate(const Setup& setup, const std::string& model, int n, bool pipeline,
             const std::vector<int>& chunk_choices = {1, 2, 4, 8, 16, 32}) {
  const Profile profile = sgd_profile(setup, model);
  Fit best;
  for (int m : pipeline ? chunk_choices : std::vector<int>{1}) {
    PlanRequest r = pipeline ? request(setup, model, profile, n, "gpipe", kBatch, m,
                                       Checkpoint::kExceptLast, "balance-size")
                             : request(setup, model, profile, n, "naive", kBatch, 1,
                                       Checkpoint::kNone, "uniform");
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

// The largest B (>= 2) for which U-Net(B, C) fits on n GPUs; 0: not even B = 2 (fit shrinks as
// B grows, so a binary search).
int largest_depth(const Setup& setup, int n, int C, FitRule rule = FitRule::kAfterRelease) {
  auto ok = [&](int B) {
    return fits(setup, evaluate(setup, unet(B, C), n, true, {16, 32}), rule);
  };
  if (!ok(2)) return 0;
  int lo = 2, hi = 4;
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

constexpr int kWidths[] = {64, 96, 128, 160, 192, 256};

// Per width C of kWidths, the deepest U-Net(B, C) that fits on n GPUs (largest_depth).
std::map<int, int> deepest_per_width(const Setup& setup, int n) {
  std::map<int, int> out;
  for (int C : kWidths) out[C] = largest_depth(setup, n, C);
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

ReproTable memory_table(const Setup& setup, const ReferenceTable& ref) {
  ReproTable t{"table3-unet-memory",
               "Table 3: U-Net memory benchmark, batch 32, input 3 x 192 x 192, 22 GiB P40s",
               {}};
  for (size_t i = 0; i < ref.rows.size(); ++i) {
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
                      fmt::format("{} GPU(s), M = {}, largest GPU peak {:.1f} GiB", devices,
                                  own.chunks, own.max_peak() / kGiB)});
    if (naive) {
      t.rows.push_back({item + " on 1 GPU", "fits (1 = yes)", 1.0, fits(setup, own) ? 1.0 : 0.0, "",
                        "naive: no pipeline, no checkpointing"});
      continue;
    }
    for (int n : {1, 2, 4, 8}) {
      const Fit f = n == devices ? own : evaluate(setup, unet(B, C), n, true);
      t.rows.push_back({fmt::format("{} on {} GPU(s)", item, n), "fits (1 = yes)",
                        n >= devices ? 1.0 : 0.0, fits(setup, f) ? 1.0 : 0.0, "",
                        fmt::format("largest GPU peak {:.1f} GiB; paper: implied by its rows",
                                    f.max_peak() / kGiB)});
    }
    if (devices == 1) {
      const Fit f = evaluate(setup, unet(B, C), 1, false);
      t.rows.push_back({item + " naively on 1 GPU", "fits (1 = yes)", 0.0,
                        fits(setup, f) ? 1.0 : 0.0, "",
                        fmt::format("needs {:.1f} GiB; paper: implied, Naive-1 is the largest "
                                    "model trained without torchgpipe",
                                    f.max_peak() / kGiB)});
    }
  }
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    const std::string config = ref.cell(i, "config");
    if (config.rfind("Pipeline", 0) != 0) continue;
    const int n = static_cast<int>(ref.number(i, "devices"));
    const std::map<int, int> deepest = deepest_per_width(setup, n);
    const auto [name, params] = largest_fitting(deepest);
    t.rows.push_back({fmt::format("largest U-Net on {} GPU(s)", n), "parameters",
                      ref.number(i, "parameters"), params, "",
                      fmt::format("ours {}; C in 64..256, M in {{16, 32}}; the paper's search grid "
                                  "is not given",
                                  name)});
    const int C = static_cast<int>(ref.number(i, "C"));
    t.rows.push_back(
        {fmt::format("largest U-Net on {} GPU(s) at C = {}", n, C), "B", ref.number(i, "B"),
         static_cast<double>(deepest.count(C) ? deepest.at(C) : largest_depth(setup, n, C)), "",
         "the deepest U-Net of the paper's width that fits, M in {16, 32}"});
  }
  return t;
}

namespace {

// When a deepest-U-Net row is more than 10% off: the depths under the pessimistic fit rule beside
// ours and the paper's, which bracket what the allocator does under memory pressure.
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
    off = off || std::abs(row->relative_error()) > 0.1;
    paper.push_back(fmt::format("{}", row->paper));
    ours.push_back(fmt::format("{}", row->ours));
    full.push_back(fmt::format("{}", largest_depth(setup, n, C, FitRule::kFullReserve)));
  }
  if (!off) return std::nullopt;
  return fmt::format(
      "still missing (deepest U-Net at the paper's widths, 1/2/4/8 GPUs: ours {} against the "
      "paper's {}): a fit counts the allocator's release of its cache, tensors up to the 22 GiB; "
      "with the full fragmentation reserve kept instead the depths are {}, but then the paper's "
      "own Pipeline-2 model does not fit 2 GPUs. The reserve a nearly full GPU keeps lies "
      "between (the split segments that still hold a live block cannot be released), which the "
      "model does not have; the paper's search grid is not given either",
      fmt::join(ours, "/"), fmt::join(paper, "/"), fmt::join(full, "/"));
}

}  // namespace

std::vector<std::string> memory_notes(const Setup& setup, const ReferenceTable& ref,
                                      const ReproTable& table3) {
  const double f = setup.framework ? setup.framework->stack.fragmentation.value : 0.0;
  const double capacity = setup.cluster.device.memory_bytes / kGiB;
  std::vector<std::string> out;
  for (size_t i = 0; i < ref.rows.size(); ++i) {
    const std::string item =
        fmt::format("{} ({}, {})", ref.cell(i, "config"), static_cast<int>(ref.number(i, "B")),
                    static_cast<int>(ref.number(i, "C")));
    const auto row = std::find_if(table3.rows.begin(), table3.rows.end(), [&](const auto& r) {
      return r.item == item && r.metric == "memory usage";
    });
    if (row == table3.rows.end() || !(std::abs(row->relative_error()) > 0.1)) continue;
    const double n = ref.number(i, "devices");
    const std::string head =
        fmt::format("still missing ({} memory usage {:.1f} vs {:.1f} GiB, {:+.1f}%)", item,
                    row->ours, row->paper, 100 * row->relative_error());
    if (ref.cell(i, "config").rfind("Naive", 0) == 0) {
      out.push_back(head +
                    ": a naive row runs the whole batch of 32 at once, the pipeline rows 32 "
                    "micro-batches of 1; cuDNN's convolution workspaces grow with the micro-batch "
                    "and are not counted (hardware/frameworks.json: cudnn_workspace_bytes 0, no "
                    "per-stack constant exists); PyTorch's cudnn benchmark search sizes them up to "
                    "the largest free cached block, 'a few GBs' by the comment in "
                    "aten/src/ATen/native/cudnn/Conv_v7.cpp");
    } else if (row->ours > row->paper) {
      const double tensors = row->ours * (1 - f) / n;
      out.push_back(
          head + fmt::format(": our tensors alone take {:.1f} GiB per GPU ({:.0f}% of the {:.0f} "
                             "GiB) where the paper reports {:.1f} GiB reserved per GPU: when the "
                             "tensors fill the GPU the reserve is no fixed fraction of the peak "
                             "(cuDNN's workspaces, sized to what is free, shrink first)",
                             tensors, 100 * tensors / capacity, capacity, row->paper / n));
    } else {
      out.push_back(head + fmt::format(": the reserve at a fragmentation of {:.2f} falls short; "
                                       "cuDNN's workspaces are not counted",
                                       f));
    }
  }
  if (auto note = depth_note(setup, ref, table3)) out.push_back(std::move(*note));
  return out;
}

}  // namespace pipetwin::sim::torchgpipe
