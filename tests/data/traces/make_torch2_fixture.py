#!/usr/bin/env python3
"""Writes the torch 2.x module-range fixtures of tests/trace_import_plain_test.cpp.

Run from this folder: python3 make_torch2_fixture.py. The durations below are chosen by hand; the
test states the figures that follow from them.

What torch.profiler 2.x writes for the documentation's recipe on a CPU — profile(activities=[CPU],
record_shapes=True, with_stack=True, with_modules=True) around the training loop, prof.step()
after each step — shaped from PyTorch's source (not recorded: no torch 2.x here):
  - cpu_op events with "External id", "Record function id", "Ev Idx", "Sequence number" and "Fwd
    thread id" (forward operators made with autograd, and the backward's evaluate_function ops,
    but AccumulateGrad's: its number is UINT64_MAX, which is not written), "Input Dims", "Input
    type", "Input Strides", "Concrete Inputs" (torch/csrc/autograd/profiler_kineto.cpp,
    AddGenericMetadata);
  - with_stack: the Python tracer's python_function events on the same thread (pid = tid = the
    thread's id), one per Python call, named "<file>(<line>): <function>" or "<built-in ...>", and
    per nn.Module call "nn.Module: <Class>_<k>", k counting the instances of the class in the order
    of their first call (torch/csrc/profiler/collection.cpp, Result::name;
    torch/csrc/autograd/profiler_python.cpp); args "Python id", "Python parent id" (the nearest
    enclosing Python event, null for a root) and, for a module, "Python module id" (k)
    (profiler_kineto.cpp, AddTensorboardFields), "Python thread";
  - record_function ranges as user_annotation: "Optimizer.zero_grad#SGD.zero_grad" and
    "Optimizer.step#SGD.step" (torch/optim/optimizer.py), and with a schedule one
    "ProfilerStep#<n>" per step, opened and closed inside prof.step()'s Python frame
    (torch/profiler/profiler.py), so that it crosses the Python frames around it;
  - on a CPU the autograd engine runs the backward on the calling thread, inside the Python frames
    of loss.backward();
  - timestamps in microseconds with fractions, on Kineto's epoch-based clock.

torch2-modules.trace.json: no schedule, so no ProfilerStep range: steps come from the optimizer's
ranges. torch2-steps.trace.json: the same events with a schedule's ProfilerStep#<n> ranges.

The model: nn.Sequential(Linear(4, 8), ReLU(), Linear(8, 8), ReLU(), Linear(8, 2)) at micro-batch
4, nn.CrossEntropyLoss, torch.optim.SGD; one warm-up and three measured steps, 400 us apart; each
step's optimizer range ends 380 us into its window.
"""
import json

PID = TID = 31337
BASE = 1_710_000_000_000.125  # Kineto's epoch-based microseconds

# Per step (us): the outermost forward operators (aten::linear / aten::relu of the five children),
# the loss (aten::cross_entropy_loss) and backward()'s seed (aten::ones_like), the backward nodes
# and the optimizer's aten::_foreach_add_. Step 0 (warm-up) is the first measured one with slower
# matmuls in the middle layer.
STEPS = [
    dict(l0=20, r0=4, l1=30, r1=5, l2=12, ce=10, ones=3, nll=4, lsm=3, a2=14, t2=2, r1b=5, a1=40,
         t1=2, r0b=4, a0=22, t0=2, acc=1, opt=16),
    dict(l0=22, r0=4, l1=32, r1=5, l2=13, ce=11, ones=3, nll=4, lsm=3, a2=15, t2=2, r1b=6, a1=42,
         t1=2, r0b=4, a0=24, t0=2, acc=1, opt=18),
    dict(l0=21, r0=5, l1=31, r1=4, l2=12, ce=10, ones=4, nll=5, lsm=3, a2=14, t2=2, r1b=5, a1=44,
         t1=2, r0b=5, a0=23, t0=2, acc=1, opt=17),
]
WARM = dict(STEPS[0], l1=60, a1=80)
WINDOW, OPT_END = 400, 380


