#!/usr/bin/env python3
"""Writes the hand-made Kineto trace fixtures of tests/trace_import_test.cpp.

Run from this folder: python3 make_fixtures.py. Every duration below is chosen by hand; the test
states the figures that follow from them (forward, backward, optimizer per layer, the unattributed
share). The traces look like what torch.profiler (PyTorch 2.x, Kineto) writes: process and thread
metadata events, a "PyTorch Profiler" span, cpu_op / user_annotation events with "External id",
"Sequence number", "Fwd thread id", "Input Dims", "Input type", flow events, and on the GPU one
cuda_runtime launches, kernels on a stream lane and gpu_user_annotation copies of the ranges.

cpu-skip.trace.json: three layers on the CPU, micro-batch 4, one warm-up and three measured steps
of 400 us: "embed" (Linear 4->8 + ReLU), "block" (Linear 8->8 + ReLU), "head" (Linear 8->2) that
also reads embed's output (the add between them runs outside any layer).

gpu-two.trace.json: two layers on a GPU, micro-batch 2, one warm-up and two measured steps; the
backward runs on its own thread; kernels are linked by "correlation" (one by "External id" only,
one by nothing).
"""
import json

PID, TID = 4242, 4242
BASE = 1_700_000_000_000.0  # Kineto's epoch-based microseconds


class Trace:
    def __init__(self):
        self.events = [
            {"ph": "M", "name": "process_name", "pid": PID, "tid": 0, "args": {"name": "python"}},
            {"ph": "M", "name": "thread_name", "pid": PID, "tid": TID, "args": {"name": "thread 1"}},
        ]
        self.ext = 1

    def x(self, name, ts, dur, cat="cpu_op", tid=TID, pid=PID):
        a = {"External id": self.ext, "Record function id": 0}
        self.ext += 1
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": BASE + ts,
             "dur": dur, "args": a}
        self.events.append(e)
        return e


def op(t, name, ts, dur, seq=None, dims=None, types=None, bwd=False):
    args = {}
    if seq is not None:
        args["Sequence number"] = seq
        args["Fwd thread id"] = 1 if bwd else 0
    if dims is not None:
        args["Input Dims"] = dims
        args["Input type"] = types or ["float" if d else "Scalar" for d in dims]
    e = t.x(name, ts, dur)
    e["args"].update(args)
    return e


def linear(t, at, dur, seq, x, w, relu):
    """aten::linear (t, addmm) [+ aten::relu] starting at `at`; the range lasts `dur`."""
    lin_dur = dur - 8 if relu else dur - 2
    op(t, "aten::linear", at + 1, lin_dur, seq, [x, w, [w[0]]])
    op(t, "aten::t", at + 2, 2, seq, [w])
    op(t, "aten::addmm", at + 5, lin_dur - 5, seq + 1, [[w[0]], x, [w[1], w[0]], [], []])
    if relu:
        op(t, "aten::relu", at + dur - 6, 4, seq + 2, [[x[0], w[0]]])


# Per measured step: forward of embed, block, head; AddmmBackward0 of head, block, embed; the
# optimizer range. Step 0 (warm-up) takes three times the first step's figures.
CPU_STEPS = [
    dict(fe=30, fb=40, fh=20, ah=24, ab=50, ae=30, opt=50),
    dict(fe=34, fb=40, fh=22, ah=26, ab=54, ae=30, opt=52),
    dict(fe=32, fb=44, fh=21, ah=25, ab=52, ae=34, opt=54),
]


