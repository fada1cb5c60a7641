#!/usr/bin/env python3
"""Prediction against measurement on one GPU: profile -> plan -> simulate -> run -> compare.

For every model (name@B: the mini-batch B), the model is profiled once on the GPU at every
micro-batch size B/M the grid needs, in --dtype. Then for every (schedule, K, M): plan K stages
with the balance-time partitioner on --cluster (K stream sets of the one GPU), simulate the plan
(its Chrome-trace timeline and metrics), run it for real with the executor on the GPU (timeline and
metrics), and compare: the simulator's steady-state step time against the median step of the
measured steady window, each stage's peak memory, and the time per action kind (pipetwin compare).

A GPU does not drift the way a VM's vCPUs do (experiments/validate_executor.py brackets every run
by profiles for that), so each point is one profile and --runs runs; the noise band is how far the
runs' median steps land apart (+- half the range around their median), or, with one run, half the
inter-quartile range of its steady steps.

Everything a point used and measured is kept under OUT/points/ (plan, simulated and measured
timelines and metrics, the compare table), so the prediction can be made again from the same
measurements with another build of the simulator:
  experiments/validate_gpu.py --replay OUT   (no GPU: re-simulates OUT's plans, rewrites its tables;
                                             OUT may be the .tgz of such a folder, then the tables
                                             go to --out)

Usage: experiments/validate_gpu.py --pipetwin build-gpu/pipetwin --out DIR [--device cuda]
       [--cluster h200-1gpu] [--models vit:b16@32,bert:base@32,gpt2:124m@32]
       [--schedules gpipe,1f1b,pipedream] [--stages 2,4] [--chunks 4,8] [--dtype bfloat16]
Writes DIR/validation.csv and DIR/validation.md; exit 0, or 3 when the targets (median |error|
<= 5%, worst <= 10%) are missed, so a script can tell.
"""
import glob
import json
import os
import statistics
import sys
import tarfile
import tempfile
import time

from runcmd import HERE, arg_parser, median_worst, sh, write_results


def load(path):
    with open(path) as f:
        return json.load(f)


