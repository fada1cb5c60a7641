#!/usr/bin/python3
"""Summarises a tensor-parallel what-if sweep (experiments/tp_whatif.sh): per tensor-parallel size
t, the fastest plan that fits (K, dp, sequence parallelism, distributed optimizer, M, iteration
time, peak memory), and the fastest overall. Standard library only.

Usage: tp_whatif_summary.py SWEEP.csv [SWEEP.csv ...]   (the sweeps of one model and cluster)
"""
import csv
import sys


def main(paths):
    rows = []
    for path in paths:
        if path.endswith(".best.csv"):
            continue
        with open(path, newline="") as f:
            rows += [r for r in csv.DictReader(f)]
    fits = [r for r in rows if r.get("fits") == "yes" and r.get("iteration_time_s")]
    first = rows[0] if rows else {}
    print(f"{first.get('model', '?')} on {first.get('cluster', '?')}: {len(rows)} points, "
          f"{len(fits)} fit")
    best = {}
    for r in fits:
        t = int(r["tp"])
        if t not in best or float(r["iteration_time_s"]) < float(best[t]["iteration_time_s"]):
            best[t] = r
    print("   t   K  dp  seq.par  dist.opt    M   iteration   peak memory")
    for t in sorted(best):
        r = best[t]
        print(f"{t:4d} {int(r['stages']):3d} {int(r['dp']):3d}  {r['sequence_parallel']:>7}  "
              f"{r['distributed_optimizer']:>8} {int(r['plan_M']):4d}  "
              f"{float(r['iteration_time_s']):8.3f} s  "
              f"{float(r['peak_memory_max_bytes']) / 2**30:9.2f} GiB")
    if best:
        top = min(best.values(), key=lambda r: float(r["iteration_time_s"]))
        print(f"fastest: t={top['tp']} K={top['stages']} dp={top['dp']} "
              f"({float(top['iteration_time_s']):.3f} s an iteration)")
    print()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: tp_whatif_summary.py SWEEP.csv [SWEEP.csv ...]")
    main(sys.argv[1:])
