"""compare(), import_trace() and zoo(): the CLI's results as Python objects."""

import pytest

import pipetwin
from conftest import NOTEBOOK_RESULTS, TRACES, load

SIM = NOTEBOOK_RESULTS / "vit.sim.trace.json"
RUN = NOTEBOOK_RESULTS / "vit.run.trace.json"
PLAN = NOTEBOOK_RESULTS / "vit.plan.json"


def test_compare_files_prints_what_the_cli_prints(cli):
    c = pipetwin.compare(SIM, RUN, plan=PLAN)
    assert str(c) == cli.run("compare", SIM, RUN, "--plan", PLAN)
    steady = c["summary"].set_index("quantity").loc["iteration time (steady)"]
    assert steady["error"] == pytest.approx(
        (steady["predicted"] - steady["measured"]) / steady["measured"])
    assert len(c["iterations"]) > 1 and len(c["actions"]) > 0
    assert c["worst_abs_iteration_error"] >= c["median_abs_iteration_error"] >= 0


def test_compare_a_simulation_in_memory(cli, tmp_path):
    # The plan predicted now, in memory, against the measurement: what the CLI prints for the
    # files of the same prediction.
    sim = pipetwin.simulate(PLAN)
    cli.run("simulate", "--plan", PLAN, "--timeline", tmp_path / "sim.json", "--metrics",
            tmp_path / "m.json", "-q")
    c = pipetwin.compare(sim, RUN, plan=pipetwin.load_plan(PLAN))
    assert str(c) == cli.run("compare", tmp_path / "sim.json", RUN, "--plan", PLAN)
    # Against metrics, a Simulation is its metrics; against itself, every error is 0.
    m = pipetwin.compare(sim, tmp_path / "m.json")
    assert (m["summary"]["error"] == 0).all()
    same = pipetwin.compare(sim, [sim, sim.timeline_object])
    assert (same["iterations"]["error"] == 0).all() and same["runs"]["runs"] == 2


def test_import_trace_is_the_cli_profile(cli, tmp_path):
    trace = TRACES / "cpu-skip.trace.json"
    prof = pipetwin.import_trace(trace, output=tmp_path / "api.json")
    cli.run("import-trace", trace, "-o", tmp_path / "cli.json", "-q")
    assert dict(prof) == load(tmp_path / "cli.json")
    assert (tmp_path / "api.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert list(prof.layers["layer"]) == ["embed", "block", "head"]
    assert prof.traces[0]["measured_steps"] == 3 and prof.path == str(tmp_path / "api.json")
    # plan() takes the Profile itself, as the CLI takes the file.
    assert pipetwin.plan(profile=prof, stages=2, batch=4, chunks=2) == \
        pipetwin.plan(profile=tmp_path / "cli.json", stages=2, batch=4, chunks=2)


def test_zoo_lists_and_describes(cli):
    presets = pipetwin.zoo()
    listing = cli.run("zoo")
    assert len(presets) > 10 and all(name in listing for name in presets["name"])
    gpt2 = pipetwin.zoo("gpt2:124m")
    layers = gpt2["layers"]
    assert layers["params"].sum() == gpt2["params"]
    assert gpt2["published_params"] == gpt2["params"] - gpt2["tied_params"]
    assert 124e6 < gpt2["published_params"] < 125e6  # GPT-2 small's published 124M
    table = cli.run("zoo", "gpt2:124m", "--dtype", "bfloat16")
    half = pipetwin.zoo("gpt2:124m", dtype="bfloat16")["layers"]
    for row in half.itertuples():
        line = next(l for l in table.splitlines() if l.split()[:2] == [str(row.index), row.layer])
        assert f"{row.gflops_per_sample:.4f}" in line and f"{row.saved_mib_per_sample:.3f}" in line
    assert list(half["saved_mib_per_sample"] * 2) == \
        pytest.approx(list(layers["saved_mib_per_sample"]))


def test_capacity_rows_are_the_cli_csv(cli, tmp_path):
    import numpy as np
    import pandas as pd
    model = ("uniform:layers=16,fwd_ms=0.5,bwd_ms=1,act_kb=768,param_kb=1572864,"
             "optimizer_kb=3145728")  # 96 GiB with Adam: one H100 cannot hold it
    df = pipetwin.capacity(model=model, batch=64, samples=100000, clusters="dgx-h100,h100-1gpu",
                           schedules=["1f1b"], partitioner="balance-time",
                           checkpoint_modes="none")
    cli.run("capacity", "--model", model, "-B", 64, "--samples", 100000, "--clusters",
            "dgx-h100,h100-1gpu", "--schedules", "1f1b", "--partitioner", "balance-time",
            "--checkpoint-modes", "none", "-o", tmp_path / "cap", "-q")
    csv = pd.read_csv(tmp_path / "cap" / "capacity.csv")
    assert list(df.columns) == list(csv.columns[:-1]) + ["plan"]
    assert list(df["objective"]) == ["fastest", "cheapest", "none"]
    for column in csv.columns[:-1]:
        if pd.api.types.is_numeric_dtype(csv[column]):
            assert np.allclose(df[column].astype(float), csv[column], rtol=1e-12, atol=0.5,
                               equal_nan=True), column
        else:
            assert list(df[column].fillna("")) == list(csv[column].fillna("")), column
    for plan, file in zip(df["plan"], csv["plan_file"]):
        if isinstance(file, str):
            assert plan == pipetwin.load_plan(tmp_path / "cap" / file)
    assert df.iloc[2]["cluster"] == "h100-1gpu" and df.iloc[2]["fits"] == "no"
