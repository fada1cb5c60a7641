#!/usr/bin/env python3
"""PipeTransformer what-if: the freeze rate alpha and the chunk count M per K.

Setting: the paper's (`pipetwin reproduce pipetransformer`): ViT-B/16 on 2 nodes x 8 Quadro RTX
5000, 400 samples per pipeline per step, 10 epochs of ImageNet (1,281,167 samples), PyTorch Pipe's
default checkpointing (except_last), K = 8 per node at the start. Change it with the options.

1. Alpha sweep, with `pipetwin sweep --grid alpha=...` (every point a whole elastic run and its
   Pipe + DDP baseline): speedup, total time, and where the run ends (frozen layers, K, replicas).
   For each alpha, `pipetwin simulate --elastic --log` gives the frozen-layer curve per epoch
   (with K, replicas, M and throughput), next to Equation 3's bound L (1 - (1 - alpha)^T). Both
   paths run the same simulation; the script checks that their speedups agree.
2. Chunk sweep per K:
   a. at the states the alpha = 1/3 run reaches (its transitions' "chunk_times" in the
      `simulate --elastic --report` JSON: the Pipe's iteration for every M in [K, 6K] dividing
      the batch, what AutoPipe's get_optimal_chunks compares; F_frozen, run before the Pipe or
      read from AutoCache, does not depend on M);
   b. with `pipetwin sweep --grid chunks=1:6K` on the unfrozen model at K = 1, 2, 4, 8 with
      16 / K replicas (the plain Pipe + DDP pipeline; points that do not fit 16 GB are marked).

Usage: experiments/pipetransformer_whatif.py [--pipetwin build/pipetwin] [--out DIR]
           [--model vit:b16] [--batch 400] [--epochs 10] [--samples 1281167]
           [--alphas 0,0.1,...]
Writes DIR/alpha_speedup.csv, DIR/alpha_frozen_curve.csv, DIR/chunks_elastic.csv,
DIR/chunks_plain.csv, DIR/alpha_sweep.png, DIR/chunk_sweep.png, DIR/README.md (and the raw sweep
CSVs), and prints the README.
"""
import argparse
import csv
import json
import os
import shutil
import sys

from runcmd import sh

CLUSTER = "pipetransformer-2x8-rtx5000"
NODES, PER_NODE = 2, 8


def find_pipetwin(given):
    if given:
        return given
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in (os.path.join(here, "..", "build", "pipetwin"), shutil.which("pipetwin")):
        if cand and os.path.exists(cand):
            return cand
    sys.exit("pipetransformer_whatif: no pipetwin binary; pass --pipetwin")


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def parse_alpha(text):
    return 1 / 3 if text.strip() in ("1/3", "0.333") else float(text)


def common(a):
    return ["--model", a.model, "--cluster", CLUSTER, "--checkpoint-mode", "except_last"]


def alpha_sweep(a, out):
    raw = os.path.join(out, "alpha_sweep_raw.csv")
    if os.path.exists(raw):
        os.remove(raw)  # `pipetwin sweep` resumes an existing file
    grid = "alpha=" + ",".join(repr(x) for x in a.alphas)
    sh(a.pipetwin, "sweep", *common(a), "-K", PER_NODE, "--dp", NODES, "-B", NODES * a.batch,
       "--partitioner", "autopipe", "--grid", grid, "--samples", a.samples, "--epochs", a.epochs,
       "-q", "-o", raw)
    rows = []
    for r in read_csv(raw):
        if r["error"]:
            sys.exit(f"pipetransformer_whatif: alpha {r['alpha']}: {r['error']}")
        rows.append([float(r["alpha"]), float(r["speedup"]), float(r["elastic_total_s"]) / 3600,
                     float(r["baseline_total_s"]) / 3600, int(r["final_frozen"]), int(r["final_K"]),
                     int(r["final_dp"])])
    write_csv(os.path.join(out, "alpha_speedup.csv"),
              ["alpha", "speedup", "total_h", "baseline_h", "final_frozen", "final_K", "final_dp"],
              rows)
    return rows


def layers_of(report):
    return max([t["frozen_layers"] for t in report["elastic"]["transitions"]] + [0])


