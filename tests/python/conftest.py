"""Fixtures of the `import pipetwin` suite (tests/python/).

The suite runs under Debian's /usr/bin/python3 -m pytest with PYTHONPATH=<build>/python (ctest's
`python_api`, tests/CMakeLists.txt). It checks the API against the CLI binary built beside it:
$PIPETWIN_CLI, by default <build>/pipetwin next to <build>/python/pipetwin/.
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

import pipetwin

ROOT = Path(__file__).resolve().parents[2]
os.environ.setdefault("PIPETWIN_DATA", str(ROOT))
NOTEBOOK_RESULTS = ROOT / "tests" / "data" / "notebook_results"
TRACES = ROOT / "tests" / "data" / "traces"


def cli_path():
    given = os.environ.get("PIPETWIN_CLI")
    return Path(given) if given else Path(pipetwin.__file__).resolve().parents[2] / "pipetwin"


class Cli:
    """The pipetwin binary: run(...) for a verb that must succeed, error(...) for the one-line
    message of one that must fail (without "pipetwin: error: " and CLI11's help hint)."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, cwd=None):
        r = subprocess.run([str(self.path), *map(str, args)], capture_output=True, text=True,
                           cwd=cwd, check=False)
        assert r.returncode == 0, f"pipetwin {' '.join(map(str, args))}: {r.stderr}"
        return r.stdout

    def error(self, *args):
        r = subprocess.run([str(self.path), *map(str, args)], capture_output=True, text=True,
                           check=False)
        assert r.returncode == 2, f"pipetwin {' '.join(map(str, args))} exited {r.returncode}"
        line = r.stderr.strip()
        assert "\n" not in line, line
        prefix = "pipetwin: error: "
        assert line.startswith(prefix), line
        return line[len(prefix):].removesuffix(" (see pipetwin --help)")


@pytest.fixture(scope="session")
def cli():
    path = cli_path()
    assert path.is_file(), f"no pipetwin binary at {path} (set PIPETWIN_CLI)"
    return Cli(path)


@pytest.fixture
def ideal_cluster(tmp_path):
    """A cluster file of free transfers (infinite bandwidth, no latency) and ample memory, where
    the simulator's times have closed forms (tests/closed_form_test.cpp's ideal cluster)."""
    link = {"name": "ideal-link", "bandwidth": 1e15, "latency": 0}
    doc = {"format": "pipetwin.cluster", "version": 1, "name": "ideal",
           "device": {"name": "ideal-device", "memory_bytes": 1e15, "memory_bandwidth": 1e12,
                      "peak_flops": {"float32": 1e15}},
           "nodes": 1, "devices_per_node": 64, "intra_node_link": link, "relative_speed": 1}
    path = tmp_path / "ideal.cluster.json"
    path.write_text(json.dumps(doc))
    return str(path)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)
