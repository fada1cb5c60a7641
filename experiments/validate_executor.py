#!/usr/bin/env python3
"""Prediction against measurement on this machine (issue 3, "Validation").

For every (model, schedule, M): profile the model here at the micro-batch size B/M, plan K
stages with the balance-time partitioner, simulate the plan, run it for real with the executor,
and compare the iteration times: the simulator's steady-state step time against the median step
of the measured steady window (metrics iteration_time_median_s). The profile is taken right before each run: the
vCPUs of a cloud VM change speed over minutes (we measured one vCPU 27% slower than the other for
a while, then both alike), and the profile's core_slowdown captures the speeds of the moment.

On a GPU (--device cuda, a build against a CUDA LibTorch): the profile is measured there with CUDA
events, the plan is for --cluster (say h100-1gpu: the K stages are stream sets of one GPU), and the
run places every stage on the GPU (exec/device.hpp).

Usage: experiments/validate_executor.py [--pipetwin build/pipetwin] [--out DIR]
       [--device cpu|cuda] [--cluster local-cpu-2]
Writes DIR/validation.csv and DIR/validation.md and prints the table and the summary:
the median and worst |error| over all runs. Exit status 0; 3 when the targets (median <= 5%,
worst <= 10%) are missed, so a script can tell.
"""
import csv
import json
import os
import statistics
import sys
import tempfile

from runcmd import arg_parser, sh


def iteration_time(path, key):
    with open(path) as f:
        return json.load(f)[key]


def one(args, tmp, model, schedule, M):
    b = args.batch // M
    os.makedirs(os.path.join(args.out, "profiles"), exist_ok=True)
    prof = os.path.join(args.out, "profiles", f"{model.replace(':', '-')}-{schedule}-M{M}.profile.json")
    plan = os.path.join(tmp, "plan.json")
    pred, meas = os.path.join(tmp, "sim.json"), os.path.join(tmp, "run.json")
    sh(args.pipetwin, "profile", "--model", model, "--micro-batch", str(b), "--repeats", str(args.repeats),
       "--device", args.device, "-q", "-o", prof)
    sh(args.pipetwin, "plan", "--model", model, "--profile", prof, "--cluster", args.cluster, "-K", str(args.stages),
       "--schedule", schedule, "-B", str(args.batch), "-M", str(M), "--partitioner", "balance-time",
       "--iterations", str(args.iterations), "-q", "-o", plan)
    sh(args.pipetwin, "simulate", "--plan", plan, "-q", "--metrics", pred)
    sh(args.pipetwin, "run", "--plan", plan, "-q", "--metrics", meas, "--device", args.device)
    with open(prof) as f:
        slowdown = json.load(f).get("core_slowdown", [1.0])
    # Predicted: the steady-state step time. Measured: the median step of the steady window, as
    # this host stalls a step now and then (we saw isolated 40-60 ms stalls on vCPU 0).
    p, m = iteration_time(pred, "iteration_time_s"), iteration_time(meas, "iteration_time_median_s")
    return {"model": model, "schedule": schedule, "K": args.stages, "M": M, "micro_batch": b,
            "predicted_ms": round(p * 1e3, 2), "measured_ms": round(m * 1e3, 2),
            "error_pct": round(100 * (p - m) / m, 1), "core_slowdown": "/".join(f"{s:.2f}" for s in slowdown)}


def main():
    ap = arg_parser(__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--models", default="vit:tiny,bert:tiny")
    ap.add_argument("--schedules", default="gpipe,1f1b,pipedream")
    ap.add_argument("--chunks", default="1,4,8")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(here, "results"))
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:I: where to profile and run")
    ap.add_argument("--cluster", default="local-cpu-2", help="the plan's cluster (catalog name)")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            for schedule in args.schedules.split(","):
                for M in map(int, args.chunks.split(",")):
                    rows.append(one(args, tmp, model, schedule, M))
                    r = rows[-1]
                    print(f"{model:10} {schedule:10} M={M:<2} predicted {r['predicted_ms']:8.2f} ms  "
                          f"measured {r['measured_ms']:8.2f} ms  error {r['error_pct']:+6.1f}%  "
                          f"cores {r['core_slowdown']}", flush=True)
    errors = [abs(r["error_pct"]) for r in rows]
    median, worst = statistics.median(errors), max(errors)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "validation.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "validation.md"), "w") as f:
        f.write("| model | schedule | M | predicted | measured | error |\n|---|---|---|---|---|---|\n")
        for r in rows:
            f.write(f"| {r['model']} | {r['schedule']} | {r['M']} | {r['predicted_ms']} ms | "
                    f"{r['measured_ms']} ms | {r['error_pct']:+.1f}% |\n")
        f.write(f"\nmedian |error| {median:.1f}%, worst {worst:.1f}%\n")
    print(f"median |error| {median:.1f}%, worst {worst:.1f}% over {len(rows)} runs "
          f"(targets: median <= 5%, worst <= 10%)")
    return 0 if median <= 5 and worst <= 10 else 3


if __name__ == "__main__":
    sys.exit(main())
