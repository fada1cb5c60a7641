#!/usr/bin/env bash
# `pipetwin report` in a browser: builds a small results folder with the real
# CLI (a predicted/measured pair of simulations, a single run, a sweep CSV, a reproduction CSV
# carrying markup, a broken file), writes the page, opens it in headless Chromium and checks that
#   - the screenshot exists and is not blank (size, dimensions),
#   - the page's script drew what the data holds: one Gantt bar per action in the timelines,
#     one chart per sweep metric, one line per series, one dot per point (counts the script
#     writes into <body data-*> after drawing; pipetwin's expectations come from the files),
#   - no JavaScript console message (the harness itself is checked on a page that logs one),
#   - markup from a CSV stays text.
# Usage: report_test.sh PIPETWIN SOURCE_DIR. Exit 77 (skipped) when Chromium is absent.
set -u
bin=$1
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
mkdir -p "$res/sub"
fail=0
die() { echo "FAIL: $*"; exit 1; }

# A prediction and a "measurement" (a second simulation, 20 % slower compute) of one plan.
"$bin" plan --model 'uniform:layers=4,fwd_ms=1,bwd_ms=2,act_kb=256' --cluster local-cpu-2 \
  -K 2 -B 8 -M 4 -o "$res/X.plan.json" -q || die "plan"
"$bin" simulate --plan "$res/X.plan.json" --iterations 2 -q \
  --timeline "$res/X.predicted.timeline.json" --metrics "$res/X.predicted.metrics.json" || die "simulate"
"$bin" plan --model 'uniform:layers=4,fwd_ms=1.2,bwd_ms=2.4,act_kb=256' --cluster local-cpu-2 \
  -K 2 -B 8 -M 4 -o "$tmp/slow.plan.json" -q || die "plan (slow)"
"$bin" simulate --plan "$tmp/slow.plan.json" --iterations 2 -q \
  --timeline "$res/X.measured.timeline.json" --metrics "$res/X.measured.metrics.json" || die "simulate (slow)"
# A single run, no metrics file, in a sub-folder.
"$bin" plan --model 'uniform:layers=6,fwd_ms=1,bwd_ms=2' --cluster local-cpu-2 --schedule 1f1b \
  -K 2 -B 6 -M 6 -o "$tmp/one.plan.json" -q || die "plan (1f1b)"
"$bin" simulate --plan "$tmp/one.plan.json" --iterations 1 -q --timeline "$res/sub/one.trace.json" || die "simulate (1f1b)"
cat >"$res/sweep.csv" <<'CSV'
stages,chunks,schedule,iteration_time_s,bubble_fraction,fits
2,1,gpipe,3.0,0.50,yes
2,2,gpipe,2.0,0.33,yes
2,4,gpipe,1.5,0.20,yes
4,1,gpipe,5.0,0.75,yes
4,2,gpipe,4.0,0.60,yes
4,4,gpipe,,,no
CSV
cat >"$res/repro.csv" <<'CSV'
item,metric,paper,ours,unit,relative_error,note
"<img src=x onerror=""document.body.dataset.pwned=1"">",time,10,11,ms,0.1,
ddg K=4,time,4,4,ms,0,
CSV
echo '{"traceEvents": [' >"$res/broken.json"

"$bin" report "$res" -o "$tmp/report.html" >"$tmp/out" 2>"$tmp/err" || { cat "$tmp/err"; die "report exited $?"; }
grep -q "^pipetwin: warning: broken.json:[0-9]*:[0-9]*: not valid JSON; skipped$" "$tmp/err" || { cat "$tmp/err"; die "no warning for broken.json"; }
[[ $(wc -l <"$tmp/err") -eq 1 ]] || { cat "$tmp/err"; die "expected one warning line"; }
grep -q "2 runs (3 timelines, 1 side-by-side pairs), 2 CSV tables, 1 skipped" "$tmp/out" || { cat "$tmp/out"; die "summary line"; }
if grep -Eq '<link|src="http|href="http' "$tmp/report.html"; then die "the page refers to the network"; fi