def cpu_step(t, k, start, s, length):
    seq = 100 + 20 * k
    step = t.x("pipetwin.step:%d" % k, start, length, cat="user_annotation")
    z = t.x("Optimizer.zero_grad#SGD.zero_grad", start + 1, 4)
    op(t, "aten::zero_", start + 2, 1, seq, [[8, 4]])  # zero_grad's ops share the next number
    at = start + 10
    for name, dur, x, w, relu, first in (("embed", s["fe"], [4, 4], [8, 4], True, seq),
                                         ("block", s["fb"], [4, 8], [8, 8], True, seq + 3)):
        t.x("pipetwin.layer:" + name, at, dur, cat="user_annotation")
        linear(t, at, dur, first, x, w, relu)
        at += dur + 2
    op(t, "aten::add", at, 5, seq + 6, [[4, 8], [4, 8], []])
    at += 7
    t.x("pipetwin.layer:head", at, s["fh"], cat="user_annotation")
    linear(t, at, s["fh"], seq + 7, [4, 8], [2, 8], False)
    at += s["fh"] + 2
    op(t, "aten::cross_entropy_loss", at, 15, seq + 9, [[4, 2], [4], [], [], [], []],
       ["float", "long int", "", "Scalar", "Scalar", "Scalar"])
    op(t, "aten::log_softmax", at + 1, 6, seq + 9, [[4, 2], [], []])
    op(t, "aten::nll_loss", at + 8, 6, seq + 10, [[4, 2], [4], [], [], []])
    at += 17
    op(t, "aten::ones_like", at, 3, None, [[]])
    at += 5
    acc = "torch::autograd::AccumulateGrad"
    bwd = [("NllLossBackward0", 5, seq + 10), ("LogSoftmaxBackward0", 4, seq + 9),
           ("AddmmBackward0", s["ah"], seq + 8), (acc, 2, 18446744073709551615),
           ("TBackward0", 3, seq + 7), (acc, 1, None), ("AddBackward0", 3, seq + 6),
           ("ReluBackward0", 4, seq + 5), ("AddmmBackward0", s["ab"], seq + 4), (acc, 2, None),
           ("TBackward0", 3, seq + 3), (acc, 1, None),
           ("ReluBackward0", 4, seq + 2), ("AddmmBackward0", s["ae"], seq + 1), (acc, 2, None),
           ("TBackward0", 3, seq), (acc, 1, None)]
    for node, dur, sq in bwd:
        op(t, "autograd::engine::evaluate_function: " + node, at, dur, sq, bwd=True)
        op(t, node, at, dur - 1, sq, bwd=True)
        at += dur + 1
    t.x("pipetwin.optimizer", at, s["opt"], cat="user_annotation")
    t.x("Optimizer.step#SGD.step", at, s["opt"])  # an operator here: the range is all operators
    for i, w in enumerate(([8, 4], [8], [8, 8], [8], [2, 8], [2])):
        op(t, "aten::add_", at + 2 + i, 0.5, None, [w, w, []])
    assert at + s["opt"] < start + length, (k, at + s["opt"] - start)
    return step


def cpu_trace():
    t = Trace()
    t.x("PyTorch Profiler (0)", -10, 4000, cat="Trace", tid=0)
    warm = {k: 3 * v for k, v in CPU_STEPS[0].items()}
    warm["opt"] = 50
    t.events.append({"ph": "s", "id": 1, "pid": PID, "tid": TID, "ts": BASE + 11, "cat": "fwdbwd",
                     "name": "fwdbwd"})
    for k, s in enumerate([warm] + CPU_STEPS):
        cpu_step(t, k, 1000 * k, s, 900 if k == 0 else 400)
    meta = {"model": "skipnet", "micro_batch": 4, "dtype": "float32", "device": "cpu",
            "optimizer": "sgd", "input_bytes_per_sample": 16,
            "layers": [
                {"name": "embed", "kind": "linear", "param_bytes": 160,
                 "output_bytes_per_sample": 32, "saved_bytes_per_sample": 32, "skip_from": []},
                {"name": "block", "kind": "linear", "param_bytes": 288,
                 "output_bytes_per_sample": 32, "saved_bytes_per_sample": 32, "skip_from": []},
                {"name": "head", "kind": "linear", "param_bytes": 72,
                 "output_bytes_per_sample": 8, "saved_bytes_per_sample": 8,
                 "skip_from": ["embed"]}]}
    return {"schemaVersion": 1, "deviceProperties": [], "traceEvents": t.events,
            "traceName": "cpu-skip", "displayTimeUnit": "ms", "pipetwin": meta}


