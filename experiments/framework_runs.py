#!/usr/bin/env python3
"""Measure training runs of the executor and fit its framework overheads (docs/framework-fit.md).

Measures: for every configuration K:M (pipeline stages : micro-batches, --configs) the model is
profiled here at the micro-batch size B/M (once per size), planned with that profile (gpipe,
uniform partitioner, the K-stage --cluster), and run with `pipetwin run` --repeats times; the
repeats are interleaved over the configurations (round 1 of every configuration, then round 2, ...)
so that a slow minute of this shared host lands on all of them alike. A configuration's measured
time is the median of its runs' median steps (metrics iteration_time_median_s), its noise band
+- half the range of those medians around it.

Writes OUT/runs.csv (the columns `pipetwin calibrate --runs` reads, with the profile each run was
planned from) and OUT/runs-detail.csv (every repeat). With --fit-stages 1,2 it then fits a
framework to the runs at those K (`calibrate --runs`, OUT/framework.json) and predicts the others
with it (`plan --framework` + `simulate`), printing each prediction without and with the
framework beside the measurement and its noise band; OUT/validation.md holds that table.

Usage: experiments/framework_runs.py --pipetwin build/pipetwin [--model mlp] [--batch 8]
       [--configs 1:1,1:4,2:2,2:8,4:8] [--repeats 3] [--iterations 100] [--fit-stages 1,2]
       [--fit-chunks 1,4]
       [--out DIR]
       [--cluster K=NAME_OR_FILE,...]
"""
import csv
import json
import os
import statistics
import sys

from runcmd import HERE, arg_parser, sh


def run_config(args, out, k, m):
    """Profile (cached per micro-batch size) and plan K:M; returns (profile, plan, cluster)."""
    b = args.batch // m
    prof = os.path.join(out, "profiles", f"{args.model.replace(':', '-')}-b{b}.profile.json")
    if not os.path.exists(prof):
        sh(args.pipetwin, "profile", "--model", args.model, "--micro-batch", b, "--repeats",
           args.profile_repeats, "-q", "-o", prof)
    cluster = args.clusters.get(k, "local-cpu-2")
    plan = os.path.join(out, "plans", f"K{k}-M{m}.plan.json")
    sh(args.pipetwin, "plan", "--model", args.model, "--profile", prof, "--cluster", cluster,
       "-K", k, "--schedule", "gpipe", "-B", args.batch, "-M", m, "--iterations",
       args.iterations, "-q", "-o", plan)
    return prof, plan, cluster


def measure(args, plan, metrics):
    sh(args.pipetwin, "run", "--plan", plan, "-q", "--metrics", metrics)
    with open(metrics) as f:
        return json.load(f)["iteration_time_median_s"]


def simulate(args, plan, metrics, framework=None):
    extra = ["--framework", framework] if framework else []
    sh(args.pipetwin, "simulate", "--plan", plan, "-q", "--metrics", metrics, *extra)
    with open(metrics) as f:
        return json.load(f)["iteration_time_s"]


