#!/usr/bin/env bash
# PipeTransformer live on this machine, and its replay: on this CPU machine K shrinks, replicas
# grow, the loss still falls; the run's freeze trace replayed by the simulator should predict its
# total time within 10%, and its accuracy should stay within a stated tolerance of the baseline's.
#
#   1. profile the model here (`pipetwin profile`, the micro-batch sizes the M candidates use),
#      and time Gloo's all-reduce between 2 processes (the link AutoDP's replicas use);
#   2. plan K = 2 stages over the 2 processes with AutoPipe's partition and
#      the M the simulator picks for the start, as the elastic policy would;
#   3. the live run: `pipetwin train --elastic --nproc 2` on the digits (one pipeline stage per
#      process, K = 2, dp = 1 at the start; Equation 1 on the measured gradient norms; AutoPipe
#      compresses K to 1 and AutoDP makes the two processes two replicas), twice: with AutoCache
#      (the default --autocache auto: the machine's cache of F_frozen outputs, shared by the two
#      processes, on once the cost model says reading beats the frozen forward pass) and without
#      (--autocache off);
#   4. its baseline: the same plan, no freezing (Pipe + DDP, PipeTransformer's baseline);
#   5. `pipetwin simulate --elastic` replaying each live run's freeze trace on the profile (with
#      the simulator's AutoCache for the first, --no-autocache for the second), and the same
#      no-freeze baseline;
# The cluster is local-cpu-2proc with its link calibrated in step 1. The script prints live
# against predicted training time (the time in training windows: the simulator models neither
# the per-epoch evaluation nor, with --transition-scale 0, the transitions, which are printed
# apart), the speedups, and the accuracies.
#
# Usage: experiments/elastic_live.sh [OUT_DIR]   (default results/elastic_live)
# Environment: PIPETWIN_BIN (default build/pipetwin), MODEL, EPOCHS, ALPHA, INTERVAL, LR, SEED.
# Timing wants a quiet machine: check `uptime` and run it more than once.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PIPETWIN_BIN:-build/pipetwin}
out=${1:-results/elastic_live}
model=${MODEL:-vit:tiny,image=8,patch=4,channels=1}
epochs=${EPOCHS:-12}
alpha=${ALPHA:-0.333}
interval=${INTERVAL:-3epoch}
lr=${LR:-0.0005}
seed=${SEED:-1}
batch=32  # per pipeline replica; PipeTransformer keeps it as replicas are added
cluster=local-cpu-2proc  # its link is calibrated below
mkdir -p "$out"

echo "== profile $model (load: $(cut -d' ' -f1-3 /proc/loadavg))"
"$bin" profile --model "$model" --micro-batch 4,8,16,32 -q -o "$out/profile.json"

# The link between the two processes, as the all-reduce sees it: the shipped loopback-tcp link
# (2 GB/s) is what a point-to-point send gets; Gloo's CPU ring all-reduce between two processes
# on two cores gets much less (it reduces on the same cores). Time one all-reduce bucket of three
# sizes (a data-parallel plan of one layer whose compute is negligible) and fit the cost model's
# ring all-reduce, 2 (n-1)/n bytes / bandwidth + 2 (n-1) latency with n = 2, by least squares.
echo "== calibrate the all-reduce between 2 processes"
for kb in 1024 4096 16384; do
  "$bin" plan --model "uniform:layers=1,fwd_ms=0.1,bwd_ms=0.1,act_kb=1,param_kb=$kb" \
    --cluster "$cluster" -K 1 --dp 2 -B 2 -M 1 -q -o "$out/allreduce.plan.json"
  "$bin" run --plan "$out/allreduce.plan.json" --nproc 2 --iterations 10 -q \
    --timeline "$out/allreduce-$kb.trace.json"
done
python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
def median_s(kb):
    t = json.load(open(f"{out}/allreduce-{kb}.trace.json"))
    events = t["traceEvents"] if isinstance(t, dict) else t
    return statistics.median(e["dur"] for e in events
                             if e.get("ph") == "X" and e["name"].startswith("AR")) / 1e6
points = [(kb * 1024, median_s(kb)) for kb in (1024, 4096, 16384)]
n = len(points)
mb, mt = sum(b for b, _ in points) / n, sum(t for _, t in points) / n
slope = sum((b - mb) * (t - mt) for b, t in points) / sum((b - mb) ** 2 for b, _ in points)
bandwidth = 1 / slope
latency = max(1e-5, (mt - mb * slope) / 2)
json.dump({"format": "pipetwin.cluster", "version": 1, "name": "local-cpu-2proc-measured",
           "description": "local-cpu-2proc with the all-reduce bandwidth measured here",
           "device": "cpu-core", "nodes": 1, "devices_per_node": 2,
           "intra_node_link": {"name": "gloo-allreduce-measured",
                               "description": "Gloo ring all-reduce, 2 processes: " +
                                              ", ".join(f"{b >> 20} MiB in {t * 1e3:.1f} ms"
                                                        for b, t in points),
                               "bandwidth": bandwidth, "latency": latency}},
          open(f"{out}/cluster.json", "w"), indent=2)
print(f"all-reduce: {bandwidth / 1e6:.0f} MB/s, latency {latency * 1e6:.0f} us")
PY
cluster="$out/cluster.json"

sim=("$bin" simulate --elastic --model "$model" --profile "$out/profile.json" --cluster "$cluster"
     -K 2 -B "$batch" --transition-scale 0 --no-state-transfer -q)
"${sim[@]}" --no-autocache --epochs 1 --samples 1408 --report "$out/start.json"
chunks=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['elastic']['transitions'][0]['chunks'])" "$out/start.json")
"$bin" plan --model "$model" --profile "$out/profile.json" --cluster "$cluster" -K 2 \
  --schedule gpipe -B "$batch" -M "$chunks" --partitioner autopipe -q -o "$out/plan.json"
