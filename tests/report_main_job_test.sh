#!/usr/bin/env bash
# `pipetwin report` over a folder shaped like scripts/main-job.sh's results, in a browser.
# Without LibTorch the "runs" are simulations of the main job's ViT plan priced with the shipped
# vit-tiny profile scaled by a factor per run (traces/cpu-core/vit-tiny.profile.json); the
# predictions from later profiles likewise. Files as main-job.sh names them:
#   vit.plan.json, vit.sim.trace.json, vit.run1..4.trace.json, vit.profile-1..4.json,
#   vit.sim-1..4.trace.json, and the what-ifs gpipe/1f1b/pipedream.{plan,trace,metrics}.json
# plus a second group "far" whose runs are 25-35% slower than predictions that agree with each
# other (outside the noise). Checks:
#   - `pipetwin report` counts one group per plan and a side-by-side pair per group, and prints
#     each group's verdict;
#   - in headless Chromium, each group's prediction and its MEDIAN run are drawn side by side
#     (the run `pipetwin compare` picks: run4 of 1.08, 1.02, 1.15, 1.05), the per-action error
#     table is there, and the verdict line is the one `pipetwin compare` prints for the same
#     files, word for word, "within the noise" for vit and "outside the noise" for far.
# Usage: report_main_job_test.sh PIPETWIN SOURCE_DIR. Exit 77 (skipped) when Chromium is absent.
set -u
bin=$1
src=$2
py=/usr/bin/python3
browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then
    browser=$b
    break
  fi
done
if [[ -z $browser ]]; then
  echo "SKIP: no chromium on PATH (Debian: apt-get install chromium)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
res=$tmp/results
mkdir -p "$res"
die() { echo "FAIL: $*"; exit 1; }

# The shipped profile with every compute time times $2, written to $3.
scale_profile() {
  "$py" - "$1" "$2" "$3" <<'PY'
import json, sys
src, factor, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
p = json.load(open(src))
for layer in p["layers"]:
    for t in layer["timings"]:
        for k in ("forward_s", "backward_s", "recompute_s"):
            t[k] *= factor
        for k in ("cold_forward_s", "cold_backward_s"):
            t[k] = [v * factor for v in t.get(k, [])]
json.dump(p, open(out, "w"))
PY
}

profile=$src/traces/cpu-core/vit-tiny.profile.json
# One group X: plan, prediction, runs (factors $2), predictions from later profiles (factors $3).
group() {
  local x=$1 runs=$2 predictions=$3 i=0 f
  "$bin" plan --model vit:tiny --profile "$profile" --cluster local-cpu-2 -K 2 --schedule 1f1b \
    -B 8 -M 4 --partitioner balance-time --iterations 6 -o "$res/$x.plan.json" -q || die "plan $x"
  "$bin" simulate --plan "$res/$x.plan.json" --timeline "$res/$x.sim.trace.json" -q || die "simulate $x"
  for f in $runs; do
    i=$((i + 1))
    scale_profile "$profile" "$f" "$tmp/$x.machine-$i.json" || die "profile $x run $i"
    "$bin" simulate --plan "$res/$x.plan.json" --profile "$tmp/$x.machine-$i.json" \
      --timeline "$res/$x.run$i.trace.json" -q || die "run $x $i"
  done
  i=0
  for f in $predictions; do
    i=$((i + 1))
    scale_profile "$profile" "$f" "$res/$x.profile-$i.json" || die "profile $x $i"
    "$bin" simulate --plan "$res/$x.plan.json" --profile "$res/$x.profile-$i.json" \
      --timeline "$res/$x.sim-$i.trace.json" -q || die "prediction $x $i"
  done
}
group vit "1.08 1.02 1.15 1.05" "0.98 1.03 1.01 0.97"
group far "1.25 1.35 1.3" "1.0 1.01"
model='uniform:layers=16,fwd_ms=0.5,bwd_ms=1,act_kb=768,param_kb=28672,optimizer_kb=57344'
for schedule in gpipe 1f1b pipedream; do
  "$bin" plan --model "$model" --cluster pipetransformer-2x8-rtx5000 -K 8 --dp 2 \
    --schedule "$schedule" -B 128 -M auto -o "$res/$schedule.plan.json" -q || die "plan $schedule"
  "$bin" simulate --plan "$res/$schedule.plan.json" --timeline "$res/$schedule.trace.json" \
    --metrics "$res/$schedule.metrics.json" -q || die "simulate $schedule"
done

