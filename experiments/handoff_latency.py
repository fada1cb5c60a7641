#!/usr/bin/env python3
"""The executor's hand-off latency between stages on this machine: the latency of the catalog's
"shared-memory" link (hardware/links.json), which local-cpu-2 plans use.

A tensor goes from one stage thread to another through three waits: the producing action ends
and the stage's send stream wakes and posts it; the receiver's recv stream wakes and copies it;
the receiver's compute stream wakes and starts the consuming action (exec/runtime/worker.hpp). The
simulator charges a transfer latency + bytes / bandwidth, once per hand-off (send and recv run
side by side). This script measures what that latency is for real: it runs GPipe with K=2, M=8
on the MLP (layers of ~0.1 ms, 1 KiB per sample between stages, so the bandwidth term is a few
nanoseconds), and, in the measured timeline, takes every hand-off whose receiver was idle
(waiting for it): the time from the producer's end to the consumer's start. It prints their
median and quartiles; the median is the figure for the catalog.

On a GPU (--device cuda --cluster h100-1gpu, a build against a CUDA LibTorch) the same run puts
both stages on stream sets of one GPU, and the figure is the latency of that cluster's link.

Usage: experiments/handoff_latency.py [--pipetwin build/pipetwin] [--iterations 100]
       [--device cpu|cuda] [--cluster local-cpu-2]
"""
import json
import os
import statistics
import tempfile

from runcmd import arg_parser, sh

COMPUTE = ("forward", "backward", "recompute", "optimizer_step")


def gaps(trace):
    """Producer end -> consumer start, in seconds, for hand-offs the consumer waited for."""
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    end_of = {}
    per_device = {}
    for e in events:
        a = e["args"]
        if a["op"] in COMPUTE:
            end_of[(a["op"], a["stage"], a.get("mb", -1))] = e["ts"] + e["dur"]
            per_device.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"], a))
    out = []
    for seq in per_device.values():
        seq.sort(key=lambda x: x[0])
        for (_, prev_end, _), (start, _, a) in zip(seq, seq[1:]):
            if a["op"] == "forward" and a["stage"] > 0:
                producer = end_of.get(("forward", a["stage"] - 1, a.get("mb")))
            elif a["op"] == "backward" and a["stage"] == 0:
                producer = end_of.get(("backward", 1, a.get("mb")))
            else:
                continue
            if producer is not None and producer > prev_end:  # the consumer was idle
                out.append((start - producer) * 1e-6)
    return out


def main():
    ap = arg_parser(__doc__)
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:I: where to profile and run")
    ap.add_argument("--cluster", default="local-cpu-2", help="the plan's cluster (catalog name)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prof, plan, trace = (os.path.join(tmp, n) for n in ("p.json", "plan.json", "run.json"))
        sh(args.pipetwin, "profile", "--model", "mlp", "--micro-batch", 1, "--device", args.device,
           "-q", "-o", prof)
        sh(args.pipetwin, "plan", "--model", "mlp", "--profile", prof, "--cluster", args.cluster,
           "-K", 2, "--schedule", "gpipe", "-B", 8, "-M", 8, "--iterations", args.iterations,
           "-q", "-o", plan)
        sh(args.pipetwin, "run", "--plan", plan, "-q", "--timeline", trace, "--device", args.device)
        with open(trace) as f:
            g = gaps(json.load(f))
    if len(g) < 10:
        raise SystemExit(f"handoff_latency: only {len(g)} hand-offs with an idle receiver")
    q = statistics.quantiles(g, n=4)
    print(f"hand-off latency over {len(g)} hand-offs: median {statistics.median(g) * 1e6:.1f} us "
          f"(quartiles {q[0] * 1e6:.1f} / {q[2] * 1e6:.1f} us)")


if __name__ == "__main__":
    main()
