"""plan() and simulate(): the CLI's numbers and files, and closed forms of the simulator."""

import os
import pickle
import subprocess
import sys

import pytest

import pipetwin
from conftest import load

GPT2 = dict(model="gpt2:124m", cluster="dgx-h100", stages=4, schedule="1f1b", batch=32, chunks=8)
GPT2_FLAGS = ["--model", "gpt2:124m", "--cluster", "dgx-h100", "-K", "4", "--schedule", "1f1b",
              "-B", "32", "-M", "8"]


def test_metrics_equal_the_cli_files(cli, tmp_path):
    p = pipetwin.plan(**GPT2)
    m = pipetwin.simulate(p)
    cli.run("plan", *GPT2_FLAGS, "-o", tmp_path / "p.json", "-q")
    cli.run("simulate", "--plan", tmp_path / "p.json", "--metrics", tmp_path / "m.json", "-q")
    expected = load(tmp_path / "m.json")
    assert m["iteration_time_s"] == expected["iteration_time_s"]  # to the last bit
    assert dict(m) == expected
    # The plan is the CLI's, byte for byte, and loads back equal.
    assert p.to_json() == (tmp_path / "p.json").read_text()
    assert pipetwin.load_plan(tmp_path / "p.json") == p


def test_the_one_liner_prints_the_cli_number(cli, tmp_path):
    code = ("import pipetwin; m = pipetwin.simulate(pipetwin.plan(model='gpt2:124m', "
            "cluster='dgx-h100', stages=4, schedule='1f1b', batch=32, chunks=8)); "
            "print(m['iteration_time_s'])")
    out = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                         check=True, env=os.environ).stdout
    cli.run("plan", *GPT2_FLAGS, "-o", tmp_path / "p.json", "-q")
    cli.run("simulate", "--plan", tmp_path / "p.json", "--metrics", tmp_path / "m.json", "-q")
    assert float(out) == load(tmp_path / "m.json")["iteration_time_s"]


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("K,M", [(1, 1), (2, 3), (4, 8)])
def test_equal_stages_closed_form(ideal_cluster, schedule, K, M):
    # K equal stages of forward f and backward b per micro-batch, free transfers: an iteration
    # lasts (M + K - 1)(f + b), and the bubble is (K - 1) / (M + K - 1) (GPipe, Section 2.3).
    f, b = 1.5, 2.5
    p = pipetwin.plan(model=f"uniform:layers={K},fwd_ms={f},bwd_ms={b}", cluster=ideal_cluster,
                      stages=K, schedule=schedule, batch=M, chunks=M)
    m = pipetwin.simulate(p, iterations=3)
    assert m["iteration_time_s"] == pytest.approx((M + K - 1) * (f + b) * 1e-3, abs=1e-9)
    assert m["bubble_fraction"] == pytest.approx((K - 1) / (M + K - 1), abs=1e-9)
    assert m.step_times() == pytest.approx([(M + K - 1) * (f + b) * 1e-3] * 3, abs=1e-9)


def test_actions_add_up_to_the_stage_costs(ideal_cluster):
    # Every stage runs M forwards and M backwards per iteration, each as long as the plan's
    # stage table predicts: 3 layers x 1 ms x 2 samples forward, twice that backward.
    p = pipetwin.plan(model="uniform:layers=6,fwd_ms=1", cluster=ideal_cluster, stages=2,
                      schedule="1f1b", batch=8, chunks=4)
    sim = pipetwin.simulate(p, iterations=2)
    stages = p.stage_table()
    assert list(stages["forward_s"]) == pytest.approx([6e-3, 6e-3])
    assert list(stages["backward_s"]) == pytest.approx([12e-3, 12e-3])
    actions = sim.actions
    for op, column in (("forward", "forward_s"), ("backward", "backward_s")):
        done = actions[actions["op"] == op].groupby("stage")["duration_s"]
        assert list(done.count()) == [4 * 2, 4 * 2]
        assert list(done.sum()) == pytest.approx(list(stages[column] * 4 * 2))
    assert set(actions["stream"]) >= {"compute"}
    assert len(sim.timeline) == len(sim.timeline_object)


def test_timeline_is_the_cli_trace(cli, tmp_path):
    p = pipetwin.plan(model="uniform:layers=4,act_kb=64", stages=2, schedule="1f1b", batch=8,
                      chunks=4, output=tmp_path / "p.json")
    sim = pipetwin.simulate(p, timeline=tmp_path / "api.trace.json")
    cli.run("simulate", "--plan", tmp_path / "p.json", "--timeline", tmp_path / "cli.trace.json",
            "-q")
    assert (tmp_path / "api.trace.json").read_bytes() == (tmp_path / "cli.trace.json").read_bytes()
    trace = load(tmp_path / "cli.trace.json")
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(sim.timeline) > 0
    for x, e in zip(xs, sim.timeline):
        assert (x["pid"], x["args"]["op"], x["args"]["stage"], x["args"].get("mb"), x["name"]) == \
               (e["device"], e["op"], e["stage"], e["mb"], e["name"])
        assert x["ts"] * 1e-6 == pytest.approx(e["start_s"], abs=1e-9)
        assert x["dur"] * 1e-6 == pytest.approx(e["duration_s"], abs=2e-9)
    sends = [e for e in sim.timeline if e["op"] == "send"]
    assert sends and all(e["payload"] in ("activation", "gradient") for e in sends)
    memory = sim.memory
    assert set(memory["device"]) == {0, 1} and (memory["bytes"] >= 0).all()


