"""pipetwin from Python: plan, simulate, sweep, compare, import traces and read the model zoo.

Every function is the CLI verb of the same name, its long flags as keyword arguments with dashes
as underscores (``--checkpoint-mode`` is ``checkpoint_mode=``, ``-K`` is ``stages=``, ``-B``
``batch=``, ``-M`` ``chunks=``, ``-o`` ``output=``), with the CLI's defaults; None means the
default. Results are Python objects: metrics a dict (the JSON ``--metrics`` writes), tables pandas
DataFrames (pandas is imported when a table is asked for), the timeline a list of event dicts, a
plan a :class:`Plan` that :func:`simulate` takes and that saves to and loads from the CLI's plan
JSON. Bad input raises :class:`InputError` (a ValueError) with the CLI's one-line message::

    import pipetwin
    p = pipetwin.plan(model="gpt2:124m", cluster="dgx-h100", stages=4, schedule="1f1b",
                      batch=32, chunks=8)
    m = pipetwin.simulate(p)
    m["iteration_time_s"], m.actions.groupby("op")["duration_s"].mean()

Built into ``<build>/python/pipetwin/`` with the compiled ``_pipetwin`` (python/bindings/);
``PYTHONPATH=<build>/python``.
"""

import contextlib
import os
import tempfile
import warnings

from . import _pipetwin
from ._pipetwin import InputError, Plan, RunFailure, Timeline

for _cls in (InputError, RunFailure, Plan, Timeline):
    _cls.__module__ = __name__  # pipetwin.InputError in tracebacks, pipetwin.Plan in pickles

__all__ = ["plan", "load_plan", "simulate", "sweep", "sweep_merge", "compare", "import_trace",
           "zoo", "capacity", "Plan", "Timeline", "Simulation", "ElasticSimulation", "Comparison",
           "Profile", "InputError", "RunFailure"]


def _frame(rows, columns=None):
    import pandas as pd  # only when a table is asked for
    return pd.DataFrame(list(rows), columns=columns)


@contextlib.contextmanager
def _profile_file(options):
    """A profile given as a dict (a Profile) is written to a temporary file for the call, since
    the CLI's --profile is a path; its errors then name that file."""
    profile = options.get("profile")
    if not isinstance(profile, dict):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="pipetwin-profile-") as tmp:
        path = os.path.join(tmp, "profile.json")
        _pipetwin._save_profile(profile, path)
        options["profile"] = path
        yield


# --- plan ---------------------------------------------------------------------------------------

def plan(**options):
    """``pipetwin plan``: partition a model onto a cluster; returns a :class:`Plan`.

    Keywords (the CLI's flags; defaults as ``pipetwin plan --help``): model, profile (a path or a
    :class:`Profile`), cluster ("local-cpu-2"), catalog, dtype, optimizer, stages (K, 2),
    schedule ("gpipe", or "auto": the fastest schedule that fits), virtual_stages ("auto" or an
    int), batch (B, 8), chunks (M: an int or "auto"), partitioner ("uniform"), dp (1),
    checkpoint_mode ("none", "except_last", "always"), checkpoint (bool), frozen (0), iterations,
    framework (a framework file: its overheads added to the plan's times, docs/framework-fit.md),
    tp (tensor-parallel size, 1), sequence_parallel, selective_recompute, tp_across_nodes,
    distributed_optimizer (bools; docs/tensor-parallel.md), schedules (schedule="auto"'s
    candidates: a list or "a,b"), allow_oom (bool), output (also write the plan JSON there).
    """
    with _profile_file(options):
        return _pipetwin._plan(**options)


def load_plan(path):
    """A plan JSON file (``pipetwin plan -o``) as a :class:`Plan`."""
    return Plan.load(path)


def _plan_search(self):
    rows = self._search_rows
    return _frame(rows) if rows else None


Plan.search = property(_plan_search, doc="schedule='auto': one row per schedule tried (schedule, "
                       "virtual_stages, chunks, iteration_time_s, peak_memory_max_bytes, fits, "
                       "outcome), as `pipetwin plan` prints them; else None.")
def _stage_table(self):
    """One row per stage: device, layers, predicted forward and backward time per micro-batch,
    parameter and activation bytes (what `pipetwin plan` prints)."""
    return _frame(self._stage_rows())


Plan.stage_table = _stage_table


# --- simulate -----------------------------------------------------------------------------------