# Nothing usable, or no folder: one line, exit 2, no page.
mkdir -p "$tmp/empty"
echo '{"hello": 1}' >"$tmp/empty/other.json"
"$bin" report "$tmp/empty" -o "$tmp/empty.html" >/dev/null 2>"$tmp/err2"
rc=$?
[[ $rc -eq 2 && ! -e $tmp/empty.html ]] || die "empty folder: exit $rc"
grep -q "^pipetwin: error: $tmp/empty: nothing to report: no timeline, metrics JSON or CSV table found (1 skipped)$" "$tmp/err2" \
  || { cat "$tmp/err2"; die "empty folder: message"; }
"$bin" report "$tmp/missing" -o "$tmp/m.html" >/dev/null 2>"$tmp/err3"
rc=$?
[[ $rc -eq 2 && $(wc -l <"$tmp/err3") -eq 1 ]] || { cat "$tmp/err3"; die "missing folder: exit $rc"; }

# What the script should draw, from the files themselves.
read -r want_bars want_gantts <<<"$(/usr/bin/python3 - "$res" <<'PY'
import json, sys, glob
files = [f for f in glob.glob(sys.argv[1] + "/**/*.json", recursive=True)
         if f.endswith((".timeline.json", ".trace.json"))]
bars = sum(1 for f in files for e in json.load(open(f))["traceEvents"] if e["ph"] == "X")
print(bars, len(files))
PY
)"
# Sweep: 2 metric columns; lines stages=2, stages=4; 5 points with values per chart.
want="ganttCharts=$want_gantts ganttPairs=1 ganttBars=$want_bars lineCharts=2 lines=4 points=10"

chrome() {
  timeout 60 "$browser" --headless=new --disable-gpu --no-sandbox --disable-dev-shm-usage \
    --no-first-run --user-data-dir="$tmp/profile" --window-size=1400,2000 "$@"
}
chrome --screenshot="$tmp/shot.png" "file://$tmp/report.html" >/dev/null 2>&1
chrome --enable-logging=stderr --v=0 --dump-dom "file://$tmp/report.html" >"$tmp/dom.html" 2>"$tmp/console.log"

/usr/bin/python3 - "$tmp" "$want" <<'PY' || fail=1
import re, struct, sys
tmp, want = sys.argv[1], dict(kv.split("=") for kv in sys.argv[2].split())
ok = True
def check(cond, msg):
    global ok
    if not cond:
        print("FAIL:", msg)
        ok = False
try:
    png = open(f"{tmp}/shot.png", "rb").read()
except OSError:
    png = b""
check(len(png) > 30000, f"screenshot missing or blank ({len(png)} bytes)")
if png[:8] == b"\x89PNG\r\n\x1a\n":
    w, h = struct.unpack(">II", png[16:24])
    check(w >= 1000 and h >= 1000, f"screenshot is {w}x{h}")
dom = open(f"{tmp}/dom.html", encoding="utf-8", errors="replace").read()
body = re.search(r"<body([^>]*)>", dom)
attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', body.group(1))) if body else {}
check(attrs.get("render-status") == "ok", f"render status {attrs.get('render-status')!r}")
for key, value in want.items():
    attr = re.sub(r"([A-Z])", lambda m: "-" + m.group(1).lower(), key)
    check(attrs.get(attr) == value, f"{key}: drew {attrs.get(attr)}, want {value}")
for key in ("bubbles", "overlaps", "micro-batch-labels"):
    check(int(attrs.get(key, "0")) > 0, f"no {key} drawn")
check("pwned" not in attrs, "markup from a CSV ran as HTML")
check("&lt;img src=x" in dom, "the CSV's markup is not shown as text")
console = [l for l in open(f"{tmp}/console.log", errors="replace") if "CONSOLE" in l]
check(not console, "console messages:\n" + "".join(console))
sys.exit(0 if ok else 1)
PY

# The harness sees console errors: the same page with one logged error must be caught.
sed 's|<body|<script>console.error("planted report error")</script><body|' "$tmp/report.html" >"$tmp/planted.html"
chrome --enable-logging=stderr --v=0 --dump-dom "file://$tmp/planted.html" >/dev/null 2>"$tmp/planted.log"
grep "CONSOLE" "$tmp/planted.log" | grep -q "planted report error" || { echo "FAIL: console capture does not work"; fail=1; }

[[ $fail -eq 0 ]] && echo "PASS: report page rendered ($want)"
exit $fail