def alpha_curves(a, out, sweep_rows):
    """Per alpha: simulate --elastic with its epoch log and report."""
    rows, reports = [], {}
    log = os.path.join(out, "tmp_log.csv")
    rep = os.path.join(out, "tmp_report.json")
    for alpha, speedup, *_ in sweep_rows:
        if alpha == 0:
            continue  # the baseline: nothing freezes
        sh(a.pipetwin, "simulate", "--elastic", *common(a), "--batch", a.batch, "--epochs",
           a.epochs, "--samples", a.samples, "--alpha", repr(alpha), "--log", log, "--report", rep,
           "-q")
        with open(rep) as f:
            report = json.load(f)
        reports[alpha] = report
        if abs(report["speedup"] - speedup) > 1e-6 * speedup:
            sys.exit(f"pipetransformer_whatif: alpha {alpha}: sweep says {speedup}, "
                     f"simulate --elastic says {report['speedup']}")
        L = report["layers"]
        for e in read_csv(log):
            T = int(e["epoch"])  # epoch T trains with T freeze steps applied (one per epoch)
            rows.append([alpha, T, int(e["frozen_layers"]), L * (1 - (1 - alpha) ** T),
                         int(e["K"]), int(e["dp"]),
                         int(e["chunks"]), int(e["cache"]), float(e["time_s"]),
                         float(e["throughput_samples_per_s"])])
    for tmp in (log, rep):
        if os.path.exists(tmp):
            os.remove(tmp)
    write_csv(os.path.join(out, "alpha_frozen_curve.csv"),
              ["alpha", "epoch", "frozen_layers", "eq3_bound", "K", "dp", "M", "cache", "epoch_time_s",
               "throughput_samples_per_s"], rows)
    return rows, reports


def chunks_elastic(a, out, report):
    """The first state of each K the run reaches, as Figure 10(b) profiles it."""
    rows, seen = [], set()
    for t in report["elastic"]["transitions"]:
        times = t.get("chunk_times", [])
        if t["K"] in seen or not times:
            continue
        seen.add(t["K"])
        best = min(times, key=lambda c: c["iteration_s"])["chunks"]
        for c in times:
            rows.append([t["K"], t["frozen_layers"], t["dp"], c["chunks"], c["iteration_s"],
                         t["dp"] * a.batch / c["iteration_s"], int(c["chunks"] == best)])
    write_csv(os.path.join(out, "chunks_elastic.csv"),
              ["K", "frozen_layers", "dp", "M", "pipe_iteration_s", "throughput_samples_per_s",
               "optimal"], rows)
    return rows


def chunks_plain(a, out):
    rows = []
    for K in (1, 2, 4, 8):
        dp = NODES * PER_NODE // K
        raw = os.path.join(out, f"chunks_plain_K{K}_raw.csv")
        if os.path.exists(raw):
            os.remove(raw)
        sh(a.pipetwin, "sweep", *common(a), "-K", K, "--dp", dp, "-B", dp * a.batch,
           "--partitioner", "autopipe", "--grid", f"chunks=1:{6 * K}", "-q", "-o", raw)
        good = [r for r in read_csv(raw) if not r["error"]]
        fit = [r for r in good if r["fits"] == "yes"]
        best = max(fit, key=lambda r: float(r["throughput_samples_per_s"]))["chunks"] if fit else None
        for r in good:
            rows.append([K, dp, int(r["chunks"]), float(r["throughput_samples_per_s"]),
                         r["fits"], int(r["chunks"] == best)])
    write_csv(os.path.join(out, "chunks_plain.csv"),
              ["K", "dp", "M", "throughput_samples_per_s", "fits", "optimal"], rows)
    return rows