def profile_model(args, model, batch):
    """One profile of `model` at every micro-batch size the grid needs; returns its path."""
    sizes = sorted({batch // M for M in args.chunk_list})
    path = os.path.join(args.out, "profiles", f"{model.replace(':', '-')}-{args.dtype}.profile.json")
    if not os.path.exists(path):
        sh(args.pipetwin, "profile", "--model", model, "--device", args.device, "--dtype", args.dtype,
           "--micro-batch", ",".join(map(str, sizes)), "-q", "-o", path)
    return path


def current_cluster(plan):
    """A replayed plan with the cluster file of today's checkout (hardware/clusters/NAME.json) in
    place of the one it was planned with: the hardware description is part of the model."""
    p = load(plan)
    path = os.path.join(HERE, "..", "hardware", "clusters", p["cluster"]["name"] + ".json")
    if os.path.exists(path):
        p["cluster"] = load(path)
    out = os.path.join(os.path.dirname(plan), "replay.plan.json")
    with open(out, "w") as f:
        json.dump(p, f)
    return out


def simulate(args, d):
    plan = os.path.join(d, "plan.json")
    if args.replay:
        plan = current_cluster(plan)
    sh(args.pipetwin, "simulate", "--plan", plan, "-q",
       "--metrics", os.path.join(d, "sim.metrics.json"), "--timeline", os.path.join(d, "sim.trace.json"))
    return load(os.path.join(d, "sim.metrics.json"))


def steady_steps(m):
    """The measured step times of the steady window (the first step is warm-up)."""
    ends = m["step_end_s"]
    return [b - a for a, b in zip(ends, ends[1:])]


def noise_band(runs):
    """Half the spread of the runs' median steps around their median; with one run, half the
    inter-quartile range of its steps."""
    medians = sorted(r["iteration_time_median_s"] for r in runs)
    if len(medians) > 1:
        return (medians[-1] - medians[0]) / (2 * statistics.median(medians))
    steps = sorted(steady_steps(runs[0]))
    if len(steps) < 4:
        return 0.0
    q = statistics.quantiles(steps, n=4)
    return (q[2] - q[0]) / (2 * statistics.median(steps))


def point(args, model, batch, prof, schedule, K, M):
    d = os.path.join(args.out, "points", f"{model.replace(':', '-')}-{schedule}-K{K}-M{M}")
    os.makedirs(d, exist_ok=True)
    plan = os.path.join(d, "plan.json")
    if not args.replay:
        sh(args.pipetwin, "plan", "--model", model, "--profile", prof, "--cluster", args.cluster, "-K", K,
           "--schedule", schedule, "-B", batch, "-M", M, "--partitioner", "balance-time", "--dtype", args.dtype,
           "--iterations", args.iterations, "-q", "-o", plan)
    sim = simulate(args, d)
    runs = []
    for i in range(args.runs):
        stem = os.path.join(d, f"run{i}")
        if not args.replay:
            sh(args.pipetwin, "run", "--plan", plan, "--device", args.device, "--dtype", args.dtype, "-q",
               "--metrics", stem + ".metrics.json", "--timeline", stem + ".trace.json")
        runs.append(load(stem + ".metrics.json"))
    measured = statistics.median(r["iteration_time_median_s"] for r in runs)
    cmp = sh(args.pipetwin, "compare", os.path.join(d, "sim.trace.json"),
             *sorted(glob.glob(os.path.join(d, "run*.trace.json"))), "--plan", plan)
    with open(os.path.join(d, "compare.txt"), "w") as f:
        f.write(cmp)
    predicted = sim["iteration_time_s"]
    # The stream sets draw on the GPU's one memory (the cluster's shares_memory): the run reads the
    # GPU's peak (every device reports it), the plan promises the sum of the stages' peaks
    # (sim/memory_pools.hpp: an upper bound of the peak of the sum).
    mem_p = sum(x["peak_memory_bytes"] for x in sim["devices"])
    mem_m = max(max(x["peak_memory_bytes"] for x in r["devices"]) for r in runs)
    return {"model": model, "dtype": args.dtype, "schedule": schedule, "K": K, "M": M,
            "micro_batch": batch // M, "predicted_ms": round(predicted * 1e3, 3),
            "measured_ms": round(measured * 1e3, 3),
            "error_pct": round(100 * (predicted - measured) / measured, 1),
            "noise_pct": round(100 * noise_band(runs), 1),
            "peak_memory_predicted_mib": round(mem_p / 2**20, 1),
            "peak_memory_measured_mib": round(mem_m / 2**20, 1),
            "memory_error_pct": round(100 * (mem_p - mem_m) / mem_m, 1) if mem_m else 0.0,
            "action_errors": action_errors(cmp)}


def action_errors(cmp):
    """The compare table's per-action-kind errors, summed over stages: 'forward -12%/...'."""
    rows = {}
    for line in cmp.splitlines():
        parts = line.split()
        if len(parts) >= 7 and parts[0] == "stage" and parts[-1].endswith("%"):
            rows.setdefault(parts[2], []).append(float(parts[-1].rstrip("%")))
    return " ".join(f"{k} {statistics.median(v):+.0f}%" for k, v in sorted(rows.items()))


def write_tables(args, rows):
    median, worst = median_worst(rows, "error_pct")
    mem = [abs(r["memory_error_pct"]) for r in rows]
    write_results(args.out, rows,
                  ["model", "schedule", "K", "M", "predicted", "measured", "error", "noise band",
                   "peak memory (pred / meas)", "per action kind (median over stages)"],
                  lambda r: [r["model"], r["schedule"], str(r["K"]), str(r["M"]), f"{r['predicted_ms']} ms",
                             f"{r['measured_ms']} ms", f"{r['error_pct']:+.1f}%", f"+-{r['noise_pct']:.1f}%",
                             f"{r['peak_memory_predicted_mib']:.0f} / {r['peak_memory_measured_mib']:.0f} MiB "
                             f"({r['memory_error_pct']:+.1f}%)", r["action_errors"]],
                  f"\n{args.dtype}, {len(rows)} points: median |error| {median:.1f}%, worst {worst:.1f}%; "
                  f"peak memory median |error| {statistics.median(mem):.1f}%, worst {max(mem):.1f}%\n")
    print(f"median |error| {median:.1f}%, worst {worst:.1f}% over {len(rows)} points (targets: median <= 5%, "
          f"worst <= 10%); peak memory median {statistics.median(mem):.1f}%, worst {max(mem):.1f}%")
    return 0 if median <= 5 and worst <= 10 else 3


def main():
    ap = arg_parser(__doc__)
    ap.add_argument("--models", default="vit:b16@32,bert:base@32,gpt2:124m@32",
                    help="model@B, comma-separated (B: the mini-batch)")
    ap.add_argument("--schedules", default="gpipe,1f1b,pipedream")
    ap.add_argument("--stages", default="2,4", help="K values: stream sets of the one GPU")
    ap.add_argument("--chunks", default="4,8", help="M values")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--runs", type=int, default=1, help="runs of each plan")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cluster", default="h200-1gpu")
    ap.add_argument("--deadline-s", type=float, default=0, help="stop starting points after this (0: none)")
    ap.add_argument("--out", required=False)
    ap.add_argument("--replay", metavar="OUT", help="re-predict OUT's kept points, nothing run")
    args = ap.parse_args()
    if args.replay and args.replay.endswith(".tgz"):
        if not args.out:
            ap.error("--replay of a .tgz needs --out for the tables")
        unpacked = tempfile.mkdtemp(prefix="validate_gpu.")
        with tarfile.open(args.replay) as t:
            t.extractall(unpacked, filter="data")
        args.replay = unpacked
        replay_tables = args.out
    else:
        replay_tables = None
    args.out = args.replay or args.out
    if not args.out:
        ap.error("--out or --replay is needed")
    args.chunk_list = [int(x) for x in args.chunks.split(",")]
    os.makedirs(os.path.join(args.out, "profiles"), exist_ok=True)
    start, rows = time.monotonic(), []
    for spec in args.models.split(","):
        model, _, b = spec.partition("@")
        batch = int(b or 32)
        prof = None if args.replay else profile_model(args, model, batch)
        for schedule in args.schedules.split(","):
            for K in map(int, args.stages.split(",")):
                for M in args.chunk_list:
                    if args.deadline_s and time.monotonic() - start > args.deadline_s:
                        print(f"deadline: {model} {schedule} K={K} M={M} and later not run", flush=True)
                        continue
                    d = os.path.join(args.out, "points", f"{model.replace(':', '-')}-{schedule}-K{K}-M{M}")
                    if args.replay and not os.path.exists(os.path.join(d, "run0.metrics.json")):
                        continue
                    r = point(args, model, batch, prof, schedule, K, M)
                    rows.append(r)
                    print(f"{model:10} {schedule:9} K={K} M={M} predicted {r['predicted_ms']:9.3f} ms  measured "
                          f"{r['measured_ms']:9.3f} ms  error {r['error_pct']:+6.1f}% (noise +-{r['noise_pct']:.1f}%)  "
                          f"memory {r['memory_error_pct']:+.1f}%  {r['action_errors']}", flush=True)
    if not rows:
        sys.exit("validate_gpu: no point was run")
    if replay_tables:
        args.out = replay_tables
        os.makedirs(args.out, exist_ok=True)
    return write_tables(args, rows)


if __name__ == "__main__":
    sys.exit(main())
