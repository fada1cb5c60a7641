#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in build-fuzz/, seeds each with the shipped
# files of its format and runs it. Any crash, sanitizer report or non-InputError exception fails
# the script; the reproducer is left in build-fuzz/findings/<target>/ — turn it into a regression
# test (tests/fuzz_regression_test.cpp reads fuzz/regressions/<target>/*).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 600)] [TARGET...]
# PIPETWIN_FUZZ_LANES=N runs N targets at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
shift || true
targets=("$@")
all=(profile cluster plan timeline metrics schedule model_spec freeze_trace epoch_log sweep_grid
     sweep_csv prices transition_overheads reference_table report_csv import_trace gzip_trace)
if ((${#targets[@]} == 0)); then targets=("${all[@]}"); fi
B=build-fuzz
# The same configuration as scripts/sanitize.sh asan, which runs the test suites from this folder.
cmake -S . -B "$B" -G Ninja -DPIPETWIN_WITH_TORCH=OFF -DPIPETWIN_BUILD_BENCH=OFF \
  -DPIPETWIN_BUILD_TESTS=ON -DCMAKE_CXX_COMPILER=clang++ -DPIPETWIN_FUZZ=ON >/dev/null
cmake --build "$B" -j "${PIPETWIN_JOBS:-$(nproc)}" --target pipetwin $(printf 'fuzz_%s ' "${targets[@]}")

# Seeds: the shipped files, plus a plan, timeline and metrics the CLI writes from them.
S="$B/seeds"
rm -rf "$S" && for t in "${all[@]}"; do mkdir -p "$S/$t"; done
export PIPETWIN_DATA="$PWD" ASAN_OPTIONS=detect_leaks=0
# Several trace folders ship a profile of the same name: keep each under its folder's name.
for f in traces/*/*.profile.json; do
  d=${f%/*}
  cp "$f" "$S/profile/${d##*/}-${f##*/}"
done
cp hardware/clusters/*.json "$S/cluster/"
"$B/pipetwin" plan --model vit:tiny --cluster local-cpu-2 --stages 2 --batch 8 --chunks 4 -o "$S/plan/vit.json" >/dev/null
"$B/pipetwin" plan --model uniform:layers=8,act_kb=4,param_kb=64 --cluster dgx-h100 --stages 4 --dp 2 --batch 64 \
  --chunks 8 --schedule pipedream -o "$S/plan/uniform.json" >/dev/null
"$B/pipetwin" simulate --plan "$S/plan/vit.json" --timeline "$S/timeline/vit.json" --metrics "$S/metrics/vit.json" -q
"$B/pipetwin" schedule --plan "$S/plan/vit.json" -o "$S/schedule/vit.json" >/dev/null 2>&1 || true
for m in vit:tiny bert:tiny,layers=4 uniform:layers=8,fwd_ms=1/2/3/4/5/6/7/8 'uniform:fwd_ms=1,overhead_ms=0.5'; do
  printf '%s' "$m" >"$S/model_spec/$(echo "$m" | md5sum | cut -c1-8)"
done
"$B/pipetwin" simulate --elastic --model vit:tiny --cluster local-cpu-2 -K 2 -B 32 --epochs 3 \
  --samples 1024 --log "$S/epoch_log/vit.json" --freeze-trace-out "$S/freeze_trace/vit.json" -q
printf 'stages=1,2,4;chunks=2:16:2,auto;schedule=gpipe,1f1b' >"$S/sweep_grid/a"
printf 'model=vit:tiny,bert:tiny;alpha=0.1:0.5:0.1;dp=1,2;checkpoint=none,except_last' >"$S/sweep_grid/b"
"$B/pipetwin" sweep --model vit:tiny --grid 'stages=1,2;chunks=2,4' -o "$S/sweep_csv/vit.csv" -q
cp "$S/sweep_csv/vit.csv" tests/data/notebook_results/*.csv "$S/report_csv/"
cp hardware/prices.json "$S/prices/"
cp experiments/reference/*.csv "$S/reference_table/"
cp experiments/reference/pipetransformer-table4-transition.csv "$S/transition_overheads/"
cp tests/data/traces/*.trace.json "$S/import_trace/"
for f in tests/data/traces/*.trace.json; do gzip -c "$f" >"$S/gzip_trace/$(basename "$f").gz"; done
for t in "${targets[@]}"; do
  cp fuzz/regressions/"$t"/* "$S/$t/" 2>/dev/null || true
done

# One target; its status is its exit code. PIPETWIN_FUZZ_LANES targets run side by side (default 1).
fuzz_one() {
  local t=$1
  mkdir -p "$B/corpus/$t" "$B/findings/$t"
  echo "fuzz: $t for ${secs}s"
  if ! "$B/fuzz/fuzz_$t" -max_total_time="$secs" -print_final_stats=1 -max_len=65536 \
      -artifact_prefix="$B/findings/$t/" "$B/corpus/$t" "$S/$t" >"$B/findings/$t.log" 2>&1; then
    echo "fuzz: $t FAILED (log: $B/findings/$t.log, reproducer in $B/findings/$t/)"
    tail -30 "$B/findings/$t.log"
    return 1
  fi
  grep -E "^stat::number_of_executed_units|^#[0-9]+ *DONE" "$B/findings/$t.log" | tail -2 | sed "s/^/fuzz: $t: /"
}

status=0
lanes=${PIPETWIN_FUZZ_LANES:-1}
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= lanes)); do wait -n || status=1; done
  fuzz_one "$t" &
done
while (($(jobs -rp | wc -l) > 0)); do wait -n || status=1; done
exit $status
