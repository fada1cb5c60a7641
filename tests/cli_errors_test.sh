#!/usr/bin/env bash
# The CLI as users meet it: bad input is one line naming the file and the field, exit code 2,
# and no output file is left behind. Usage: cli_errors_test.sh PIPETWIN SOURCE_DIR
set -u
bin=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect_error <expected substring> <command...>: exit 2, exactly one line on stderr.
expect_error() {
  local want=$1
  shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  local lines
  lines=$(wc -l <"$tmp/err")
  if [[ $rc -ne 2 ]] || [[ $lines -ne 1 ]] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL: $* -> rc=$rc, stderr:"
    cat "$tmp/err"
    echo "  (wanted one line containing: $want)"
    fail=1
  fi
}

model='uniform:layers=4,fwd_ms=1,bwd_ms=2,act_kb=16'
"$bin" plan --model "$model" --cluster local-cpu-2 -K 2 -B 8 -M 4 -o "$tmp/plan.json" -q || { echo "FAIL: plan"; exit 1; }
"$bin" simulate --plan "$tmp/plan.json" -q --metrics "$tmp/m.json" --timeline "$tmp/t.json" || { echo "FAIL: simulate"; exit 1; }

# Broken plan files: each names the file and the field.
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
p = json.load(open(f"{d}/plan.json"))
def write(name, mutate):
    q = json.loads(json.dumps(p)); mutate(q); json.dump(q, open(f"{d}/{name}", "w"))
write("bad_chunks.json", lambda q: q.update(chunks=3))
write("bad_layer.json", lambda q: q["stages"][1]["layers"].append(0))
write("bad_time.json", lambda q: q["profile"]["layers"][2]["timings"][0].update(forward_s=-1))
write("bad_schedule.json", lambda q: q.update(schedule="zigzag"))
write("bad_link.json", lambda q: q["cluster"]["intra_node_link"].update(bandwidth="fast"))
write("bad_format.json", lambda q: q.update(format="pipetwin.profile"))
open(f"{d}/truncated.json", "w").write(json.dumps(p)[:200])
PY
# compare: a metrics file among timelines names the file.
expect_error "not one of each ($tmp/m.json)" "$bin" compare "$tmp/t.json" "$tmp/t.json" "$tmp/m.json"
expect_error "bad_chunks.json: batch_size: 8 is not divisible by dp x chunks = 1 x 3" "$bin" simulate --plan "$tmp/bad_chunks.json"
expect_error "bad_layer.json: stages[1].layers: layer 0 already in stage 0" "$bin" simulate --plan "$tmp/bad_layer.json"
expect_error "bad_time.json: profile.layers[2].timings[0].forward_s: expected a non-negative number" "$bin" simulate --plan "$tmp/bad_time.json"
expect_error "bad_schedule.json: schedule: unknown schedule \"zigzag\"" "$bin" simulate --plan "$tmp/bad_schedule.json"
expect_error "bad_link.json: cluster.intra_node_link.bandwidth: expected a positive number" "$bin" simulate --plan "$tmp/bad_link.json"
expect_error "bad_format.json: format: expected \"pipetwin.plan\"" "$bin" simulate --plan "$tmp/bad_format.json"
# Tensor parallelism: the split the model cannot take, sequence parallelism without it, a group
# across nodes, a plan whose profile is not the shard it says.
expect_error "--tp: gpt2:1.5b: 25 attention heads of layer \"block0.attn\" are not divisible by the tensor-parallel size 2" "$bin" plan --model gpt2:1.5b --cluster dgx-h100 --tp 2 -K 2 -B 8 -o "$tmp/tp.json"
expect_error "--sequence-parallel needs --tp > 1" "$bin" plan --model gpt2:tiny --cluster dgx-h100 --sequence-parallel -o "$tmp/tp.json"
expect_error "--tp 3 does not divide the 8 devices of a node of \"hgx-h200-2node\"" "$bin" plan --model gpt2:tiny,dim=192,heads=6,vocab=1152 --cluster hgx-h200-2node --tp 3 -K 3 -B 6 -o "$tmp/tp.json"
expect_error "truncated.json:1:" "$bin" simulate --plan "$tmp/truncated.json"
expect_error "missing.json: cannot open" "$bin" simulate --plan "$tmp/missing.json"

# A plan priced by a profile of the same model measured again (twice as slow): simulate takes it
# and predicts a longer iteration; compare shows both predictions' range beside the runs'. A
# profile of another model is refused.
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
prof = json.load(open(f"{d}/plan.json"))["profile"]
for layer in prof["layers"]:
    for t in layer["timings"]:
        for k in ("forward_s", "backward_s"):
            t[k] *= 2
