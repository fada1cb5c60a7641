// A trace recorded without pipetwin's helper — torch.profiler as its documentation shows it,
// `prof.step()` after each training step, no "pipetwin." range — with the structure pipetwin
// measures (attribute.hpp) made explicit as the helper's ranges, so that it is read as a helper's
// trace is (docs/import-trace.md "A trace of your own"). Where the trace has none of pipetwin's
// ranges of a kind, in this order:
//   steps      torch.profiler's "ProfilerStep#<n>" ranges (a profiler with a schedule records one
//              per prof.step()); else each step ends where its optimizer step ends, from the end
//              of one "Optimizer.step#<Class>.step" range (torch.optim records one around every
//              step()) to the end of the next, the first from the thread's first event; optimizer
//              steps with no backward op between them (two optimizers) end one training step;
//   optimizer  the outermost "Optimizer.step#<Class>.step" ranges; their class names the rule
//              where no metadata does (SGD: sgd — momentum is not in the trace —, Adam and AdamW:
//              adam; another: none stated);
//   layers     "pipetwin.layer:" ranges; else the model's children named by the metadata
//              python/pipetwin_trace.py's annotate() adds to the trace ("forward_ops": the
//              outermost operators one forward of the model runs, each with the child it ran in,
//              "" for none), found as one run among each step's forward operators; else the
//              "nn.Module: " ranges of torch 2.x's with_stack=True (attribute.hpp); else, with
//              --layers N, the first N forward operators of each step, one layer each — a model of
//              leaf modules, such as nn.Sequential(Linear, ReLU, ...), runs one outermost operator
//              per child —, named "<op>_<k>" ("linear_0", "relu_0", "linear_1").
// A step's forward operators are its outermost operators (ranges apart) on its thread that start
// before its first backward op ("autograd::engine::evaluate_function: ...") and after every
// optimizer or zero_grad range that ends before it.
//
// Errors are one-line InputErrors naming the file and what is missing.
//
// Thread-safety: pure functions over immutable inputs.
#pragma once

#include <string>
#include <vector>

#include "profiles/trace_import/attribute.hpp"
#include "profiles/trace_import/kineto.hpp"

namespace pipetwin::trace_import {

struct PlainReading {
  KinetoTrace trace;               // the trace with its structure as pipetwin's ranges
  std::vector<std::string> notes;  // each fallback taken, a phrase each ("steps: ...")
  std::string optimizer;           // the rule its "Optimizer.step#" ranges name; "": none
};

// Reads `trace` as above; a trace that has pipetwin's ranges comes back as it is.
PlainReading read_plain(const KinetoTrace& trace, const LayerSelection& selection);

// The operator names `--layers N` gives layers: "aten::linear" -> "linear".
std::string operator_stem(const std::string& name);

}  // namespace pipetwin::trace_import