def plot(out, a, speed, curve, elastic, plain):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"pipetransformer_whatif: {sys.executable} has no matplotlib (Debian: "
              "python3-matplotlib, for /usr/bin/python3): CSVs written, no PNGs", file=sys.stderr)
        return

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax1.plot([r[0] for r in speed], [r[1] for r in speed], "o-")
    ax1.axhline(1, color="grey", lw=0.8)
    ax1.set(xlabel="alpha", ylabel="speedup over Pipe + DDP",
            title=f"{a.model}: speedup per alpha")
    for alpha in sorted({r[0] for r in curve}):
        if alpha == 0:
            continue
        pts = [r for r in curve if r[0] == alpha]
        line, = ax2.step([r[1] for r in pts], [r[2] for r in pts], where="post",
                         label=f"alpha={alpha:.3g}")
        ax2.plot([r[1] for r in pts], [r[3] for r in pts], ":", color=line.get_color(), lw=0.8)
    ax2.set(xlabel="epoch", ylabel="frozen layers at the epoch's end",
            title="frozen layers per epoch (dotted: Equation 3)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "alpha_sweep.png"), dpi=120)
    plt.close(fig)

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for K in sorted({r[0] for r in elastic}, reverse=True):
        pts = [r for r in elastic if r[0] == K]
        ax1.plot([r[3] for r in pts], [r[5] for r in pts], "o-",
                 label=f"K={K} ({pts[0][1]} frozen, {pts[0][2]} replicas)")
        for r in pts:
            if r[6]:
                ax1.plot(r[3], r[5], "k*", ms=12)
    ax1.set(xscale="log", yscale="log", xlabel="M (micro-batches)",
            ylabel="Pipe throughput (samples/s)",
            title="states of the alpha = 1/3 run (* optimal)")
    ax1.legend(fontsize=7)
    for K in (8, 4, 2, 1):
        pts = [r for r in plain if r[0] == K]
        if not pts:
            continue
        line, = ax2.plot([r[2] for r in pts], [r[3] for r in pts], "-", label=f"K={K}, dp={pts[0][1]}")
        fits = [r for r in pts if r[4] == "yes"]
        ax2.plot([r[2] for r in fits], [r[3] for r in fits], "o", color=line.get_color())
        over = [r for r in pts if r[4] != "yes"]
        ax2.plot([r[2] for r in over], [r[3] for r in over], "x", color=line.get_color())
    ax2.set(xscale="log", xlabel="M (micro-batches)", ylabel="throughput (samples/s)",
            title="no freezing, 16 GPUs (x: does not fit 16 GB)")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "chunk_sweep.png"), dpi=120)
    plt.close(fig)


def readme(a, speed, elastic, plain):
    lines = [f"# PipeTransformer what-if: {a.model}, batch {a.batch} per pipeline, {a.epochs} epochs "
             f"of {a.samples} samples, {CLUSTER}", "",
             "## Alpha sweep (alpha_speedup.csv, alpha_frozen_curve.csv, alpha_sweep.png)", "",
             "| alpha | speedup | total (h) | baseline (h) | final frozen | final K | final dp |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in speed:
        lines.append(f"| {r[0]:.3g} | {r[1]:.2f}x | {r[2]:.2f} | {r[3]:.2f} | {r[4]} | {r[5]} | {r[6]} |")
    lines += ["", "## Optimal M per K (chunks_elastic.csv, chunks_plain.csv, chunk_sweep.png)", "",
              "| K | state | optimal M | M candidates | best throughput (samples/s) |",
              "| --- | --- | --- | --- | --- |"]
    for K in sorted({r[0] for r in elastic}, reverse=True):
        pts = [r for r in elastic if r[0] == K]
        best = [r for r in pts if r[6]][0]
        lines.append(f"| {K} | alpha = 1/3 run, {best[1]} frozen, {best[2]} replicas | {best[3]} | "
                     f"{','.join(str(r[3]) for r in pts)} | {best[5]:.0f} |")
    for K in (8, 4, 2, 1):
        pts = [r for r in plain if r[0] == K]
        best = [r for r in pts if r[5]]
        lines.append(f"| {K} | no freezing, {pts[0][1]} replicas | "
                     f"{best[0][2] if best else 'none fits'} | {','.join(str(r[2]) for r in pts)} | "
                     f"{best[0][3] if best else max(r[3] for r in pts):.0f} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pipetwin", default="")
    p.add_argument("--out", default="results/pipetransformer_whatif")
    p.add_argument("--model", default="vit:b16")
    p.add_argument("--batch", type=int, default=400, help="samples per pipeline per step")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--samples", type=int, default=1281167, help="samples per epoch")
    p.add_argument("--alphas", default="0,0.1,0.15,0.2,0.25,1/3,0.4,0.5,0.6")
    a = p.parse_args()
    a.pipetwin = find_pipetwin(a.pipetwin)
    a.alphas = [parse_alpha(x) for x in a.alphas.split(",")]
    os.makedirs(a.out, exist_ok=True)
    speed = alpha_sweep(a, a.out)
    curve, reports = alpha_curves(a, a.out, speed)
    third = min(reports, key=lambda x: abs(x - 1 / 3))
    elastic = chunks_elastic(a, a.out, reports[third])
    plain = chunks_plain(a, a.out)
    plot(a.out, a, speed, curve, elastic, plain)
    text = readme(a, speed, elastic, plain)
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
