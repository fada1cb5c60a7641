#!/usr/bin/env bash
# The notebooks: executes every notebooks/*.ipynb headless with
# `jupyter nbconvert --execute` — they compute with the Python API (`import pipetwin`; ctest sets
# PYTHONPATH=<build>/python) and read the small results folder tests/data/notebook_results/
# (files written by the pipetwin CLI) — and checks each one ran without an error and drew at least
# one figure — a notebook that finds nothing to plot fails.
# Usage: notebooks_test.sh SOURCE_DIR. Exit 77 (skipped) without jupyter, pandas or matplotlib,
# or without the pipetwin module (a build without pybind11).
set -u
src=$1
if ! command -v jupyter >/dev/null 2>&1 || ! jupyter nbconvert --version >/dev/null 2>&1; then
  echo "SKIP: jupyter nbconvert not installed (Debian: apt-get install jupyter-nbconvert python3-ipykernel)"
  exit 77
fi
# The kernel is the Python jupyter runs on; it needs pandas and matplotlib.
py=$(head -1 "$(command -v jupyter)" | sed -n 's|^#! *||p')
py=${py:-python3}
if ! $py -c "import pandas, matplotlib, ipykernel" >/dev/null 2>&1; then
  echo "SKIP: the Jupyter kernel's Python ($py) lacks pandas, matplotlib or ipykernel"
  exit 77
fi
if ! (cd "$src/notebooks" && $py -c "import pipetwin_results; pipetwin_results.import_pipetwin()") \
  >/dev/null 2>&1; then
  echo "SKIP: the pipetwin Python module is not built (scripts/build.sh, with Debian's pybind11-dev)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export PIPETWIN_RESULTS=$src/tests/data/notebook_results
export PYDEVD_DISABLE_FILE_VALIDATION=1
export MPLCONFIGDIR=$tmp/mpl
fail=0
notebooks=("$src"/notebooks/*.ipynb)
[[ -e ${notebooks[0]} ]] || { echo "FAIL: no notebooks in $src/notebooks"; exit 1; }
if ! jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=120 \
  --output-dir "$tmp/out" "${notebooks[@]}" >"$tmp/log" 2>&1; then
  grep -v "frozen modules\|PYDEVD\|Debugging will proceed\|^0.00s" "$tmp/log" | tail -40
  echo "FAIL: a notebook raised an error (see above)"
  exit 1
fi
for nb in "${notebooks[@]}"; do
  out=$tmp/out/$(basename "$nb")
  $py - "$out" <<'PY' || fail=1
import json, sys
path = sys.argv[1]
nb = json.load(open(path))
figures = errors = 0
for cell in nb["cells"]:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            errors += 1
        if "image/png" in o.get("data", {}):
            figures += 1
name = path.rsplit("/", 1)[-1]
if errors or figures == 0:
    print(f"FAIL: {name}: {errors} errors, {figures} figures")
    sys.exit(1)
print(f"ok: {name}: {figures} figures")
PY
done
[[ $fail -eq 0 ]] && echo "PASS: every notebook ran and plotted"
exit $fail
