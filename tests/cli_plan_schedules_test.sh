#!/usr/bin/env bash
# The schedules users pick, as the CLI shows them: `plan --virtual-stages` places v x K stages in
# the schedule's layout and says so, `plan --schedule auto` prints one line per schedule and writes
# the fastest that fits, `schedule --compact` prints I and W and a V device's two chunks, `sweep`
# has the virtual_stages knob, plan and sweep declare their shared flags once, and bad values are
# one-line errors (exit 2).
# Usage: cli_plan_schedules_test.sh PIPETWIN SOURCE_DIR
set -u
bin=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# expect <description> <extended regex> <text>
expect() {
  if ! grep -qE -- "$2" <<<"$3"; then
    echo "FAIL: $1: no line matching: $2"
    echo "$3" | head -20
    fail=1
  fi
}

# expect_error <expected substring> <command...>: exit 2, exactly one line on stderr.
expect_error() {
  local want=$1
  shift
  "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [[ $rc -ne 2 ]] || [[ $(wc -l <"$tmp/err") -ne 1 ]] || ! grep -qF -- "$want" "$tmp/err"; then
    echo "FAIL: $* -> rc=$rc, stderr:"
    cat "$tmp/err"
    echo "  (wanted one line containing: $want)"
    fail=1
  fi
}

# f = b = w = 1 ms a layer, two layers a device on K = 4.
model='uniform:layers=8,fwd_ms=1,bwd_ms=2,wgrad_ms=1,saved_kb=64'
base=("$bin" plan --model "$model" --cluster dgx-h100 -K 4)
plan=("${base[@]}" -B 8 -M 8)

out=$("${plan[@]}" --schedule zbv -o "$tmp/zbv.json") || { echo "FAIL: plan zbv"; exit 1; }
expect "zbv summary" "schedule zbv, 8 stages on K=4 devices" "$out"
expect "zbv layout" "^stages per device: d0 = \[0, 7\], d1 = \[1, 6\], d2 = \[2, 5\], d3 = \[3, 4\]$" "$out"

out=$("$bin" schedule --plan "$tmp/zbv.json" --compact --iterations 1)
expect "V device row" "^device 0 \(stages 0, 7\): F0@s0 F1@s0 .* F0@s7 I0@s7 W0@s7 .* U@s0 U@s7$" "$out"
out=$("$bin" schedule --plan "$tmp/zbv.json" --iterations 1)
expect "V device row in full" \
  "^device 0 \(stages 0, 7\): \[F s0 mb0 v0\] .*\[I s7 mb0 v0\] \[S grad s7->s6 mb0\] \[W s7 mb0 v0\]" "$out"

"${plan[@]}" --schedule zb-h1 -q -o "$tmp/h1.json" || { echo "FAIL: plan zb-h1"; exit 1; }
out=$("$bin" schedule --plan "$tmp/h1.json" --compact --iterations 1)
expect "zb-h1 last device" "^device 3: F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 .* W7 U$" "$out"

"${plan[@]}" --schedule interleaved-1f1b --virtual-stages 2 -q -o "$tmp/i.json" ||
  { echo "FAIL: plan interleaved"; exit 1; }
out=$("$bin" schedule --plan "$tmp/i.json" --compact --iterations 1)
expect "interleaved device row" "^device 1 \(stages 1, 5\): F0@s1 " "$out"

out=$("${plan[@]}" --schedule auto -o "$tmp/auto.json") || { echo "FAIL: plan auto"; exit 1; }
expect "auto header" "^schedule auto: 7 candidates on K=4 devices x dp 1, batch 8, M 8$" "$out"
expect "auto 1f1b" "^1f1b +1 +8 +66.00 ms .* slower: 66.00 ms vs 48.00 ms$" "$out"
expect "auto zb-h1" "^zb-h1 +1 +8 +54.00 ms .* slower: 54.00 ms vs 48.00 ms$" "$out"
expect "auto zbv" "^zbv +2 +8 +48.00 ms .* chosen$" "$out"
expect "auto plan" "schedule zbv, 8 stages on K=4 devices" "$out"
expect "auto file" '"schedule": "zbv"' "$(cat "$tmp/auto.json")"
out=$("${base[@]}" -M 4 -B 4 --schedule auto --schedules 1f1b,zbv -o "$tmp/auto2.json")
expect "auto cannot run" "^zbv +2 +- +- +- +cannot run: schedule zbv: needs at least 2D - 1 = 7 micro-batches on 4 devices \(M = 4\)$" "$out"
expect "auto restricted" "^1f1b +1 +4 .* chosen$" "$out"

