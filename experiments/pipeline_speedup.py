#!/usr/bin/env python3
"""GPipe's speedup and checkpointing's memory saving on this machine.

Speed: the same model run sequentially (K=1, M micro-batches on one core) and as a K=2 GPipe
pipeline with M micro-batches on two cores; the measured speedup T(K=1) / T(K=2) against the
theoretical K M / (M + K - 1) (torchgpipe, Section 3.2: (M + K - 1) clock cycles of which M are
needed per stage) and against the simulator's prediction from a profile taken right before
(which knows the cores' speeds and how much they slow each other). Two models: the synthetic
`uniform` model, whose layers spin for fixed times (a perfectly balanced pipeline: what is lost
is the executor's own overhead), and ViT-tiny (real compute, split by balance-time).

Memory: GPipe K=2, M=8 with and without checkpointing (torchgpipe: all micro-batches but the
last): peak activation memory per device, i.e. peak memory minus parameters, gradients and
optimizer state, measured by the executor's counting allocator and predicted by the cost model.

Usage: experiments/pipeline_speedup.py [--pipetwin build/pipetwin] [--out DIR]
Writes DIR/speedup.md and prints it.
"""
import json
import os
import sys
import tempfile

from runcmd import arg_parser, sh


def load(path):
    with open(path) as f:
        return json.load(f)


class Runner:
    def __init__(self, args, tmp):
        self.args, self.tmp = args, tmp

    def path(self, name):
        return os.path.join(self.tmp, name)

    def profile(self, model, b):
        out = self.path("profile.json")
        if model.startswith("uniform:"):
            return []  # the synthetic model's profile is exact; plan builds it from the spec
        sh(self.args.pipetwin, "profile", "--model", model, "--micro-batch", str(b), "-q", "-o", out)
        return ["--profile", out]

    def plan(self, model, prof, K, M, extra=()):
        out = self.path("plan.json")
        sh(self.args.pipetwin, "plan", "--model", model, *prof, "--cluster", "local-cpu-2", "-K", str(K),
           "--schedule", "gpipe", "-B", str(self.args.batch), "-M", str(M), "--partitioner", "balance-time",
           "--iterations", str(self.args.iterations), "-q", "-o", out, *extra)
        return out

    def both(self, plan):
        pred, meas = self.path("sim.json"), self.path("run.json")
        sh(self.args.pipetwin, "simulate", "--plan", plan, "-q", "--metrics", pred)
        sh(self.args.pipetwin, "run", "--plan", plan, "-q", "--metrics", meas)
        return load(pred), load(meas)


def speed_rows(r, models, M):
    rows = []
    b = r.args.batch // M
    for model in models:
        prof = r.profile(model, b)
        p1, m1 = r.both(r.plan(model, prof, 1, M))
        p2, m2 = r.both(r.plan(model, prof, 2, M))
        theory = 2 * M / (M + 1)
        # measured: median steps (robust to the host's occasional stalls); predicted: steady state
        t1, t2 = m1["iteration_time_median_s"], m2["iteration_time_median_s"]
        predicted = p1["iteration_time_s"] / p2["iteration_time_s"]
        rows.append((model, t1, t2, t1 / t2, theory, predicted))
    return rows


def static_bytes(plan_path):
    plan = load(plan_path)
    layers = plan["profile"]["layers"]
    return [sum(2 * layers[l].get("param_bytes", 0) + layers[l].get("optimizer_bytes", 0) for l in s["layers"])
            for s in plan["stages"]]


def memory_rows(r, model, M):
    prof = r.profile(model, r.args.batch // M)
    rows = []
    for mode in ("none", "except_last"):
        plan = r.plan(model, prof, 2, M, ("--checkpoint-mode", mode))
        static = static_bytes(plan)
        pred, meas = r.both(plan)
        act = lambda m: [d["peak_memory_bytes"] - s for d, s in zip(m["devices"], static)]
        rows.append((mode, act(pred), act(meas)))
    return rows


def mib(x):
    return f"{x / 2**20:.1f} MiB"


def main():
    ap = arg_parser(__doc__)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--models", default="uniform:layers=8,fwd_ms=2,bwd_ms=4,act_kb=64,param_kb=64;vit:tiny",
                    help="models separated by ';' (a uniform: spec contains commas)")
    ap.add_argument("--memory-model", default="vit:tiny")
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(here, "results"))
    args = ap.parse_args()
    models = args.models.split(";")
    lines = [f"GPipe speedup, K=2 vs K=1, M={args.chunks}, batch {args.batch}",
             "", "| model | K=1 | K=2 | speedup | theory K M/(M+K-1) | of theory | predicted speedup |",
             "|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        r = Runner(args, tmp)
        for model, t1, t2, s, th, ps in speed_rows(r, models, args.chunks):
            lines.append(f"| {model} | {t1 * 1e3:.1f} ms | {t2 * 1e3:.1f} ms | {s:.3f} | {th:.3f} | "
                         f"{s / th:.3f} | {ps:.3f} |")
        mem = memory_rows(r, args.memory_model, args.chunks)
    lines += ["", f"Peak activation memory, {args.memory_model}, GPipe K=2 M={args.chunks} (per device)", "",
              "| checkpointing | predicted | measured |", "|---|---|---|"]
    for mode, pred, meas in mem:
        lines.append(f"| {mode} | {' / '.join(map(mib, pred))} | {' / '.join(map(mib, meas))} |")
    (_, p0, m0), (_, p1, m1) = mem
    lines.append("")
    lines.append("reduction (none / except_last): predicted " +
                 " / ".join(f"{a / b:.2f}x" for a, b in zip(p0, p1)) + ", measured " +
                 " / ".join(f"{a / b:.2f}x" for a, b in zip(m0, m1)))
    text = "\n".join(lines) + "\n"
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "speedup.md"), "w") as f:
        f.write(text)
    print(text, end="")


if __name__ == "__main__":
    main()
