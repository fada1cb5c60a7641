"""sweep() and sweep_merge(): the CLI's CSV as a DataFrame, resumable and shardable."""

import pandas as pd
import pytest

import pipetwin

MODEL = "uniform:layers=8,fwd_ms=1,bwd_ms=2,act_kb=64"
GRID = "stages=1,2,4;chunks=1,4,8;schedule=gpipe,1f1b"
CLUSTER = "pipetransformer-2x8-rtx5000"
FLAGS = ["--model", MODEL, "--cluster", CLUSTER, "-B", "32", "--grid", GRID, "-j", "1", "-q"]


def sweep(**extra):
    return pipetwin.sweep(GRID, model=MODEL, cluster=CLUSTER, batch=32, jobs=1, **extra)


def test_table_is_the_cli_csv(cli, tmp_path):
    df = sweep()
    cli.run("sweep", *FLAGS, "-o", tmp_path / "cli.csv")
    pd.testing.assert_frame_equal(df, pd.read_csv(tmp_path / "cli.csv"))
    assert len(df) == 18 and df.attrs["complete"] and df.attrs["computed"] == 18
    # Per K, more micro-batches never lengthen a GPipe iteration of this model here: the bubble
    # (K - 1) / (M + K - 1) shrinks (chunk_sweep.ipynb plots it).
    gpipe = df[(df["schedule"] == "gpipe") & (df["stages"] == 4)].sort_values("chunks")
    assert list(gpipe["bubble_fraction"]) == sorted(gpipe["bubble_fraction"], reverse=True)


def test_output_files_are_the_cli_files(cli, tmp_path):
    df = sweep(output=tmp_path / "api.csv", top=3)
    cli.run("sweep", *FLAGS, "--top", 3, "-o", tmp_path / "cli.csv")
    assert (tmp_path / "api.csv").read_bytes() == (tmp_path / "cli.csv").read_bytes()
    assert (tmp_path / "api.best.csv").read_bytes() == (tmp_path / "cli.best.csv").read_bytes()
    assert df.attrs["best"] == str(tmp_path / "api.best.csv")


def test_limit_then_resume(tmp_path):
    out = tmp_path / "s.csv"
    part = sweep(output=out, limit=5)
    assert len(part) == 5 and not part.attrs["complete"]
    whole = sweep(output=out)
    assert whole.attrs["complete"] and whole.attrs["resumed"] == 5
    assert whole.attrs["computed"] == 13
    pd.testing.assert_frame_equal(whole, sweep())


def test_shards_merge_to_the_whole(tmp_path):
    shards = [tmp_path / f"s.{i}.csv" for i in range(2)]
    for i, path in enumerate(shards):
        assert len(sweep(output=path, shard=f"{i}/2")) == 9
    merged = pipetwin.sweep_merge(shards, tmp_path / "s.csv")
    pd.testing.assert_frame_equal(merged, sweep())


def test_infeasible_points_keep_their_reason():
    df = pipetwin.sweep("stages=2,16", model=MODEL, cluster=CLUSTER, batch=8, chunks=4)
    bad = df[df["stages"] == 16].iloc[0]
    assert isinstance(bad["error"], str) and "16" in bad["error"]
    assert pd.isna(df[df["stages"] == 2].iloc[0]["error"])


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__]))
