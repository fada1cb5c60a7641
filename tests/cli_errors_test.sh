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
expect_error "bad_chunks.json: batch_size: 8 is not divisible by dp x chunks = 1 x 3" "$bin" simulate --plan "$tmp/bad_chunks.json"
expect_error "bad_layer.json: stages[1].layers: layer 0 already in stage 0" "$bin" simulate --plan "$tmp/bad_layer.json"
expect_error "bad_time.json: profile.layers[2].timings[0].forward_s: expected a non-negative number" "$bin" simulate --plan "$tmp/bad_time.json"
expect_error "bad_schedule.json: schedule: unknown schedule \"zigzag\"" "$bin" simulate --plan "$tmp/bad_schedule.json"
expect_error "bad_link.json: cluster.intra_node_link.bandwidth: expected a positive number" "$bin" simulate --plan "$tmp/bad_link.json"
expect_error "bad_format.json: format: expected \"pipetwin.plan\"" "$bin" simulate --plan "$tmp/bad_format.json"
expect_error "truncated.json:1:" "$bin" simulate --plan "$tmp/truncated.json"
expect_error "missing.json: cannot open" "$bin" simulate --plan "$tmp/missing.json"

# Bad flags and names.
expect_error "--chunks: expected a positive integer or auto" "$bin" plan --model "$model" -K 2 -B 8 -M x -o "$tmp/x.json"
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

# Help works for every verb.
for verb in plan simulate schedule; do
  "$bin" "$verb" --help >/dev/null || { echo "FAIL: $verb --help"; fail=1; }
done

[[ $fail -eq 0 ]] && echo "cli errors: all good"
exit $fail