def runs_row(args, k, m, prof, cluster, measured_s):
    return {"model": args.model, "cluster": cluster, "stages": k, "dp": 1, "batch": args.batch,
            "micro_batch": args.batch // m, "schedule": "gpipe", "dtype": "", "optimizer": "",
            "measured_ms": f"{measured_s * 1e3:.4f}", "profile": prof}


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def validate(args, out, configs, results):
    """Fit on the runs at --fit-stages, predict the others."""
    fit_k = {int(k) for k in args.fit_stages.split(",")}
    fit_m = {int(m) for m in args.fit_chunks.split(",")} if args.fit_chunks else None

    def fitted_on(k, m):
        return k in fit_k and (fit_m is None or m in fit_m)

    train = [r for (k, m), r in zip(configs, results) if fitted_on(k, m)]
    write(os.path.join(out, "runs-fit.csv"), [r["row"] for r in train])
    framework = os.path.join(out, "framework.json")
    print(sh(args.pipetwin, "calibrate", "--runs", os.path.join(out, "runs-fit.csv"), "--name",
             args.name, "-o", framework), flush=True)
    lines = ["| K | M | micro-batch | measured (noise band) | no framework | error | with the "
             "framework | error |", "|---|---|---|---|---|---|---|---|"]
    errors = []
    for (k, m), r in zip(configs, results):
        if fitted_on(k, m):
            continue
        metrics = os.path.join(out, "sim.json")
        base = simulate(args, r["plan"], metrics)
        fitted = simulate(args, r["plan"], metrics, framework)
        meas = r["measured_s"]
        errors.append(abs(fitted / meas - 1))
        lines.append(f"| {k} | {m} | {args.batch // m} | {meas * 1e3:.2f} ms "
                     f"(+-{100 * r['noise']:.1f}%) | {base * 1e3:.2f} ms "
                     f"| {100 * (base / meas - 1):+.1f}% | {fitted * 1e3:.2f} ms "
                     f"| {100 * (fitted / meas - 1):+.1f}% |")
    summary = (f"\nfitted on K in {{{args.fit_stages}}}, M in {{{args.fit_chunks or 'all'}}}; "
               f"predicted {len(errors)} runs: median |error| "
               f"{100 * statistics.median(errors):.1f}%, worst {100 * max(errors):.1f}%\n"
               if errors else "\nno run outside --fit-stages to predict\n")
    text = "\n".join(lines) + "\n" + summary
    with open(os.path.join(out, "validation.md"), "w") as f:
        f.write(text)
    print(text)


def main():
    ap = arg_parser(__doc__)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--configs", default="1:1,1:4,2:2,2:8,4:8", help="K:M pairs, comma-separated")
    ap.add_argument("--repeats", type=int, default=3, help="runs per configuration, interleaved")
    ap.add_argument("--iterations", type=int, default=100,
                    help="mini-batches per run (at 20 a run's slow first steps can be its median)")
    ap.add_argument("--profile-repeats", type=int, default=31)
    ap.add_argument("--cluster", default="",
                    help="K=cluster pairs (default: local-cpu-2 for K <= 2, "
                         "experiments/local-cpu-4.json for K = 4: two stages per vCPU)")
    ap.add_argument("--fit-stages", default="", help="fit on these K, predict the rest")
    ap.add_argument("--fit-chunks", default="", help="and on these M only (default: every M)")
    ap.add_argument("--name", default="pipetwin-executor-cpu")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "framework"))
    args = ap.parse_args()
    args.clusters = {4: os.path.join(HERE, "local-cpu-4.json")}
    args.clusters.update({int(k): v for k, v in (p.split("=", 1) for p in args.cluster.split(",") if p)})
    out = args.out
    for d in ("profiles", "plans", "metrics"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    configs = [tuple(map(int, c.split(":"))) for c in args.configs.split(",")]
    planned = [run_config(args, out, k, m) for k, m in configs]
    times = [[] for _ in configs]
    detail = []
    for rep in range(args.repeats):
        for i, ((k, m), (_, plan, _)) in enumerate(zip(configs, planned)):
            t = measure(args, plan, os.path.join(out, "metrics", f"K{k}-M{m}-{rep}.json"))
            times[i].append(t)
            detail.append({"K": k, "M": m, "repeat": rep, "measured_ms": f"{t * 1e3:.4f}",
                           "load1": f"{os.getloadavg()[0]:.2f}"})
            print(f"K={k} M={m} repeat {rep}: {t * 1e3:.3f} ms (load {os.getloadavg()[0]:.1f})",
                  flush=True)
    results = []
    for (k, m), (prof, plan, cluster), ts in zip(configs, planned, times):
        med = statistics.median(ts)
        results.append({"plan": plan, "measured_s": med, "noise": (max(ts) - min(ts)) / (2 * med),
                        "row": runs_row(args, k, m, prof, cluster, med)})
    write(os.path.join(out, "runs.csv"), [r["row"] for r in results])
    write(os.path.join(out, "runs-detail.csv"), detail)
    for (k, m), r in zip(configs, results):
        print(f"K={k} M={m}: {r['measured_s'] * 1e3:.3f} ms +-{100 * r['noise']:.1f}%")
    if args.fit_stages:
        validate(args, out, configs, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