def test_plan_round_trips(tmp_path, cli, ideal_cluster):
    p = pipetwin.plan(model="uniform:layers=8", cluster=ideal_cluster, stages=4, schedule="1f1b",
                      batch=16, chunks=4, partitioner="balance-time")
    path = tmp_path / "plan.json"
    p.save(path)
    assert pipetwin.Plan.load(path) == p
    assert pipetwin.Plan.from_json(p.to_json()) == p
    assert pipetwin.Plan.from_json(p.to_dict()) == p
    assert pickle.loads(pickle.dumps(p)) == p
    assert (p.num_stages, p.chunks, p.micro_batch, p.partitioner) == (4, 4, 4, "balance-time")
    assert [s["layers"] for s in p.stages] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    # A saved plan is a CLI plan: the CLI simulates it to the API's numbers.
    cli.run("simulate", "--plan", path, "--metrics", tmp_path / "m.json", "-q")
    assert dict(pipetwin.simulate(str(path))) == load(tmp_path / "m.json")
    assert p != pipetwin.plan(model="uniform:layers=8", cluster=ideal_cluster, stages=2, batch=16,
                              chunks=4)


def test_schedule_auto_lists_the_candidates(cli, tmp_path, ideal_cluster):
    p = pipetwin.plan(model="uniform:layers=8", cluster=ideal_cluster, stages=4, schedule="auto",
                      batch=16, chunks=8, schedules="gpipe,1f1b,zb-h1")
    cli.run("plan", "--model", "uniform:layers=8", "--cluster", ideal_cluster, "-K", 4,
            "--schedule", "auto", "-B", 16, "-M", 8, "--schedules", "gpipe,1f1b,zb-h1", "-o",
            tmp_path / "p.json", "-q")
    assert p == pipetwin.load_plan(tmp_path / "p.json")
    search = p.search
    assert list(search["schedule"]) == ["gpipe", "1f1b", "zb-h1"]
    assert list(search["outcome"]).count("chosen") == 1
    chosen = search[search["outcome"] == "chosen"].iloc[0]
    assert chosen["schedule"] == p.schedule
    assert chosen["iteration_time_s"] == pytest.approx(pipetwin.simulate(p)["iteration_time_s"])
    assert pipetwin.plan(model="uniform:layers=8", cluster=ideal_cluster, stages=4).search is None


def test_elastic_replay_equals_the_cli_report(cli, tmp_path):
    model = "uniform:layers=12,fwd_ms=1,bwd_ms=2,act_kb=64,param_kb=4096"
    r = pipetwin.simulate(elastic=True, model=model, batch=32, stages=8, samples=3200, epochs=3,
                          alpha=0.3)
    cli.run("simulate", "--elastic", "--model", model, "-B", 32, "-K", 8, "--samples", 3200,
            "--epochs", 3, "--alpha", 0.3, "--report", tmp_path / "r.json", "--log",
            tmp_path / "l.json", "-q")
    assert dict(r) == load(tmp_path / "r.json")
    assert r.epoch_log == load(tmp_path / "l.json")
    assert list(r.epochs["epoch"]) == [0, 1, 2]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))


def test_tensor_parallel_keywords():
    # --tp, --sequence-parallel and --distributed-optimizer are keywords like the CLI's flags: a
    # t = 2 plan of GPT-2 tiny (8 heads) on a DGX H100 holds half the weights per device.
    kw = dict(model="gpt2:tiny,heads=8", cluster="dgx-h100", stages=2, schedule="1f1b", batch=16,
              chunks=4, dtype="bfloat16", optimizer="adam")
    whole = pipetwin.plan(**kw)
    shard = pipetwin.plan(**kw, tp=2, sequence_parallel=True, distributed_optimizer=True, dp=2)
    doc = shard.to_dict()
    assert doc["tensor_parallel"] == {"size": 2, "sequence_parallel": True}
    assert doc["distributed_optimizer"] is True
    whole_params = sum(l["param_bytes"] for l in whole.to_dict()["profile"]["layers"])
    shard_params = sum(l["param_bytes"] for l in doc["profile"]["layers"])
    assert 0.5 <= shard_params / whole_params < 0.6
    with pytest.raises(pipetwin.InputError, match="--sequence-parallel needs --tp > 1"):
        pipetwin.plan(**kw, sequence_parallel=True)
