"""framework=: the overheads fitted by `pipetwin calibrate --runs` (docs/framework-fit.md) taken by
plan(), simulate() and sweep() through the shared option tables, with the CLI's numbers; and the
CLI's fit, end to end, giving back the terms its runs were simulated with."""

import csv
import json

import pipetwin
from conftest import load

MODEL = "uniform:layers=8,fwd_ms=2,bwd_ms=4,act_kb=4096,param_kb=16384"
TERMS = {"iteration_s": 0.002, "micro_batch_s": 0.0003, "layer_launch_s": 0.0001,
         "compute_scale": 1.2, "communication_scale": 1.5}


def framework_file(path, terms=TERMS):
    path.write_text(json.dumps({"format": "pipetwin.framework", "version": 1, "name": "test",
                                "terms": terms}))
    return str(path)


def test_framework_keyword_matches_the_cli(cli, tmp_path):
    fw = framework_file(tmp_path / "fw.json")
    base = dict(model=MODEL, cluster="l4-8x", stages=2, batch=8, chunks=4)
    with_fw = pipetwin.simulate(pipetwin.plan(**base, framework=fw))["iteration_time_s"]
    without = pipetwin.simulate(pipetwin.plan(**base))["iteration_time_s"]
    assert with_fw > without * 1.2  # every compute time 1.2x, plus the overheads
    cli.run("plan", "--model", MODEL, "--cluster", "l4-8x", "-K", 2, "-B", 8, "-M", 4, "-q",
            "-o", tmp_path / "p.json")
    cli.run("simulate", "--plan", tmp_path / "p.json", "--framework", fw, "-q", "--metrics",
            tmp_path / "m.json")
    assert load(tmp_path / "m.json")["iteration_time_s"] == with_fw
    assert pipetwin.simulate(str(tmp_path / "p.json"), framework=fw)["iteration_time_s"] == with_fw
    swept = pipetwin.sweep("stages=2", **base, framework=fw)
    assert swept["iteration_time_s"].tolist() == [with_fw]


def test_calibrate_runs_recovers_the_terms_end_to_end(cli, tmp_path):
    fw = framework_file(tmp_path / "truth.json")
    rows = []
    for k in (1, 2, 4):
        for dp in (1, 2):
            for m in (1, 4, 8):
                for b in (1, 4):
                    plan = pipetwin.plan(model=MODEL, cluster="l4-8x", stages=k, dp=dp,
                                         batch=b * m * dp, chunks=m,
                                         schedule="1f1b" if k == 4 else "gpipe", framework=fw)
                    t = pipetwin.simulate(plan)["iteration_time_s"]
                    rows.append([MODEL, "l4-8x", k, dp, b * m * dp, b,
                                 "1f1b" if k == 4 else "gpipe", "", "", f"{t * 1e3:.9g}"])
    with open(tmp_path / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "cluster", "stages", "dp", "batch", "micro_batch", "schedule", "dtype",
                    "optimizer", "measured_ms"])
        w.writerows(rows)
    out = cli.run("calibrate", "--runs", tmp_path / "runs.csv", "-o", tmp_path / "fit.json")
    assert "leave-one-out" in out
    fitted = load(tmp_path / "fit.json")["terms"]
    for name, value in TERMS.items():
        assert abs(fitted[name] - value) <= 0.02 * value, (name, fitted[name], value)
    assert cli.error("calibrate", "--runs", tmp_path / "missing.csv") == \
        f"{tmp_path / 'missing.csv'}: cannot read the runs file"