expect_error "--virtual-stages must be positive (0 < 1)" "${plan[@]}" --virtual-stages 0 -o "$tmp/x.json"
expect_error "schedule zbv: needs at least 2D - 1 = 7 micro-batches on 4 devices (M = 3)" \
  "$bin" plan --model "$model" --cluster dgx-h100 -K 4 -B 3 -M 3 --schedule zbv -o "$tmp/x.json"
expect_error "schedule gpipe runs one stage per device (--virtual-stages 2" \
  "${plan[@]}" --virtual-stages 2 -o "$tmp/x.json"
expect_error "--schedules 1f1b,zbv needs --schedule auto (--schedule gpipe given)" \
  "${plan[@]}" --schedules 1f1b,zbv -o "$tmp/x.json"
expect_error "unknown schedule \"zbw\"" "${plan[@]}" --schedule auto --schedules zbw -o "$tmp/x.json"
expect_error "--schedule auto: no schedule fits (tried 1f1b, zbv); the leanest" \
  "$bin" plan --model 'uniform:layers=8,param_kb=33554432' --cluster dgx-h100 -K 4 -B 8 -M 8 \
  --schedule auto --schedules 1f1b,zbv -q -o "$tmp/x.json"
[[ -e "$tmp/x.json" ]] && { echo "FAIL: a refused plan was written"; fail=1; }

"$bin" sweep --model "$model" --cluster dgx-h100 -K 4 -B 8 -q -o "$tmp/s.csv" \
  --grid 'schedule=zbv,zb-h1;v=auto,2;chunks=8' || { echo "FAIL: sweep"; exit 1; }
csv=$(cat "$tmp/s.csv")
expect "sweep header" "^point,points,schedule,virtual_stages,chunks," "$csv"
expect "sweep refusal row" "^3,4,zb-h1,2,8,.*schedule zb-h1 runs one stage per device" "$csv"
expect_error "--virtual-stages must be positive (0 < 1)" \
  "$bin" sweep --model "$model" --grid 'chunks=8' --virtual-stages 0 -o "$tmp/s2.csv"

# plan and sweep take the plan-request flags from one declaration (cli/plan_flags.hpp): the same
# help line for each, the same values, the same one-line errors.
"$bin" plan --help >"$tmp/plan.help"
"$bin" sweep --help >"$tmp/sweep.help"
for flag in --model --profile --cluster --catalog --dtype --optimizer -K,--stages --virtual-stages \
  -B,--batch -M,--chunks --partitioner --dp --checkpoint-mode --checkpoint --frozen --iterations; do
  p=$(grep -E -- "^  $flag " "$tmp/plan.help")
  s=$(grep -E -- "^  $flag " "$tmp/sweep.help")
  [[ -n "$p" && "$p" == "$s" ]] || { echo "FAIL: $flag: plan says \"$p\", sweep \"$s\""; fail=1; }
done
expect_error "--virtual-stages: expected a positive integer or auto, got \"x\"" \
  "${plan[@]}" --virtual-stages x -o "$tmp/x.json"
expect_error "--virtual-stages: expected a positive integer or auto, got \"x\"" \
  "$bin" sweep --model "$model" --grid 'chunks=8' --virtual-stages x -o "$tmp/x.csv"
"${plan[@]}" --schedule zbv --virtual-stages auto -q -o "$tmp/zbv_auto.json" ||
  { echo "FAIL: plan --virtual-stages auto"; fail=1; }
cmp -s "$tmp/zbv.json" "$tmp/zbv_auto.json" || { echo "FAIL: --virtual-stages auto is not zbv's v"; fail=1; }
# --checkpoint is --checkpoint-mode except_last, in plan and in sweep.
"${plan[@]}" --checkpoint -q -o "$tmp/ck1.json" && "${plan[@]}" --checkpoint-mode except_last -q -o "$tmp/ck2.json" ||
  { echo "FAIL: plan --checkpoint"; fail=1; }
cmp -s "$tmp/ck1.json" "$tmp/ck2.json" || { echo "FAIL: plan --checkpoint differs from except_last"; fail=1; }
expect "plan --checkpoint" '"checkpoint": "except_last"' "$(cat "$tmp/ck1.json")"
sweep=("$bin" sweep --model "$model" -K 2 -B 8 -q --grid 'chunks=2,4')
"${sweep[@]}" --checkpoint -o "$tmp/ck1.csv" && "${sweep[@]}" --checkpoint-mode except_last -o "$tmp/ck2.csv" ||
  { echo "FAIL: sweep --checkpoint"; fail=1; }
cmp -s "$tmp/ck1.csv" "$tmp/ck2.csv" || { echo "FAIL: sweep --checkpoint differs from except_last"; fail=1; }
expect "sweep --checkpoint" ",except_last," "$(cat "$tmp/ck1.csv")"

exit $fail
