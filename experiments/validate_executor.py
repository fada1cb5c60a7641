#!/usr/bin/env python3
"""Prediction against measurement on this machine.

For every (model, schedule, M): profile the model here at the micro-batch size B/M, plan K
stages with the balance-time partitioner, simulate the plan, run it for real with the executor,
and compare the iteration times: the simulator's steady-state step time against the median step
of the measured steady window (metrics iteration_time_median_s).

The vCPUs of a cloud VM change speed over seconds to minutes (we measured one vCPU 27% slower
than the other for a while, then both alike; the same plan's run 7% apart a minute later), and a
prediction is of the machine as its profile found it. So each run is bracketed: profile, run,
profile, run, profile, ... (one profile between two runs brackets both), and a run's prediction is
the mean of the plan simulated with the profiles either side of it. When the two disagree by more
than --max-drift the host changed speed across the run, and the comparison would measure the
host, not the model: that round does not count. A point is --rounds rounds that held still (at
most --max-rounds run: if fewer held still, those; if none did, the steadiest --rounds, and the
table says so), and the round with the median error is the point's: the host moves by more than the model's error within
minutes, either way, and a single round reads the host as much as the model. The profile's
core_slowdown carries the per-core speeds of the moment.

On a GPU (--device cuda, a build against a CUDA LibTorch): the profile is measured there with CUDA
events, the plan is for --cluster (say h100-1gpu: the K stages are stream sets of one GPU), and the
run places every stage on the GPU (exec/platform/device.hpp).

Usage: experiments/validate_executor.py [--pipetwin build/pipetwin] [--out DIR]
       [--device cpu|cuda] [--cluster local-cpu-2]
Writes DIR/validation.csv and DIR/validation.md and prints the table and the summary:
the median and worst |error| over all runs, each point's error beside its noise band (how far the
measured median steps of its kept rounds land apart, +- half the range). Exit status 0; 3 when the targets (median <= 5%,
worst <= 10%) are missed, so a script can tell.
"""
import json
import os
import statistics
import sys
import tempfile

from runcmd import arg_parser, median_worst, sh, write_results


def iteration_time(path, key):
    with open(path) as f:
        return json.load(f)[key]


def without_cold(profile):
    """The profile without its cold-start figures (what the simulator predicted before it had
    them), for the table's comparison."""
    profile.pop("cold_pauses_s", None)
    for layer in profile["layers"]:
        for t in layer["timings"]:
            t.pop("cold_forward_s", None)
            t.pop("cold_backward_s", None)
    return profile


def predict(args, plan, profile, tmp, cold=True):
    """The simulator's steady-state step time of `plan` with `profile` in place of the plan's own
    (the partition stays as planned); with cold=False, without the profile's cold starts."""
    with open(plan) as f:
        p = json.load(f)
    with open(profile) as f:
        p["profile"] = json.load(f)
    if not cold:
        without_cold(p["profile"])
    other, metrics = os.path.join(tmp, "plan-other.json"), os.path.join(tmp, "sim.json")
    with open(other, "w") as f:
        json.dump(p, f)
    sh(args.pipetwin, "simulate", "--plan", other, "-q", "--metrics", metrics)
    return iteration_time(metrics, "iteration_time_s")


def profile(args, model, b, path):
    sh(args.pipetwin, "profile", "--model", model, "--micro-batch", str(b), "--repeats", str(args.repeats),
       "--device", args.device, "-q", "-o", path)


