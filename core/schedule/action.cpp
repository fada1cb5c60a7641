#include "core/schedule/action.hpp"

#include <utility>

#include <fmt/format.h>

#include "core/name_table.hpp"

namespace pipetwin {

namespace {

// Every operation with its name (the schedule JSON's) and its letter (describe's): the one list
// op_name, op_letter and parse_op read.
struct OpNames {
  Op op;
  const char* name;
  const char* letter;
};
constexpr OpNames kOps[] = {
    {Op::kForward, "forward", "F"},
    {Op::kBackward, "backward", "B"},
    {Op::kRecompute, "recompute", "R"},
    {Op::kSend, "send", "S"},
    {Op::kRecv, "recv", "V"},
    {Op::kAllReduce, "allreduce", "AR"},
    {Op::kOptimizerStep, "optimizer_step", "U"},
    {Op::kBackwardInput, "backward_input", "I"},
    {Op::kBackwardWeight, "backward_weight", "W"},
    {Op::kTensorParallel, "tensor_parallel", "TP"},
};

constexpr std::pair<Payload, const char*> kPayloads[] = {{Payload::kNone, "none"},
                                                         {Payload::kActivation, "activation"},
                                                         {Payload::kGradient, "gradient"}};

constexpr std::pair<StreamKind, const char*> kStreams[] = {{StreamKind::kCompute, "compute"},
                                                           {StreamKind::kSend, "send"},
                                                           {StreamKind::kRecv, "recv"},
                                                           {StreamKind::kCollective, "collective"},
                                                           {StreamKind::kTensor, "tensor"}};

const OpNames* find_op(Op op) {
  for (const auto& row : kOps) {
    if (row.op == op) return &row;
  }
  return nullptr;
}

}  // namespace

const char* op_name(Op op) {
  const OpNames* row = find_op(op);
  return row ? row->name : "?";
}

const char* op_letter(Op op) {
  const OpNames* row = find_op(op);
  return row ? row->letter : "?";
}

const char* payload_name(Payload p) {
  return name_in(kPayloads, p, "none");
}

bool parse_op(const std::string& name, Op& out) {
  for (const auto& row : kOps) {
    if (name == row.name) {
      out = row.op;
      return true;
    }
  }
  return false;
}

bool parse_payload(const std::string& name, Payload& out) {
  return parse_name(kPayloads, name, out);
}

const char* stream_name(StreamKind s) {
  return name_in(kStreams, s, "?");
}

std::string describe(const Action& a) {
  switch (a.op) {
    case Op::kForward:
    case Op::kBackward:
    case Op::kBackwardInput:
    case Op::kBackwardWeight:
    case Op::kRecompute:
      return fmt::format("{} s{} mb{} v{}", op_letter(a.op), a.stage, a.micro_batch, a.version);
    case Op::kSend:
    case Op::kRecv: {
      const bool act = a.payload == Payload::kActivation;
      const int from = (a.op == Op::kSend) ? a.stage : a.peer_stage;
      const int to = (a.op == Op::kSend) ? a.peer_stage : a.stage;
      return fmt::format("{} {} s{}->s{} mb{}", op_letter(a.op), act ? "act" : "grad", from, to,
                         a.micro_batch);
    }
    case Op::kAllReduce:
      return fmt::format("AR s{} step{} bucket{}", a.stage, a.step, a.bucket);
    case Op::kOptimizerStep:
      return fmt::format("U s{} step{} ->v{}", a.stage, a.step, a.version);
    case Op::kTensorParallel:
      return fmt::format("TP {} s{} mb{}", a.payload == Payload::kGradient ? "bwd" : "fwd", a.stage,
                         a.micro_batch);
  }
  return "?";
}

}  // namespace pipetwin