echo "== plan: K=2, dp=1, M=$chunks (AutoPipe partition)"

train=("$bin" train --plan "$out/plan.json" --nproc 2 --data digits --epochs "$epochs"
       --optimizer adam --lr "$lr" --seed "$seed" --timeout 60)
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "== live elastic run with AutoCache (alpha $alpha, a freeze step every $interval; load: $(load))"
"${train[@]}" --elastic --alpha "$alpha" --freeze-interval "$interval" \
  --log "$out/live.jsonl" --epoch-log "$out/live.json" --freeze-trace "$out/trace.json"
echo "== live elastic run without AutoCache (load: $(load))"
"${train[@]}" --elastic --alpha "$alpha" --freeze-interval "$interval" --autocache off \
  --log "$out/live-nocache.jsonl" --epoch-log "$out/live-nocache.json" \
  --freeze-trace "$out/trace-nocache.json"
echo "== baseline run (same plan, no freezing; load: $(load))"
"${train[@]}" --log "$out/baseline.jsonl" --epoch-log "$out/baseline.json"

echo "== replays of the live runs' freeze traces (load: $(load))"
# The samples an epoch trains (the digits' training split less the remainder of the last step).
samples=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['epochs'][0]['samples'])" "$out/live.json")
"${sim[@]}" --epochs "$epochs" --samples "$samples" --freeze-trace "$out/trace.json" \
  --report "$out/replay.json" --log "$out/replay.csv"
"${sim[@]}" --no-autocache --epochs "$epochs" --samples "$samples" \
  --freeze-trace "$out/trace-nocache.json" --report "$out/replay-nocache.json" \
  --log "$out/replay-nocache.csv"

python3 - "$out" <<'EOF'
import csv, json, sys
out = sys.argv[1]
load = lambda name: json.load(open(f"{out}/{name}"))
base = load("baseline.json")
total = lambda log, key: sum(e[key] for e in log["epochs"])
err = lambda p, m: 100 * (p - m) / m
bt, pb = total(base, "compute_s"), load("replay.json")["baseline"]["total_s"]
lines = []
for title, name, replay in (("elastic + AutoCache", "live", "replay"),
                            ("elastic, no AutoCache", "live-nocache", "replay-nocache")):
    live, rep = load(f"{name}.json"), load(f"{replay}.json")
    sim_epochs = {int(r["epoch"]): r for r in csv.DictReader(open(f"{out}/{replay}.csv"))}
    lt, ltr, pt = total(live, "compute_s"), total(live, "transition_s"), rep["elastic"]["total_s"]
    lines += [f"== {title}",
              "epoch  K  dp  M  frozen  cache    live s  predicted s  hits  stale  misses  shared"
              "  live acc  baseline acc"]
    for e, b in zip(live["epochs"], base["epochs"]):
        s, c = sim_epochs[e["epoch"]], e.get("cache_stats") or {}
        lines.append(f"{e['epoch']:5d}  {e['K']}  {e['dp']:2d}  {e['chunks']}  {e['frozen_layers']:6d}"
                     f"  {'on ' if e['cache'] else 'off'}/{'on ' if int(s['cache']) else 'off'}"
                     f"  {e['compute_s']:6.2f}  {float(s['compute_s']):11.2f}"
                     f"  {c.get('hits', 0):4d}  {c.get('stale', 0):5d}  {c.get('misses', 0):6d}"
                     f"  {c.get('shared_reads', 0):6d}  {e['accuracy']:8.4f}  {b['accuracy']:12.4f}")
    same = all(int(sim_epochs[e["epoch"]][k]) == int(e[k]) for e in live["epochs"]
               for k in ("K", "dp", "chunks", "frozen_layers", "cache"))
    acc_l, acc_b = live["epochs"][-1]["accuracy"], base["epochs"][-1]["accuracy"]
    best_l = max(e["accuracy"] for e in live["epochs"])
    best_b = max(e["accuracy"] for e in base["epochs"])
    lines += [
        "(cache: live/replayed; hits, stale, misses, shared: the live run's cache per epoch)",
        f"replay re-planned as the live run did (K, dp, M, frozen, cache per epoch): "
        f"{'yes' if same else 'NO'}",
        f"training time: live {lt:.2f} s, predicted {pt:.2f} s ({err(pt, lt):+.1f}%)"
        f"; transitions {ltr:.2f} s more",
        f"speedup: live {bt / lt:.2f}x (with transitions {bt / (lt + ltr):.2f}x), predicted"
        f" {rep['speedup']:.2f}x",
        f"held-out accuracy after {len(live['epochs'])} epochs: {acc_l:.4f}, baseline"
        f" {acc_b:.4f} ({100 * (acc_l - acc_b):+.1f} points); best epoch: {best_l:.4f},"
        f" baseline {best_b:.4f} ({100 * (best_l - best_b):+.1f} points)",
        ""]
cached, plain = total(load("live.json"), "compute_s"), total(load("live-nocache.json"), "compute_s")
pc = load("replay.json")["elastic"]["total_s"]
pn = load("replay-nocache.json")["elastic"]["total_s"]
lines += [
    f"baseline training time: live {bt:.2f} s, predicted {pb:.2f} s ({err(pb, bt):+.1f}%)",
    f"AutoCache: live {plain / cached:.3f}x over no cache ({plain:.2f} -> {cached:.2f} s),"
    f" predicted {pn / pc:.3f}x ({pn:.2f} -> {pc:.2f} s)",
]
text = "\n".join(lines)
print(text)
open(f"{out}/summary.txt", "w").write(text + "\n")
EOF