GPU_LANE = dict(pid=0, tid=7)


def launch(t, at, corr, kernel_at, dur, tid=TID, ext=None):
    r = t.x("cudaLaunchKernel", at, 4, cat="cuda_runtime", tid=tid)
    r["args"]["correlation"] = corr
    k = t.x("kernel_%d" % corr, kernel_at, dur, cat="kernel", **GPU_LANE)
    k["args"] = {"correlation": corr, "External id": ext if ext is not None else corr * 1000,
                 "stream": 7, "device": 0}


def gpu_step(t, k, start, k1, kb0):
    seq, c = 10 + 10 * k, 100 * (k + 1)
    t.x("pipetwin.step:%d" % k, start, 1000, cat="user_annotation")
    t.x("pipetwin.layer:l0", start + 10, 100, cat="user_annotation")
    t.x("pipetwin.layer:l0", start + 40, 20, cat="gpu_user_annotation", **GPU_LANE)
    op(t, "aten::linear", start + 12, 88, seq, [[2, 16], [16, 16], [16]])
    launch(t, start + 20, c + 1, start + 40, k1)
    t.x("pipetwin.layer:l1", start + 120, 100, cat="user_annotation")
    addmm = op(t, "aten::addmm", start + 122, 78, seq + 1, [[16], [2, 16], [16, 16], [], []])
    launch(t, start + 130, c + 2, start + 150, 20)
    k2b = t.x("kernel_by_external_id", start + 175, 5, cat="kernel", **GPU_LANE)
    k2b["args"] = {"External id": addmm["args"]["External id"], "stream": 7}
    op(t, "aten::mse_loss", start + 230, 30, seq + 2, [[2, 16], [2, 16], []])
    launch(t, start + 240, c + 3, start + 245, 3)
    bt = 11  # the autograd engine's device thread
    for node, at, sq, corr, dur in (("MseLossBackward0", 300, seq + 2, c + 5, 2),
                                    ("AddmmBackward0", 330, seq + 1, c + 6, 30),
                                    ("torch::autograd::AccumulateGrad", 385, None, c + 7, 1),
                                    ("AddmmBackward0", 400, seq, c + 8, kb0)):
        e = t.x("autograd::engine::evaluate_function: " + node, start + at, 40 if dur > 5 else 5,
                tid=bt)
        if sq is not None:
            e["args"].update({"Sequence number": sq, "Fwd thread id": 1})
        launch(t, start + at + 1, corr, start + at + 10, dur, tid=bt)
    unlinked = t.x("kernel_unlinked", start + 500, 4, cat="kernel", **GPU_LANE)
    unlinked["args"] = {"stream": 7}
    t.x("pipetwin.optimizer", start + 700, 100, cat="user_annotation")
    launch(t, start + 710, c + 4, start + 720, 8)


def gpu_trace():
    t = Trace()
    for k, (k1, kb0) in enumerate([(50, 50), (10, 15), (12, 17)]):
        gpu_step(t, k, 2000 * k, k1, kb0)
    meta = {"model": "two", "micro_batch": 2, "device": "cuda",
            "layers": [{"name": "l0", "param_bytes": 100, "output_bytes_per_sample": 64},
                       {"name": "l1", "param_bytes": 300, "output_bytes_per_sample": 64}]}
    return {"schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 1}],
            "traceEvents": t.events, "pipetwin": meta}


if __name__ == "__main__":
    for name, doc in (("cpu-skip", cpu_trace()), ("gpu-two", gpu_trace())):
        with open(name + ".trace.json", "w") as f:
            json.dump(doc, f, indent=None, separators=(",", ":"))
            f.write("\n")