# What `pipetwin compare` says of each group, as main-job.sh calls it: its last line.
"$bin" compare "$res/vit.sim.trace.json" "$res"/vit.run{1,2,3,4}.trace.json \
  --plan "$res/vit.plan.json" --also-predicted "$res"/vit.sim-{1,2,3,4}.trace.json >"$tmp/vit.txt" || die "compare vit"
"$bin" compare "$res/far.sim.trace.json" "$res"/far.run{1,2,3}.trace.json \
  --plan "$res/far.plan.json" --also-predicted "$res"/far.sim-{1,2}.trace.json >"$tmp/far.txt" || die "compare far"

"$bin" report "$res" -o "$tmp/report.html" --title "pipetwin main job" >"$tmp/out" 2>"$tmp/err" \
  || { cat "$tmp/err"; die "report exited $?"; }
[[ ! -s $tmp/err ]] || { cat "$tmp/err"; die "report warned"; }
# 5 groups: far, vit and the three what-ifs; 3 + 2 x 9 - 3 = 3 + 9 + 6 timelines.
grep -qx "$tmp/report.html: 5 runs (18 timelines, 2 side-by-side pairs), 0 CSV tables, 0 skipped" "$tmp/out" \
  || { cat "$tmp/out"; die "summary line"; }
grep -qx "  vit: within the noise (4 runs, 5 predictions)" "$tmp/out" || { cat "$tmp/out"; die "vit's verdict"; }
grep -qx "  far: outside the noise (3 runs, 3 predictions)" "$tmp/out" || { cat "$tmp/out"; die "far's verdict"; }

timeout 60 "$browser" --headless=new --disable-gpu --no-sandbox --disable-dev-shm-usage \
  --disable-background-networking --no-first-run --user-data-dir="$tmp/profile" \
  --window-size=1400,2000 --enable-logging=stderr --v=0 --dump-dom "file://$tmp/report.html" \
  >"$tmp/dom.html" 2>"$tmp/console.log"

"$py" - "$tmp" <<'PY'
import html, re, sys
tmp = sys.argv[1]
ok = True
def check(cond, msg):
    global ok
    if not cond:
        print("FAIL:", msg)
        ok = False
dom = open(f"{tmp}/dom.html", encoding="utf-8", errors="replace").read()
body = re.search(r"<body([^>]*)>", dom)
attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1))) if body else {}
check(attrs.get("render-status") == "ok", f"render status {attrs.get('render-status')!r}")
check(attrs.get("gantt-pairs") == "2", f"side-by-side pairs drawn: {attrs.get('gantt-pairs')}, want 2")
check(attrs.get("gantt-charts") == "7", f"Gantt charts drawn: {attrs.get('gantt-charts')}, want 7")
articles = {}
for m in re.finditer(r'<article class="run" id="run-\d+"><h3>([^<]*)</h3>(.*?)</article>', dom, re.S):
    articles[m.group(1)] = m.group(2)
check(sorted(articles) == ["1f1b", "far", "gpipe", "pipedream", "vit"], f"groups {sorted(articles)}")
for key, want_class, median in (("vit", "within", "vit.run4"), ("far", "outside", "far.run3")):
    a = articles.get(key, "")
    compare_line = open(f"{tmp}/{key}.txt").read().rstrip("\n").split("\n")[-1]
    v = re.search(r'<p class="verdict ([a-z-]+)"[^>]*>(.*?)</p>', a, re.S)
    check(v is not None, f"{key}: no verdict line")
    if v:
        check(v.group(1) == want_class, f"{key}: verdict class {v.group(1)}, want {want_class}")
        check(html.unescape(v.group(2)) == compare_line,
              f"{key}: the page's verdict\n  {html.unescape(v.group(2))}\nis not compare's\n  {compare_line}")
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", a, re.S)
    check('<div class="gantt-group pair">' in a and len(captions) == 2,
          f"{key}: no side-by-side pair ({len(captions)} charts)")
    if len(captions) == 2:
        check(f"<code>{key}.sim.trace.json</code>" in captions[0], f"{key}: left chart {captions[0]!r}")
        check(f"median of" in captions[1] and f"<code>{median}.trace.json</code>" in captions[1],
              f"{key}: right chart is not the median run {median}: {captions[1]!r}")
    check(re.search(r'<details class="actions" open="?"?>.*?<td>stage 0 forward</td>', a, re.S)
          is not None, f"{key}: no per-action error table")
    print(f"{key}: {compare_line}")
console = [l for l in open(f"{tmp}/console.log", errors="replace") if "CONSOLE" in l]
check(not console, "console messages:\n" + "".join(console))
sys.exit(0 if ok else 1)
PY
rc=$?
[[ $rc -eq 0 ]] && echo "PASS: main-job report: 2 groups, their pairs and compare's verdicts"
exit $rc
