#!/usr/bin/env python3
"""scripts/check_layers.py: the tree follows the layer order, and a wrong include fails it.

Usage: tests/check_layers_test.py REPO_ROOT
"""
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(sys.argv.pop(1) if len(sys.argv) > 1 else ".").resolve()
SCRIPT = ROOT / "scripts" / "check_layers.py"


def run(root):
    out = subprocess.run([sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True,
                         check=False)
    return out.returncode, out.stdout


def tree(files):
    """A temporary tree with `files` (path -> text)."""
    tmp = tempfile.TemporaryDirectory()
    for rel, text in files.items():
        path = pathlib.Path(tmp.name) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp


class CheckLayers(unittest.TestCase):
    def test_the_repository_follows_the_order(self):
        code, out = run(ROOT)
        self.assertEqual(code, 0, out)

    def test_downward_includes_pass(self):
        with tree({"core/plan.hpp": "#pragma once\n",
                   "sim/engine.cpp": '#include "core/plan.hpp"\n',
                   "studies/sweep/grid.cpp": '#include "sim/engine.hpp"\n#include "core/plan.hpp"\n',
                   "cli/main.cpp": '#include "studies/sweep/grid.hpp"\n'}) as t:
            code, out = run(t)
        self.assertEqual(code, 0, out)

    def test_core_including_sim_fails_naming_file_line_and_layers(self):
        with tree({"core/plan.cpp": '#include <vector>\n\n#include "sim/engine.hpp"\n',
                   "sim/engine.hpp": "#pragma once\n"}) as t:
            code, out = run(t)
        self.assertEqual(code, 1)
        self.assertIn('core/plan.cpp:3: core/ includes "sim/engine.hpp" of sim/', out)

    def test_sim_including_studies_fails(self):
        with tree({"sim/planner.cpp": '#include "studies/capacity.hpp"\n'}) as t:
            code, out = run(t)
        self.assertEqual(code, 1)
        self.assertIn("sim/ includes \"studies/capacity.hpp\" of studies/", out)

    def test_runtime_including_train_fails(self):
        with tree({"exec/runtime/worker.cpp": '#include "exec/train/train_data.hpp"\n'}) as t:
            code, out = run(t)
        self.assertEqual(code, 1)
        self.assertIn("exec/runtime/ includes \"exec/train/train_data.hpp\" of exec/train/", out)

    def test_partition_including_elastic_fails(self):
        with tree({"core/partition/autopipe.cpp": '#include "core/elastic/autopipe.hpp"\n'}) as t:
            code, _ = run(t)
        self.assertEqual(code, 1)

    def test_libtorch_below_models_fails(self):
        with tree({"sim/engine.cpp": "#include <ATen/ATen.h>\n",
                   "models/vit.cpp": "#include <ATen/ATen.h>\n"}) as t:
            code, out = run(t)
        self.assertEqual(code, 1)
        self.assertIn("sim/engine.cpp:1: includes LibTorch <ATen/ATen.h> below models/", out)
        self.assertNotIn("models/vit.cpp", out)

    def test_a_cycle_between_two_files_fails(self):
        with tree({"core/cluster.hpp": '#include "core/topology.hpp"\n',
                   "core/topology.hpp": '#include "core/cluster.hpp"\n'}) as t:
            code, out = run(t)
        self.assertEqual(code, 1)
        self.assertIn("include cycle: core/cluster.hpp -> core/topology.hpp -> core/cluster.hpp",
                      out)


if __name__ == "__main__":
    unittest.main()
