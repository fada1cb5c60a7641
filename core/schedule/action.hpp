// The schedule IR's unit: one action a device performs.
//
// A schedule is, for every device, an ordered list of actions (docs/design.md "The schedule IR"):
// Forward(mb, stage), Backward(mb, stage), Recompute(mb, stage), Send/Recv(activation|gradient,
// mb, peer), AllReduce(bucket), OptimizerStep(stage). Each action runs on one of the device's
// streams, as torchgpipe runs copies on copy streams beside the compute stream (Section 3.2.3):
//   compute    Forward, Backward (or its two halves), Recompute, OptimizerStep
//   send       Send        (copy engine to the peer)
//   recv       Recv        (copy engine from the peer)
//   collective AllReduce   (the data-parallel communicator)
// A stream executes its actions in list order; an action starts once its stream is free and its
// dependencies are done. The simulator and the executor both interpret actions this way.
//
// A backward is either one Backward (B) or split in two, as zero-bubble pipelines schedule it
// (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, Section 2): BackwardInput (I) computes
// the gradient with respect to the stage input — what the previous stage waits for — and
// BackwardWeight (W) the gradients with respect to the stage's weights, which nothing downstream
// waits for and which may run any time after its I and before the optimizer step. A stage's
// micro-batch has either a B or an I followed (later, on the same device) by its W.
//
// Every compute action carries the weight version it reads, and OptimizerStep the version it
// writes, so staleness is read off the versions rather than computed separately.
//
// Thread-safety: plain value types.
#pragma once

#include <cstdint>
#include <string>

namespace pipetwin {

enum class Op : uint8_t {
  kForward,
  kBackward,
  kRecompute,
  kSend,
  kRecv,
  kAllReduce,
  kOptimizerStep,
  kBackwardInput,   // I: input gradient (the first half of a split backward)
  kBackwardWeight,  // W: weight gradients (the second half)
  // The collectives of a tensor-parallel group inside a forward (payload activation) or a
  // backward (payload gradient): a simulated timeline's event on the device's tensor stream,
  // drawn at the end of the pass that runs them (core/tensor_parallel.hpp). Never in a
  // schedule: the pass's action includes them, as Megatron-LM runs them inside the layer.
  kTensorParallel,
};

// Backward or BackwardInput: the action that consumes the output gradient and produces the
// input gradient.
inline bool is_input_backward(Op op) {
  return op == Op::kBackward || op == Op::kBackwardInput;
}
// Backward, BackwardInput or BackwardWeight.
inline bool is_backward(Op op) {
  return op == Op::kBackward || op == Op::kBackwardInput || op == Op::kBackwardWeight;
}

enum class Payload : uint8_t { kNone, kActivation, kGradient };

enum class StreamKind : uint8_t { kCompute = 0, kSend = 1, kRecv = 2, kCollective = 3, kTensor = 4 };
inline constexpr int kStreamsPerDevice = 4;  // the streams a schedule's actions run on
inline constexpr int kTimelineStreams = 5;   // and a timeline's tensor-parallel events (kTensor)

struct Action {
  Op op = Op::kForward;
  Payload payload = Payload::kNone;  // Send/Recv: what travels
  int32_t stage = -1;        // stage this action works for (Send: producer side's own stage)
  int32_t micro_batch = -1;  // global micro-batch index: step * M + i
  int32_t peer_stage = -1;   // Send/Recv: the stage on the other side
  int32_t bucket = -1;       // AllReduce: gradient bucket of `stage`
  int32_t step = -1;         // optimizer step (mini-batch) this action belongs to
  int32_t version = -1;      // F/B/R: weight version read; OptimizerStep: version written
};

// Inline: the simulator, the liveness walk and the metrics ask it per action.
inline StreamKind stream_of(Op op) {
  switch (op) {
    case Op::kSend: return StreamKind::kSend;
    case Op::kRecv: return StreamKind::kRecv;
    case Op::kAllReduce: return StreamKind::kCollective;
    case Op::kTensorParallel: return StreamKind::kTensor;
    default: return StreamKind::kCompute;
  }
}
const char* op_name(Op op);           // "forward", "backward", ...
const char* op_letter(Op op);         // "F", "B", "R", "S", "V", "AR", "U", "I", "W", "TP"
const char* payload_name(Payload p);  // "none", "activation", "gradient"
bool parse_op(const std::string& name, Op& out);
bool parse_payload(const std::string& name, Payload& out);
const char* stream_name(StreamKind s);  // "compute", "send", "recv", "collective", "tensor"

// Short human label such as "F s1 mb3 v0" or "S act s1->s2 mb3".
std::string describe(const Action& a);

}  // namespace pipetwin