class Trace:
    def __init__(self):
        self.events = [
            {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python3"}},
            {"ph": "M", "name": "process_labels", "pid": PID, "tid": 0, "args": {"labels": "CPU"}},
            {"ph": "M", "name": "thread_name", "pid": PID, "tid": TID,
             "args": {"name": "thread %d (python3)" % TID}},
        ]
        self.ext = 1
        self.py = 0
        self.stack = []  # open Python events' ids

    def op(self, name, ts, dur, seq=None, dims=None, types=None, cat="cpu_op"):
        args = {"External id": self.ext, "Record function id": 0, "Ev Idx": len(self.events)}
        self.ext += 1
        if seq is not None:
            args["Fwd thread id"] = 0
            args["Sequence number"] = seq
        if dims is not None:
            args["Input Dims"] = dims
            args["Input type"] = types or ["float" if d else "Scalar" for d in dims]
            args["Input Strides"] = [[d[1], 1] if len(d) == 2 else [1] if d else [] for d in dims]
            args["Concrete Inputs"] = ["" if d else "1" for d in dims]
        e = {"ph": "X", "cat": cat, "name": name, "pid": PID, "tid": TID,
             "ts": round(BASE + ts, 3), "dur": round(dur, 3), "args": args}
        self.events.append(e)
        return e

    def py_open(self, name, ts, module_id=None):
        """A python_function event; closed (given its duration) by py_close."""
        self.py += 1
        args = {"Python parent id": self.stack[-1][0] if self.stack else None,
                "Python id": self.py, "Python thread": 0, "Ev Idx": len(self.events)}
        if module_id is not None:
            args["Python module id"] = module_id
        e = {"ph": "X", "cat": "python_function", "name": name, "pid": PID, "tid": TID,
             "ts": round(BASE + ts, 3), "dur": 0, "args": args}
        self.events.append(e)
        self.stack.append((self.py, e, ts))

    def py_close(self, end):
        _, e, ts = self.stack.pop()
        e["dur"] = round(end - ts, 3)

    def frames(self, names, ts):
        """Nested Python frames opened 0.5 us apart; returns where the innermost starts."""
        for i, (name, mid) in enumerate(names):
            self.py_open(name, ts + 0.5 * i, mid)
        return ts + 0.5 * len(names)

    def close(self, n, end):
        for i in range(n):
            self.py_close(end + 0.5 * i)


def linear(t, at, dur, seq, x, w):
    """aten::linear (aten::t, aten::addmm) of `dur` us at `at`: nodes TBackward0 seq, AddmmBackward0
    seq + 1."""
    t.op("aten::linear", at, dur, seq, [x, w, [w[0]]])
    t.op("aten::t", at + 0.25, 1.5, seq, [w])
    t.op("aten::transpose", at + 0.5, 1, None, [w, [], []])
    t.op("aten::addmm", at + 2, dur - 2.5, seq + 1, [[w[0]], x, [w[1], w[0]], [], []])


def relu(t, at, dur, seq, x):
    t.op("aten::relu", at, dur, seq, [x])
    t.op("aten::clamp_min", at + 0.25, dur - 0.5, None, [x, []])


def module(t, cursor, cls, k, forward_frames, body):
    """One child module's call: its frames around `body(t, at)`, which returns the op's end."""
    at = t.frames([("nn.Module: %s_%d" % (cls, k), k), ("torch/nn/modules/module.py(1562): "
                   "_call_impl", None)] + [(f, None) for f in forward_frames], cursor)
    end = body(t, at + 0.5)
    t.close(2 + len(forward_frames), end + 0.25)
    return end + 0.25 + 0.5 * (2 + len(forward_frames)) + 1


def forward(t, start, s, seq):
    """The model's forward and the loss from `start`; returns where they end."""
    t.frames([("nn.Module: Sequential_0", 0),
              ("torch/nn/modules/module.py(1562): _call_impl", None),
              ("torch/nn/modules/container.py(219): forward", None)], start)
    c = start + 2
    lin = ["torch/nn/modules/linear.py(116): forward", "<built-in function linear>"]
    act = ["torch/nn/modules/activation.py(101): forward", "torch/nn/functional.py(1500): relu",
           "<built-in method relu of type object at 0x7f3a2c1e0a40>"]
    x8 = [4, 8]
    c = module(t, c, "Linear", 0, lin, lambda t, a: (linear(t, a, s["l0"], seq, [4, 4], [8, 4]),
                                                     a + s["l0"])[1])
    c = module(t, c, "ReLU", 0, act, lambda t, a: (relu(t, a, s["r0"], seq + 2, x8),
                                                   a + s["r0"])[1])
    c = module(t, c, "Linear", 1, lin, lambda t, a: (linear(t, a, s["l1"], seq + 3, x8, [8, 8]),
                                                     a + s["l1"])[1])
    c = module(t, c, "ReLU", 1, act, lambda t, a: (relu(t, a, s["r1"], seq + 5, x8),
                                                   a + s["r1"])[1])
    c = module(t, c, "Linear", 2, lin, lambda t, a: (linear(t, a, s["l2"], seq + 6, x8, [2, 8]),
                                                     a + s["l2"])[1])
    t.close(3, c)
    c += 3
    # The loss: a module of its own, outside the model.
    at = t.frames([("nn.Module: CrossEntropyLoss_0", 0),
                   ("torch/nn/modules/module.py(1562): _call_impl", None),
                   ("torch/nn/modules/loss.py(1188): forward", None),
                   ("torch/nn/functional.py(3104): cross_entropy", None),
                   ("<built-in method cross_entropy_loss of PyCapsule object at 0x7f3a1b2c4d50>",
                    None)], c) + 0.5
    t.op("aten::cross_entropy_loss", at, s["ce"], seq + 8, [[4, 2], [4], [], [], [], []],
         ["float", "long int", "", "Scalar", "Scalar", "Scalar"])
    t.op("aten::log_softmax", at + 0.5, s["ce"] / 2 - 1, seq + 8, [[4, 2], [], []])
    t.op("aten::_log_softmax", at + 1, s["ce"] / 2 - 2, None, [[4, 2], [], []])
    nll = [[4, 2], [4], [], [], []]
    t.op("aten::nll_loss_nd", at + s["ce"] / 2, s["ce"] / 2 - 0.5, seq + 9, nll)
    t.op("aten::nll_loss", at + s["ce"] / 2 + 0.25, s["ce"] / 2 - 1, seq + 9, nll)
    t.op("aten::nll_loss_forward", at + s["ce"] / 2 + 0.5, s["ce"] / 2 - 1.5, None, nll)
    t.close(5, at + s["ce"] + 0.25)
    return at + s["ce"] + 3


def backward(t, start, s, seq):
    """loss.backward() from `start`: the seed, then the nodes on this thread; returns its end."""
    t.frames([("torch/_tensor.py(521): backward", None),
              ("torch/autograd/__init__.py(289): backward", None)], start)
    at = t.frames([("torch/autograd/__init__.py(89): _make_grads", None),
                   ("<built-in method ones_like of type object at 0x7f3a2c1e0a40>", None)],
                  start + 1) + 0.5
    t.op("aten::ones_like", at, s["ones"], None, [[], [], [], [], [], []])
    t.op("aten::empty_like", at + 0.25, s["ones"] / 2, None, [[], [], [], [], [], []])
    t.op("aten::fill_", at + s["ones"] / 2 + 0.5, s["ones"] / 2 - 0.75, None, [[], []])
    t.close(2, at + s["ones"] + 0.25)
    at = t.frames([("torch/autograd/graph.py(768): _engine_run_backward", None),
                   ("<built-in method run_backward of torch._C._EngineBase object at "
                    "0x7f3a1a9e8f20>", None)], at + s["ones"] + 2) + 0.5
    acc = "torch::autograd::AccumulateGrad"
    nodes = [("NllLossBackward0", s["nll"], seq + 9), ("LogSoftmaxBackward0", s["lsm"], seq + 8),
             ("AddmmBackward0", s["a2"], seq + 7), (acc, s["acc"], None),
             ("TBackward0", s["t2"], seq + 6), (acc, s["acc"], None),
             ("ReluBackward0", s["r1b"], seq + 5), ("AddmmBackward0", s["a1"], seq + 4),
             (acc, s["acc"], None), ("TBackward0", s["t1"], seq + 3), (acc, s["acc"], None),
             ("ReluBackward0", s["r0b"], seq + 2), ("AddmmBackward0", s["a0"], seq + 1),
             (acc, s["acc"], None), ("TBackward0", s["t0"], seq), (acc, s["acc"], None)]
    for node, dur, sq in nodes:
        t.op("autograd::engine::evaluate_function: " + node, at, dur, sq)
        t.op(node, at + 0.125, dur - 0.25, sq)
        at += dur + 0.5
    t.close(4, at)
    return at + 2


def optimizer(t, end, s):
    """optimizer.step(), its range ending at `end` (zero_grad is the step's first call)."""
    start = end - s["opt"] - 6
    t.frames([("torch/optim/optimizer.py(485): wrapper", None)], start)
    t.op("Optimizer.step#SGD.step", start + 1, s["opt"] + 5, cat="user_annotation")
    at = t.frames([("torch/optim/sgd.py(104): step", None), ("torch/optim/sgd.py(243): sgd", None),
                   ("torch/optim/sgd.py(341): _multi_tensor_sgd", None),
                   ("<built-in method _foreach_add_ of type object at 0x7f3a2c1e0a40>", None)],
                  start + 1.5)
    t.op("aten::_foreach_add_", at, s["opt"], None, [[], [], []],
         ["TensorList", "TensorList", "Scalar"])
    t.close(4, at + s["opt"] + 0.1)
    t.close(1, end + 0.5)
    return start


def step(t, k, s, schedule):
    w = WINDOW * k
    seq = 100 + 20 * k
    t.frames([("torch/optim/optimizer.py(813): zero_grad", None)], w + 2)
    t.op("Optimizer.zero_grad#SGD.zero_grad", w + 3, 4, cat="user_annotation")  # set_to_none
    t.close(1, w + 8)
    c = forward(t, w + 12, s, seq)
    c = backward(t, c, s, seq)
    assert c < optimizer(t, w + OPT_END, s), (k, c)
    # prof.step(): with a schedule it closes this step's ProfilerStep range and opens the next.
    t.frames([("torch/profiler/profiler.py(741): step", None)], w + 388)
    if schedule:
        t.op("ProfilerStep#%d" % (k + 1), w + 392, WINDOW - 2, cat="user_annotation")
    t.close(1, w + 396)


def trace(schedule):
    t = Trace()
    t.op("PyTorch Profiler (0)", -20, WINDOW * 4 + 40, cat="Trace")
    t.events[-1]["tid"] = 0
    t.frames([("train.py(31): <module>", None)], -12)
    if schedule:
        t.op("ProfilerStep#0", -8, 8 + WINDOW - 10, cat="user_annotation")
    for k, s in enumerate([WARM] + STEPS):
        step(t, k, s, schedule and k < len(STEPS))
    t.close(1, WINDOW * 4 + 10)
    # A forward-backward flow pair, as Kineto links an operator to its backward node.
    t.events.append({"ph": "s", "id": 101, "pid": PID, "tid": TID, "ts": round(BASE + 14, 3),
                     "cat": "fwdbwd", "name": "fwdbwd"})
    t.events.append({"ph": "f", "id": 101, "pid": PID, "tid": TID, "ts": round(BASE + 200, 3),
                     "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"})
    return {"schemaVersion": 1, "deviceProperties": [], "record_shapes": 1, "with_stack": 1,
            "with_modules": 1, "profile_memory": 0, "traceEvents": t.events,
            "traceName": "torch2", "displayTimeUnit": "ms",
            "baseTimeNanoseconds": 1710000000000000000}


if __name__ == "__main__":
    for name, schedule in (("torch2-modules.trace.json", False), ("torch2-steps.trace.json", True)):
        with open(name, "w") as f:
            json.dump(trace(schedule), f, indent=0)
        print(name)
