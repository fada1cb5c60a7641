#include "core/schedule/action.hpp"

#include <fmt/format.h>

namespace pipetwin {

StreamKind stream_of(Op op) {
  switch (op) {
    case Op::kSend:
      return StreamKind::kSend;
    case Op::kRecv:
      return StreamKind::kRecv;
    case Op::kAllReduce:
      return StreamKind::kCollective;
    default:
      return StreamKind::kCompute;
  }
}

const char* op_name(Op op) {
  switch (op) {
    case Op::kForward:
      return "forward";
    case Op::kBackward:
      return "backward";
    case Op::kRecompute:
      return "recompute";
    case Op::kSend:
      return "send";
    case Op::kRecv:
      return "recv";
    case Op::kAllReduce:
      return "allreduce";
    case Op::kOptimizerStep:
      return "optimizer_step";
    case Op::kBackwardInput:
      return "backward_input";
    case Op::kBackwardWeight:
      return "backward_weight";
  }
  return "?";
}

const char* op_letter(Op op) {
  switch (op) {
    case Op::kForward:
      return "F";
    case Op::kBackward:
      return "B";
    case Op::kRecompute:
      return "R";
    case Op::kSend:
      return "S";
    case Op::kRecv:
      return "V";
    case Op::kAllReduce:
      return "AR";
    case Op::kOptimizerStep:
      return "U";
    case Op::kBackwardInput:
      return "I";
    case Op::kBackwardWeight:
      return "W";
  }
  return "?";
}

const char* payload_name(Payload p) {
  switch (p) {
    case Payload::kActivation:
      return "activation";
    case Payload::kGradient:
      return "gradient";
    default:
      return "none";
  }
}

bool parse_op(const std::string& name, Op& out) {
  for (Op op : {Op::kForward, Op::kBackward, Op::kRecompute, Op::kSend, Op::kRecv, Op::kAllReduce,
                Op::kOptimizerStep, Op::kBackwardInput, Op::kBackwardWeight}) {
    if (name == op_name(op)) {
      out = op;
      return true;
    }
  }
  return false;
}

bool parse_payload(const std::string& name, Payload& out) {
  for (Payload p : {Payload::kNone, Payload::kActivation, Payload::kGradient}) {
    if (name == payload_name(p)) {
      out = p;
      return true;
    }
  }
  return false;
}

const char* stream_name(StreamKind s) {
  switch (s) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kSend:
      return "send";
    case StreamKind::kRecv:
      return "recv";
    case StreamKind::kCollective:
      return "collective";
  }
  return "?";
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
  }
  return "?";
}

}  // namespace pipetwin