json.dump(prof, open(f"{d}/slow.profile.json", "w"))
prof["model"] = "uniform:layers=4"
json.dump(prof, open(f"{d}/other.profile.json", "w"))
PY
"$bin" simulate --plan "$tmp/plan.json" --profile "$tmp/slow.profile.json" -q --metrics "$tmp/m2.json" --timeline "$tmp/t2.json" || { echo "FAIL: simulate --profile"; fail=1; }
python3 -c "
import json, sys
a, b = (json.load(open(f))['iteration_time_s'] for f in sys.argv[1:])
sys.exit(0 if 1.5 * a < b < 2.5 * a else 1)" "$tmp/m.json" "$tmp/m2.json" || { echo "FAIL: a twice-as-slow profile did not slow the prediction"; fail=1; }
"$bin" compare "$tmp/t.json" "$tmp/t2.json" "$tmp/t.json" --also-predicted "$tmp/t2.json" >"$tmp/cmp.txt" || { echo "FAIL: compare --also-predicted"; fail=1; }
grep -qF "2 predictions from profiles measured at different times" "$tmp/cmp.txt" && grep -qF "within the noise: the two ranges overlap" "$tmp/cmp.txt" || { echo "FAIL: compare --also-predicted output:"; cat "$tmp/cmp.txt"; fail=1; }
expect_error "other.profile.json: model: a profile of uniform:layers=4 (4 layers), but the plan's profile is of" "$bin" simulate --plan "$tmp/plan.json" --profile "$tmp/other.profile.json"

# Bad flags and names.
expect_error "--chunks: expected a positive integer or auto" "$bin" plan --model "$model" -K 2 -B 8 -M x -o "$tmp/x.json"
# plan and sweep read -M with one parser, so with one message.
expect_error "--chunks must be positive (0 < 1)" "$bin" plan --model "$model" -K 2 -B 8 -M 0 -o "$tmp/x.json"
expect_error "--chunks must be positive (0 < 1)" "$bin" sweep --model "$model" --grid stages=2 -M 0 -o "$tmp/x.csv"
expect_error "--dtype: unknown dtype \"float8\" (known: float32, tfloat32, float16, bfloat16, float64)" "$bin" plan --model "$model" -K 2 -B 8 --dtype float8 -o "$tmp/x.json"
expect_error "--optimizer: unknown optimizer \"lamb\" (known: sgd, momentum, adam)" "$bin" plan --model "$model" -K 2 -B 8 --optimizer lamb -o "$tmp/x.json"
expect_error "--dtype: unknown dtype \"int4\"" "$bin" sweep --model "$model" --grid 'stages=1,2' --dtype int4 -o "$tmp/x.csv"
expect_error "--grid: dtype: unknown value \"fp8\"" "$bin" sweep --model "$model" --grid 'dtype=fp8' -o "$tmp/x.csv"
expect_error "--dtype: unknown dtype \"half\"" "$bin" capacity --model "$model" -B 8 --samples 100 --dtype half
expect_error "mlp.profile.json: dtype: the profile was measured in float32, not bfloat16 (--dtype)" "$bin" plan --profile "$src/traces/cpu-core/mlp.profile.json" -K 2 -B 8 --dtype bfloat16 -o "$tmp/x.json"
expect_error "unknown partitioner \"magic\"" "$bin" plan --model "$model" -K 2 -B 8 --partitioner magic -o "$tmp/x.json"
expect_error "unknown option \"speed\" for model uniform" "$bin" plan --model "uniform:speed=3" -K 2 -B 8 -o "$tmp/x.json"
expect_error "--cluster: \"moon\" is neither a file nor a cluster" "$bin" plan --model "$model" --cluster moon -K 2 -B 8 -o "$tmp/x.json"
expect_error "plan does not fit: device 0" "$bin" plan --model "uniform:layers=2,param_kb=40000000" --cluster local-cpu-2 -K 2 -B 2 -M 1 -o "$tmp/x.json"
[[ -e "$tmp/x.json" ]] && { echo "FAIL: a refused plan left $tmp/x.json behind"; fail=1; }

# A broken schedule file is an error naming the file and the action.
"$bin" schedule --plan "$tmp/plan.json" -o "$tmp/s.json" >/dev/null || { echo "FAIL: schedule"; exit 1; }
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(f"{d}/s.json"))
s["devices"][1] = [a for a in s["devices"][1] if not (a["op"] == "backward" and a.get("mb") == 2)]
json.dump(s, open(f"{d}/s_bad.json", "w"))
PY
expect_error "s_bad.json: device 1: stage 1 micro-batch 2 is never backwarded" "$bin" simulate --plan "$tmp/plan.json" --schedule-file "$tmp/s_bad.json"

