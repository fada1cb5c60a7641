"""What the notebooks share: the pipetwin module, and loading pipetwin's outputs written earlier.

The notebooks compute with the Python API (`import pipetwin`, python/bindings/): import_pipetwin()
finds it where `PYTHONPATH=<build>/python` puts it, else in $PIPETWIN_BUILD/python or the
repository's build/python (scripts/build.sh). Results written earlier by the CLI or the API (a
sweep of a cluster job, measured timelines of `pipetwin run`) are read from the results folder,
$PIPETWIN_RESULTS, or ../results relative to the notebook. The formats are the ones the tools
write (docs/design.md "Formats"):

- timelines: Chrome trace JSON from `pipetwin simulate --timeline` / `pipetwin run --timeline`,
  "otherData": {"format": "pipetwin.timeline", "source": "simulated" | "measured"}; one "X"
  event per action with args op, stage, mb, step;
- metrics: "format": "pipetwin.metrics" from `--metrics` (iteration_time_s, bubble_fraction, ...);
- sweeps: `pipetwin sweep -o SWEEP.csv`, one row per point: point, points, one column per knob
  (stages, chunks, schedule, ... and alpha where the sweep has it), plan_* (what the planner
  resolved, plan_M for chunks=auto), then iteration_time_s, throughput_samples_per_s,
  bubble_fraction, peak_memory_max_bytes, memory_capacity_bytes, fits, oom_device, over_bytes,
  error;
- alpha sweeps (`--grid 'alpha=...'`) add elastic_total_s, elastic_samples_per_s,
  baseline_total_s, speedup, final_frozen, final_K, final_dp: each point a whole elastic run;
- capacity: `pipetwin capacity -o DIR` writes DIR/capacity.csv: per objective (fastest,
  cheapest) one row per cluster that fits (rank, gpus, stages, dp, chunks, schedule,
  total_time_s, cost, ...), and an objective "none" row per cluster that does not (oom_device,
  over_bytes, note).

Runs pair a prediction with a measurement by file name, as `pipetwin report` does: the run key is
the path without ".json", without a type word (.timeline, .trace, .metrics, .plan) and without a
role word (.predicted/.prediction/.simulated/.sim or .measured/.measurement/.run/.real). Without a
role word the file's own "source" decides.
"""

import importlib
import json
import os
import sys
from pathlib import Path

import pandas as pd

PREDICTED_WORDS = ("predicted", "prediction", "simulated", "sim")
MEASURED_WORDS = ("measured", "measurement", "run", "real")
TYPE_WORDS = ("timeline", "trace", "metrics", "plan")


def import_pipetwin():
    """The pipetwin module: as Python finds it (PYTHONPATH=<build>/python), else from
    $PIPETWIN_BUILD/python or the repository's build/python; a clear error when it is not built."""
    try:
        return importlib.import_module("pipetwin")
    except ImportError:
        pass
    repo = Path(__file__).resolve().parent.parent
    for build in (os.environ.get("PIPETWIN_BUILD"), repo / "build"):
        if build and (Path(build) / "python" / "pipetwin" / "__init__.py").is_file():
            sys.path.insert(0, str(Path(build) / "python"))
            return importlib.import_module("pipetwin")
    raise ImportError("the pipetwin module is not built: run scripts/build.sh (it needs Debian's "
                      "pybind11-dev) and set PYTHONPATH=<build>/python or PIPETWIN_BUILD=<build>")


def results_dir(required=True):
    """The results folder: $PIPETWIN_RESULTS or ../results. Missing, a clear error, or None when
    not `required` (the notebooks then show only what they compute)."""
    path = Path(os.environ.get("PIPETWIN_RESULTS", "../results")).resolve()
    if not path.is_dir():
        if not required:
            return None
        raise FileNotFoundError(
            f"results folder {path} does not exist: set PIPETWIN_RESULTS to the folder your "
            "pipetwin runs wrote (e.g. results/)")
    return path


def _strip(name, words):
    for w in words:
        if name.endswith("." + w) and len(name) > len(w) + 1:
            return name[: -len(w) - 1], w
    return name, None