def plan_point(args, tmp, model, schedule, M, prof):
    """Profile at the micro-batch size B/M into `prof` and plan K stages from it; returns the plan."""
    plan = os.path.join(tmp, "plan.json")
    profile(args, model, args.batch // M, prof)
    # "interleaved-1f1b/v2": the schedule with two model chunks per device (--virtual-stages 2).
    name, _, v = schedule.partition("/v")
    extra = ["--virtual-stages", v] if v else []
    sh(args.pipetwin, "plan", "--model", model, "--profile", prof, "--cluster", args.cluster, "-K", str(args.stages),
       "--schedule", name, "-B", str(args.batch), "-M", str(M), "--partitioner", "balance-time",
       "--iterations", str(args.iterations), "-q", "-o", plan, *extra)
    return plan


def rounds(args, tmp, model, M, plan, prof):
    """Bracketed rounds of one plan: profile, run, profile, run, profile, ... (the profile between
    two runs brackets both). A round: the run's median step, the predictions from the profiles
    either side of it (the partition stays as planned), and the host's drift across it. Goes on
    until --rounds rounds held still (drift <= --max-drift) or --max-rounds were run."""
    meas, after = os.path.join(tmp, "run.json"), os.path.join(tmp, "after.profile.json")
    before_s, out = predict(args, plan, prof, tmp), []
    before_warm = predict(args, plan, prof, tmp, cold=False)
    while len(out) < args.max_rounds and sum(r["steady"] for r in out) < args.rounds:
        sh(args.pipetwin, "run", "--plan", plan, "-q", "--metrics", meas, "--device", args.device)
        # Measured: the median step of the steady window, as this host stalls a step now and then
        # (we saw isolated 40-60 ms stalls on vCPU 0).
        m = iteration_time(meas, "iteration_time_median_s")
        profile(args, model, args.batch // M, after)
        after_s, after_warm = predict(args, plan, after, tmp), predict(args, plan, after, tmp, cold=False)
        drift = abs(after_s - before_s) / before_s
        out.append({"before": before_s, "after": after_s, "measured": m, "drift": drift,
                    "steady": drift <= args.max_drift, "error": ((before_s + after_s) / 2 - m) / m,
                    "error_no_cold": ((before_warm + after_warm) / 2 - m) / m})
        before_s, before_warm = after_s, after_warm
    return out


def one(args, tmp, model, schedule, M):
    """A point: the plan's bracketed rounds; of those that held still (if none did, the steadiest
    --rounds), the round with the median error counts. Within minutes this host's speed moves by
    more than the model's error, either way; the median of a few steady rounds reads the model."""
    os.makedirs(os.path.join(args.out, "profiles"), exist_ok=True)
    prof = os.path.join(args.out, "profiles",
                        f"{model.replace(':', '-')}-{schedule.replace('/', '-')}-M{M}.profile.json")
    plan = plan_point(args, tmp, model, schedule, M, prof)
    done = rounds(args, tmp, model, M, plan, prof)
    kept = [r for r in done if r["steady"]] or sorted(done, key=lambda r: r["drift"])[:args.rounds]
    kept.sort(key=lambda r: r["error"])
    r = kept[(len(kept) - 1) // 2]
    with open(prof) as f:
        slowdown = json.load(f).get("core_slowdown", [1.0])
    # The noise band: how far the kept rounds' measured median steps land apart, +- half the range
    # around their median (an error inside it cannot be told from the host's noise).
    measured = sorted(x["measured"] for x in kept)
    noise = (measured[-1] - measured[0]) / (2 * statistics.median(measured))
    return {"model": model, "schedule": schedule, "K": args.stages, "M": M, "micro_batch": args.batch // M,
            "predicted_ms": round((r["before"] + r["after"]) / 2 * 1e3, 2),
            "measured_ms": round(r["measured"] * 1e3, 2), "error_pct": round(100 * r["error"], 1),
            "error_no_cold_pct": round(100 * r["error_no_cold"], 1),
            "noise_pct": round(100 * noise, 1),
            "before_ms": round(r["before"] * 1e3, 2), "after_ms": round(r["after"] * 1e3, 2),
            "drift_pct": round(100 * r["drift"], 1), "rounds": len(done),
            "steady_rounds": sum(x["steady"] for x in done),
            "round_errors_pct": "/".join(f"{100 * x['error']:+.1f}" for x in kept),
            "host_steady": r["steady"], "core_slowdown": "/".join(f"{s:.2f}" for s in slowdown)}


def main():
    ap = arg_parser(__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--models", default="vit:tiny,bert:tiny")
    ap.add_argument("--schedules", default="gpipe,1f1b,pipedream",
                    help="comma-separated; NAME/vV plans V model chunks per device (interleaved-1f1b/v2)")
    ap.add_argument("--chunks", default="1,4,8")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=31, help="profile: timed passes per layer (median)")
    ap.add_argument("--rounds", type=int, default=3, help="bracketed rounds per point that held still")
    ap.add_argument("--max-rounds", type=int, default=6, help="bracketed rounds per point, at most")
    ap.add_argument("--max-drift", type=float, default=0.04,
                    help="largest relative change of the prediction across a run (host speed drift)")
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
                          f"measured {r['measured_ms']:8.2f} ms  error {r['error_pct']:+6.1f}% "
                          f"(noise +-{r['noise_pct']:.1f}%) "
                          f"(without cold starts {r['error_no_cold_pct']:+6.1f}%)  "
                          f"cores {r['core_slowdown']}  rounds {r['round_errors_pct']} "
                          f"({r['steady_rounds']} of {r['rounds']} steady)", flush=True)
    median, worst = median_worst(rows, "error_pct")
    warm_median, warm_worst = median_worst(rows, "error_no_cold_pct")
    summary = (f"\nmedian |error| {median:.1f}%, worst {worst:.1f}%; without cold starts median "
               f"{warm_median:.1f}%, worst {warm_worst:.1f}%\n")
    unsteady = [r for r in rows if not r["host_steady"]]
    if unsteady:
        summary += (f"{len(unsteady)} point(s) whose median round did not hold still (host speed drifted by "
                    f"more than {100 * args.max_drift:.0f}% across every run)\n")
    write_results(args.out, rows,
                  ["model", "schedule", "M", "predicted", "measured", "error", "noise band",
                   "without cold starts"],
                  lambda r: [r["model"], r["schedule"], str(r["M"]), f"{r['predicted_ms']} ms",
                             f"{r['measured_ms']} ms", f"{r['error_pct']:+.1f}%", f"+-{r['noise_pct']:.1f}%",
                             f"{r['error_no_cold_pct']:+.1f}%"],
                  summary)
    print(f"median |error| {median:.1f}%, worst {worst:.1f}% over {len(rows)} runs "
          f"(targets: median <= 5%, worst <= 10%); without cold starts median {warm_median:.1f}%, "
          f"worst {warm_worst:.1f}%")
    return 0 if median <= 5 and worst <= 10 else 3


if __name__ == "__main__":
    sys.exit(main())