class Simulation(dict):
    """:func:`simulate`'s result: the metrics, as the dict of the JSON ``--metrics`` writes
    (iteration_time_s, throughput_samples_per_s, bubble_fraction, devices, ...), with the
    predicted timeline beside it."""

    def __init__(self, metrics, timeline):
        super().__init__(metrics)
        self._timeline = timeline
        self._events = None

    @property
    def timeline(self):
        """The timeline as a list of events, one dict per action (device, device_name, stream,
        op, name, stage, mb, step, version, payload, peer_stage, bucket, start_s, end_s,
        duration_s), ordered as the Chrome trace the CLI writes."""
        if self._events is None:
            self._events = self._timeline.events()
        return self._events

    @property
    def timeline_object(self):
        """The :class:`Timeline` itself (save it with ``.save(path)``)."""
        return self._timeline

    @property
    def actions(self):
        """The timeline as a DataFrame, one row per action."""
        return _frame(self.timeline)

    @property
    def memory(self):
        """The memory counter track: one row per sample (device, time_s, bytes)."""
        return _frame(self._timeline.memory(), columns=["device", "time_s", "bytes"])

    @property
    def devices(self):
        """The metrics' per-device rows as a DataFrame."""
        return _frame(self.get("devices", []))

    def step_times(self):
        """The time of every iteration: between consecutive optimizer-step ends."""
        ends = self.get("step_end_s", [])
        return [b - a for a, b in zip([0.0] + ends[:-1], ends)]


class ElasticSimulation(dict):
    """``simulate(elastic=True)``'s result: the report (the JSON ``--report`` writes), with the
    epoch log (``--log``) and the replayed freeze trace (``--freeze-trace-out``)."""

    def __init__(self, report, epoch_log, freeze_trace):
        super().__init__(report)
        self.epoch_log = epoch_log
        self.freeze_trace = freeze_trace

    @property
    def epochs(self):
        """The epoch log as a DataFrame, one row per epoch."""
        return _frame(self.epoch_log.get("epochs", []))


def simulate(plan=None, **options):
    """``pipetwin simulate``: predict a plan's timeline and metrics; returns a
    :class:`Simulation` (a dict of the metrics).

    ``plan`` is a :class:`Plan` or the path of a plan JSON (--plan). Keywords: iterations,
    schedule_file, timeline (also write the Chrome trace there), metrics (also write the metrics
    JSON there), profile (reprice the plan's layers with this profile of the same model),
    framework (a framework file whose overheads replace the plan's), max_actions. With
    ``elastic=True`` (and no plan) it replays a PipeTransformer training run and returns an
    :class:`ElasticSimulation`; keywords as ``pipetwin simulate --elastic``: model,
    profile, cluster, catalog, stages, batch, epochs, samples, freeze_trace, alpha, freeze_every,
    freeze_unit, checkpoint_mode, lambda_frozen, no_autopipe, no_autodp, no_autocache,
    breakdown, cache_memory, host_bandwidth, disk_bandwidth, transition_overheads,
    transition_scale, no_state_transfer, seed, log, freeze_trace_out, report.
    """
    if plan is not None:
        options["plan"] = plan
    with _profile_file(options):
        r = _pipetwin._simulate(**options)
    if "report" in r:
        return ElasticSimulation(r["report"], r["epoch_log"], r["freeze_trace"])
    return Simulation(r["metrics"], r["timeline"])


# --- sweep --------------------------------------------------------------------------------------

def _read_sweep(path):
    import pandas as pd
    return pd.read_csv(path)


def sweep(grid=None, **options):
    """``pipetwin sweep``: simulate every point of a grid; returns the sweep table as a DataFrame
    (the CSV the CLI writes, one row per point).

    ``grid`` is --grid ("stages=1,2,4;chunks=auto,4:32:4;schedule=gpipe,1f1b"). Keywords: the
    plan's (model, profile, cluster, catalog, dtype, optimizer, stages, schedule,
    virtual_stages, batch, chunks, partitioner, dp, checkpoint_mode, checkpoint, frozen,
    iterations, framework: every point's value of a field the grid does not vary) and
    micro_batch, alpha, samples, epochs, jobs (threads; default all cores), shard ("i/n"), limit,
    top, output (the CSV: appended to and resumed if it exists, with the best ``top`` points
    written beside it; default a temporary file). The DataFrame's ``attrs`` say whether the
    sweep is complete and how many points it computed and resumed. Ctrl-C stops after the points
    in flight.
    """
    if grid is not None:
        options["grid"] = grid
    given = options.get("output")
    with tempfile.TemporaryDirectory(prefix="pipetwin-sweep-") as tmp:
        if given is None:
            options["output"] = os.path.join(tmp, "sweep.csv")
        with _profile_file(options):
            r = _pipetwin._sweep(**options)
        df = _read_sweep(r["output"])
    df.attrs.update({k: r[k] for k in ("complete", "total", "resumed", "computed")})
    if given is not None:
        df.attrs.update(output=r["output"], best=r["best"])
    return df