# Sweeps: bad grid specs and unknown fields are one line naming the field; no CSV is left behind.
sw() { "$bin" sweep --model "$model" -o "$tmp/sw.csv" "$@"; }
expect_error "--grid: unknown field \"speed\" (known: model, cluster, stages" sw --grid 'speed=1,2'
expect_error "--grid: chunks: bad range \"32:4:4\" (stop 4 is below start 32)" sw --grid 'chunks=32:4:4'
expect_error "--grid: stages: 0 is out of range 1..1000000" sw --grid 'stages=0,1'
expect_error "--grid: stages: expected an integer, got \"two\"" sw --grid 'stages=1,two'
expect_error "--grid: schedule: unknown value \"zigzag\"" sw --grid 'schedule=gpipe,zigzag'
expect_error "--grid: empty grid" sw --grid ' ; '
expect_error "--grid: cluster: unknown cluster \"moon\"" sw --grid 'cluster=local-cpu-2,moon'
expect_error "--shard: index 2 is out of range 0..1 for 2 shards" sw --grid 'stages=1,2' --shard 2/2
[[ -e "$tmp/sw.csv" ]] && { echo "FAIL: a refused sweep left $tmp/sw.csv behind"; fail=1; }
# An interrupted sweep (SIGTERM; Ctrl-C is SIGINT) keeps every finished row and resumes to the
# bytes of an uninterrupted run; a file of another grid is refused; shards merge to the same bytes.
big=(--model 'uniform:layers=12,fwd_ms=1,act_kb=64' --cluster pipetransformer-2x8-rtx5000 -B 24 --iterations 80 -j 2 -q
     --grid 'stages=1,2,3,4,6,12;chunks=1,2,3,4,6,8,12,24;schedule=gpipe,1f1b,pipedream')
"$bin" sweep "${big[@]}" -o "$tmp/whole.csv" || { echo "FAIL: sweep"; fail=1; }
"$bin" sweep "${big[@]}" -o "$tmp/cut.csv" 2>/dev/null & pid=$!
sleep 0.5; kill -TERM $pid; wait $pid; rc=$?
[[ $rc -eq 143 || $rc -eq 0 ]] || { echo "FAIL: interrupted sweep exited $rc"; fail=1; }
"$bin" sweep "${big[@]}" -o "$tmp/cut.csv" || { echo "FAIL: resumed sweep"; fail=1; }
cmp -s "$tmp/whole.csv" "$tmp/cut.csv" || { echo "FAIL: resumed sweep differs from a whole run"; fail=1; }
expect_error "cut.csv: header does not match this sweep's grid" "$bin" sweep --model "$model" --grid 'chunks=1;stages=1' -o "$tmp/cut.csv"
for i in 0 1 2; do "$bin" sweep "${big[@]}" --shard $i/3 -o "$tmp/shard$i.csv" || fail=1; done
"$bin" sweep merge "$tmp"/shard{0,1,2}.csv -o "$tmp/merged.csv" -q || { echo "FAIL: merge"; fail=1; }
cmp -s "$tmp/whole.csv" "$tmp/merged.csv" || { echo "FAIL: merged shards differ from a whole run"; fail=1; }
expect_error "sweep merge: 48 of 144 points missing (first: point 1)" "$bin" sweep merge "$tmp"/shard{0,2}.csv -o "$tmp/m.csv"
# Capacity: impossible catalogs and requests.
printf '{"format": "pipetwin.prices", "version": 1, "prices": [{"cluster": "l4-8x", "price_per_gpu_hour": -2}]}' >"$tmp/prices.json"
expect_error "prices.json: prices[0].price_per_gpu_hour: expected a positive number" "$bin" capacity --model "$model" -B 8 --samples 800 --prices "$tmp/prices.json"
expect_error "--clusters: cluster \"local-cpu-2\" has no price" "$bin" capacity --model "$model" -B 8 --samples 800 --clusters local-cpu-2
expect_error "--batch must be positive (0 given)" "$bin" capacity --model "$model" -B 0 --samples 800
"$bin" capacity --model "$model" -B 8 --samples 800 --clusters l4-8x,dgx-h100 -o "$tmp/cap" -q || { echo "FAIL: capacity"; fail=1; }
[[ -s "$tmp/cap/capacity.csv" && -s "$tmp/cap/plans/l4-8x.fastest.plan.json" ]] || { echo "FAIL: capacity outputs"; fail=1; }
"$bin" simulate --plan "$tmp/cap/plans/l4-8x.cheapest.plan.json" -q || { echo "FAIL: capacity plan does not simulate"; fail=1; }
for verb in sweep capacity; do "$bin" "$verb" --help >/dev/null || { echo "FAIL: $verb --help"; fail=1; }; done

# Help works for every verb.
for verb in plan simulate schedule; do
  "$bin" "$verb" --help >/dev/null || { echo "FAIL: $verb --help"; fail=1; }
done

[[ $fail -eq 0 ]] && echo "cli errors: all good"
exit $fail
