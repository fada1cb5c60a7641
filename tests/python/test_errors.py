"""Bad input raises pipetwin.InputError carrying the CLI's one-line message, word for word."""

import json
import re

import pytest

import pipetwin
from conftest import NOTEBOOK_RESULTS, TRACES

MODEL = "uniform:layers=4"


@pytest.fixture
def broken_plan(tmp_path):
    """A plan file whose chunk count is 0: an error naming the file and the field."""
    doc = json.loads(pipetwin.plan(model=MODEL, batch=8, chunks=4).to_json())
    doc["chunks"] = 0
    path = tmp_path / "broken.plan.json"
    path.write_text(json.dumps(doc))
    return path


# (API call, CLI arguments): the same request both ways. `o` is a scratch output path.
CASES = {
    "chunks": (lambda o: pipetwin.plan(model=MODEL, chunks=0),
               ["plan", "--model", MODEL, "-M", "0", "-o", "{o}"]),
    "chunks-text": (lambda o: pipetwin.plan(model=MODEL, chunks="many"),
                    ["plan", "--model", MODEL, "-M", "many", "-o", "{o}"]),
    "model": (lambda o: pipetwin.plan(model="nosuch:1"),
              ["plan", "--model", "nosuch:1", "-o", "{o}"]),
    "preset": (lambda o: pipetwin.plan(model="gpt2:huge"),
               ["plan", "--model", "gpt2:huge", "-o", "{o}"]),
    "cluster": (lambda o: pipetwin.plan(model=MODEL, cluster="no-such-cluster"),
                ["plan", "--model", MODEL, "--cluster", "no-such-cluster", "-o", "{o}"]),
    "schedule": (lambda o: pipetwin.plan(model=MODEL, schedule="2f2b"),
                 ["plan", "--model", MODEL, "--schedule", "2f2b", "-o", "{o}"]),
    "dtype": (lambda o: pipetwin.plan(model=MODEL, dtype="float8"),
              ["plan", "--model", MODEL, "--dtype", "float8", "-o", "{o}"]),
    "stages": (lambda o: pipetwin.plan(model=MODEL, stages=5),
               ["plan", "--model", MODEL, "-K", "5", "-o", "{o}"]),
    "schedules": (lambda o: pipetwin.plan(model=MODEL, schedules=["1f1b"]),
                  ["plan", "--model", MODEL, "--schedules", "1f1b", "-o", "{o}"]),
    "checkpoint": (lambda o: pipetwin.plan(model=MODEL, checkpoint_mode="sometimes"),
                   ["plan", "--model", MODEL, "--checkpoint-mode", "sometimes", "-o", "{o}"]),
    "no-plan": (lambda o: pipetwin.simulate(), ["simulate"]),
    "missing-plan": (lambda o: pipetwin.simulate("/nonexistent/p.json"),
                     ["simulate", "--plan", "/nonexistent/p.json"]),
    "elastic-flag": (lambda o: pipetwin.simulate(alpha=0.3), ["simulate", "--alpha", "0.3"]),
    "elastic-batch": (lambda o: pipetwin.simulate(elastic=True, model=MODEL),
                      ["simulate", "--elastic", "--model", MODEL]),
    "grid": (lambda o: pipetwin.sweep("chunks=32:4:4", model=MODEL),
             ["sweep", "--model", MODEL, "--grid", "chunks=32:4:4", "-o", "{o}"]),
    "grid-field": (lambda o: pipetwin.sweep("colour=red", model=MODEL),
                   ["sweep", "--model", MODEL, "--grid", "colour=red", "-o", "{o}"]),
    "no-grid": (lambda o: pipetwin.sweep(model=MODEL), ["sweep", "--model", MODEL, "-o", "{o}"]),
    "compare-kinds": (lambda o: pipetwin.compare(NOTEBOOK_RESULTS / "vit.sim.metrics.json",
                                                 NOTEBOOK_RESULTS / "vit.run.trace.json"),
                      ["compare", NOTEBOOK_RESULTS / "vit.sim.metrics.json",
                       NOTEBOOK_RESULTS / "vit.run.trace.json"]),
    "trace-missing": (lambda o: pipetwin.import_trace("/nonexistent/t.json"),
                      ["import-trace", "/nonexistent/t.json", "-o", "{o}"]),
    "trace-layers": (lambda o: pipetwin.import_trace(TRACES / "cpu-skip.trace.json",
                                                     layers="depth=0"),
                     ["import-trace", TRACES / "cpu-skip.trace.json", "--layers", "depth=0", "-o",
                      "{o}"]),
    "trace-loss": (lambda o: pipetwin.import_trace(TRACES / "cpu-skip.trace.json", loss="first"),
                   ["import-trace", TRACES / "cpu-skip.trace.json", "--loss", "first", "-o",
                    "{o}"]),
    "zoo": (lambda o: pipetwin.zoo("bert:huge"), ["zoo", "bert:huge"]),
    "zoo-dtype": (lambda o: pipetwin.zoo("gpt2:124m", dtype="float8"),
                  ["zoo", "gpt2:124m", "--dtype", "float8"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_message_as_the_cli(cli, tmp_path, case):
    call, args = CASES[case]
    out = tmp_path / "out"
    expected = cli.error(*[str(a).replace("{o}", str(out)) for a in args])
    with pytest.raises(pipetwin.InputError) as e:
        call(out)
    assert str(e.value) == expected
    assert isinstance(e.value, ValueError)
    assert not out.exists()


def test_broken_plan_file_names_file_and_field(cli, broken_plan):
    expected = cli.error("simulate", "--plan", broken_plan)
    assert str(broken_plan) in expected and "chunks" in expected
    with pytest.raises(pipetwin.InputError, match="^" + re.escape(expected) + "$"):
        pipetwin.simulate(broken_plan)
    with pytest.raises(pipetwin.InputError) as e:
        pipetwin.load_plan(broken_plan)
    assert str(e.value) == expected


def test_unknown_keyword_and_wrong_types_are_type_errors():
    with pytest.raises(TypeError, match="plan\\(\\) got an unexpected keyword argument 'chunk'"):
        pipetwin.plan(model=MODEL, chunk=4)
    with pytest.raises(TypeError, match="plan\\(\\): stages must be an int, not str"):
        pipetwin.plan(model=MODEL, stages="4")
    with pytest.raises(TypeError, match="plan\\(\\): stages must be an int, not float"):
        pipetwin.plan(model=MODEL, stages=4.0)
    with pytest.raises(TypeError, match="simulate\\(\\) got an unexpected keyword argument"):
        pipetwin.simulate(pipetwin.plan(model=MODEL), timelines="x.json")
    with pytest.raises(TypeError):
        pipetwin.simulate(42)


def test_none_means_the_default():
    assert pipetwin.plan(model=MODEL, cluster=None, chunks=None, dtype=None) == \
        pipetwin.plan(model=MODEL)