def sweep_merge(inputs, output, top=None):
    """``pipetwin sweep merge``: the shard CSVs of a sharded sweep in one ``output`` (and its best
    ``top`` points beside it); returns the merged table as a DataFrame."""
    r = _pipetwin._sweep_merge(inputs=inputs, output=output, top=top)
    df = _read_sweep(r["output"])
    df.attrs.update(output=r["output"], best=r["best"])
    return df


# --- compare ------------------------------------------------------------------------------------

class Comparison(dict):
    """:func:`compare`'s result: "summary", "iterations" and "actions" as DataFrames (quantity,
    predicted, measured, error, unit; error = (predicted - measured) / measured), the headline
    errors, the runs' and predictions' spreads, "verdict" and "text" (what the CLI prints, also
    ``str()`` of this)."""

    def __str__(self):
        return self["text"]


def compare(predicted, measured, **options):
    """``pipetwin compare``: a prediction next to one or more measurements of the same plan.

    ``predicted`` and ``measured`` (one or a list of runs, compared with the median one) are
    timelines or metrics, all of one kind: file paths, :class:`Timeline` objects, dicts of the
    JSON, or :class:`Simulation` results. Keywords: plan (a :class:`Plan` or its path: throughput
    in samples/s), also_predicted (other predictions of the plan), skip (leading iterations left
    out of the headline, 1).
    """
    r = _pipetwin._compare(predicted=predicted, measured=measured, **options)
    for table in ("summary", "iterations", "actions"):
        r[table] = _frame(r[table], columns=["quantity", "predicted", "measured", "error", "unit"])
    return Comparison(r)


# --- import_trace -------------------------------------------------------------------------------

class Profile(dict):
    """A profile: the dict of the profile JSON (``pipetwin.profile``), which :func:`plan` and
    :func:`sweep` take as ``profile=``. From :func:`import_trace` it carries ``layers`` (one row
    per layer at the largest micro-batch size) and ``traces`` (per trace, what it could
    attribute); ``path`` is where it was written, if it was."""

    def __init__(self, doc, layers=(), traces=(), path=None):
        super().__init__(doc)
        self._layers = list(layers)
        self.traces = list(traces)
        self.path = path

    @property
    def layers(self):
        return _frame(self._layers)

    def save(self, path):
        """Writes the profile JSON (checked as pipetwin reads it) through a temporary file."""
        _pipetwin._save_profile(self, path)
        self.path = os.fspath(path)


def import_trace(traces, **options):
    """``pipetwin import-trace``: PyTorch profiler traces become a :class:`Profile`.

    ``traces`` is one trace file or a list (one per micro-batch size). Keywords: layers
    ("children", "depth=N" or names "a,b,c"), micro_batch (an int or a list, one per trace),
    device, model, loss ("last" or "unattributed"), catalog, output (also write the profile
    there). The CLI's page-fault warning is a UserWarning.
    """
    r = _pipetwin._import_trace(traces=traces, **options)
    for t in r["traces"]:
        if t["warning"]:
            warnings.warn(t["warning"], stacklevel=2)
    output = options.get("output")
    return Profile(r["profile"], r["layers"], r["traces"],
                   os.fspath(output) if output is not None else None)


# --- zoo ----------------------------------------------------------------------------------------

def zoo(name=None, **options):
    """``pipetwin zoo [NAME]``: without a name, the analytic zoo's presets as a DataFrame (name,
    layers, params, published_params, gflops_per_sample, description); with one, the model as a
    dict (name, family, description, params, published_params, tied_params, gflops_per_sample,
    dtype) whose "layers" (params, forward GFLOPs, output and saved MiB per sample in ``dtype``,
    default "float32") and "edges" are DataFrames."""
    if name is not None:
        options["name"] = name
    r = _pipetwin._zoo(**options)
    if isinstance(r, list):
        return _frame(r)
    r["layers"] = _frame(r["layers"])
    r["edges"] = _frame(r["edges"], columns=["from", "to", "mib_per_sample", "skip"])
    return r


# --- capacity -----------------------------------------------------------------------------------

def capacity(**options):
    """``pipetwin capacity``: the clusters of a priced catalog ranked by the time and the cost to
    train a model; returns the rows of the capacity.csv ``-o DIR`` writes as a DataFrame (per
    objective "fastest" and "cheapest" one row per cluster in rank order, an objective "none" row
    per cluster where nothing fits), with a ``plan`` column of :class:`Plan` objects in place of
    plan_file.

    Keywords: model, profile, catalog, dtype, optimizer, batch (required), samples (per epoch,
    required), epochs (1), partitioner (partitioners to try: a list or "a,b"; default optimal,
    balance-time, balance-size), prices, clusters, schedules, checkpoint_modes, tp_sizes
    (tensor-parallel sizes to try; default 1, 2, 4, 8), distributed_optimizer, budget, jobs.
    """
    return _frame(_pipetwin._capacity(**options))