def run_name(relative):
    """(run key, 'predicted' | 'measured' | None) of a path relative to the results folder."""
    name, _ = _strip(str(relative), ("json",))
    name, _ = _strip(name, TYPE_WORDS)
    name, word = _strip(name, PREDICTED_WORDS)
    if word:
        return name, "predicted"
    name, word = _strip(name, MEASURED_WORDS)
    return name, ("measured" if word else None)


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def kind_of(doc):
    """'timeline', 'metrics' or None for a parsed JSON document."""
    if isinstance(doc, dict) and doc.get("otherData", {}).get("format") == "pipetwin.timeline":
        return "timeline"
    if isinstance(doc, dict) and doc.get("format") == "pipetwin.metrics":
        return "metrics"
    return None


def timeline_frame(doc):
    """One row per action: device, op, stage, mb, step, start_s, end_s, duration_s."""
    rows = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        a = e.get("args", {})
        start = e["ts"] * 1e-6
        rows.append({"device": e["pid"], "op": a.get("op", e.get("cat")), "stage": a.get("stage"),
                     "mb": a.get("mb"), "step": a.get("step"), "start_s": start,
                     "end_s": start + e.get("dur", 0) * 1e-6})
    df = pd.DataFrame(rows)
    df["duration_s"] = df["end_s"] - df["start_s"]
    return df


def step_times(df):
    """Time of every iteration: between consecutive optimizer-step ends (core/metrics.hpp)."""
    ends = df[df["op"] == "optimizer_step"].groupby("step")["end_s"].max().sort_index()
    return ends.diff().fillna(ends.iloc[0]).rename("iteration_s")


def find_runs(root=None):
    """{key: {'predicted': {'timeline': path, 'metrics': path}, 'measured': {...}}}."""
    root = Path(root or results_dir())
    runs = {}
    for path in sorted(root.rglob("*.json")):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        try:
            doc = load_json(path)
        except (OSError, ValueError):
            continue
        kind = kind_of(doc)
        if kind is None:
            continue
        key, role = run_name(path.relative_to(root).as_posix())
        if role is None:
            source = doc["otherData"]["source"] if kind == "timeline" else doc.get("source")
            role = "predicted" if source == "simulated" else "measured"
        runs.setdefault(key, {}).setdefault(role, {})[kind] = path
    return runs


def find_csvs(root=None, needs=()):
    """[(path, DataFrame)] of the CSV files under the folder that have every column in `needs`."""
    root = Path(root or results_dir())
    found = []
    for path in sorted(root.rglob("*.csv")):
        if any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        try:
            df = pd.read_csv(path, comment=None)
        except (OSError, ValueError, pd.errors.ParserError):
            continue
        if all(c in df.columns for c in needs):
            found.append((path, df))
    return found


def varying_inputs(df, leave_out=()):
    """The sweep's knob columns (between "points" and "plan_M", as `pipetwin sweep` writes them)
    whose value differs between rows, less `leave_out`: what tells one line from another."""
    cols = list(df.columns)
    if "points" in cols and "plan_M" in cols:
        knobs = cols[cols.index("points") + 1: cols.index("plan_M")]
    else:
        knobs = [c for c in cols if not c.endswith(("_s", "_bytes", "_fraction"))]
    return [c for c in knobs if c not in leave_out and df[c].nunique(dropna=True) > 1]


def lines(df, keys):
    """[(label, rows)]: the rows of each combination of `keys` (a line of a chart), labelled
    "k=v k=v"; [("all", df)] when there are no keys."""
    if not keys:
        return [("all", df)]
    out = []
    for name, part in df.groupby(keys[0] if len(keys) == 1 else list(keys)):
        values = name if isinstance(name, tuple) else (name,)
        out.append((" ".join(f"{k}={v}" for k, v in zip(keys, values)), part))
    return out


def feasible(df):
    """The sweep rows that ran and fit (fits == yes, no error)."""
    ok = pd.Series(True, index=df.index)
    if "fits" in df.columns:
        ok &= df["fits"].astype(str).str.lower().isin(["yes", "true", "1"])
    if "error" in df.columns:
        ok &= df["error"].isna() | (df["error"].astype(str) == "")
    return df[ok]
