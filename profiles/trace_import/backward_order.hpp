// Backward nodes matched to the forward operators that made them by name and order, for a trace
// whose events carry no sequence numbers: the legacy profiler's own export (torch.profiler in a
// PyTorch built without Kineto, such as Debian's python3-torch 1.13, writes names and times only).
//
// Why the order holds: on a CPU the autograd engine's ready queue runs the ready node of the
// highest sequence number first (torch/csrc/autograd/engine.cpp, CompareNodeTaskTime), and a node
// waits only for nodes of higher numbers — those its forward operator's outputs fed, made after
// it — so the highest number left is always ready: a step's nodes run in decreasing sequence
// number, the reverse of the order in which its forward operators made them. AccumulateGrad
// (sequence number UINT64_MAX, no forward operator) runs as soon as a gradient is ready and is
// left to attribute.hpp.
//
// Per step: the step's nodes (outermost "autograd::engine::evaluate_function: <Node>" events but
// AccumulateGrad), from the last one run to the first, are matched in turn to the next of the
// step's forward operators, in time order, that bears the node's name (node_key/operator_key); an
// operator inside a matched one runs below autograd and makes no node of its own. A node with no
// such operator is left unmatched (its time unattributed); an operator that made no node (its
// output needs no gradient) is passed over.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "profiles/trace_import/kineto.hpp"

namespace pipetwin::trace_import {

// Per event of `trace`: for a step's outermost backward node, the index of the forward operator
// that made it; -1 otherwise. `step_of` gives each event's step (-1 or less: none), as
// attribute.hpp assigns them.
std::vector<int> match_backward_by_order(const KinetoTrace& trace, const std::vector<int>& step_of);

// A node's name as its operator's: "AddmmBackward0" -> "addmm", "NllLossBackward0" -> "nllloss",
// "torch::autograd::AccumulateGrad" -> "accumulategrad" (lower case, no underscores).
std::string node_key(std::string_view node);
// An operator's name as its node's: "aten::addmm" -> "addmm", "aten::_log_softmax" ->
// "logsoftmax", "aten::nll_loss_forward" -> "nllloss", "aten::add_" -> "add".
std::string operator_key(std::string_view op);

}  // namespace pipetwin::trace_import
