"""python/pipetwin_save.py's save_for_pipetwin: the TorchScript module and the metadata beside it
that `pipetwin profile|run|train --model torchscript:FILE.pt` reads (models/torchscript.hpp), and
the models it refuses, in Python, naming the child. Needs Debian's python3-torch (skipped
without); the C++ side of the same files is tests/models_torchscript_test.cpp."""

import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import pipetwin_save  # noqa: E402
import pipetwin_trace  # noqa: E402
from pipetwin_save import save_for_pipetwin  # noqa: E402


def mlp(classes=5):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 24), nn.ReLU(), nn.Linear(24, classes))


class Blocks(nn.Module):
    """An embedding, a `layers` ModuleList, a head: a label per token. Its forward does more than
    call its children (a relu after each of the layers), which pipetwin cannot cut."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.embed = nn.Embedding(11, 8)
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(2)])
        self.head = nn.Linear(8, 11)

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = torch.relu(layer(x))
        return self.head(x)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 5)

    def forward(self, x, skip):
        return self.fc(x + skip)


class Skip(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.a = nn.Sequential(nn.Linear(16, 24), nn.ReLU())
        self.b = nn.Sequential(nn.Linear(24, 24), nn.ReLU())
        self.head = Head()

    def forward(self, x):
        a = self.a(x)
        return self.head(self.b(a), a)


def saved(tmp_path, model, x, **kw):
    path = str(tmp_path / "m.pt")
    meta = save_for_pipetwin(model, x, path, **kw)
    with open(path + ".json") as f:
        assert json.load(f) == json.loads(json.dumps(meta))
    return path, meta


def test_mlp_metadata_and_the_saved_module(tmp_path):
    model, x = mlp(), torch.randn(3, 16)
    path, meta = saved(tmp_path, model, x, name="mine")
    assert meta["format"] == "pipetwin.torchscript" and meta["model"] == "mine"
    assert meta["input_shape"] == [16] and meta["input_dtype"] == "float32"
    assert meta["loss"] == "cross_entropy" and meta["classes"] == 5
    assert meta["target_shape"] == [] and meta["parameters"] == 16 * 24 + 24 + 24 * 5 + 5
    assert [(l["name"], l["kind"], l["skip_from"]) for l in meta["layers"]] == [
        ("0", "linear", None), ("1", "relu", None), ("2", "linear", None)]
    loaded = torch.jit.load(path)
    assert torch.equal(loaded(x), model(x))
    assert [n for n, _ in loaded.named_children()] == ["0", "1", "2"]


def test_a_layers_modulelist_stands_for_its_elements(tmp_path):
    class Chain(Blocks):
        def forward(self, x):
            x = self.embed(x)
            for layer in self.layers:
                x = layer(x)
            return self.head(x)

    _, meta = saved(tmp_path, Chain(), torch.randint(0, 11, (2, 6)))
    assert [l["name"] for l in meta["layers"]] == ["embed", "layers.0", "layers.1", "head"]
    assert meta["input_dtype"] == "int64" and meta["vocab"] == 11  # the nn.Embedding's
    assert meta["input_shape"] == [6] and meta["target_shape"] == [6]
    assert meta["output_shape"] == [6, 11]


def test_mse_float64_and_a_skip_edge_from_the_autograd_graph(tmp_path):
    _, meta = saved(tmp_path, Skip().double(), torch.randn(2, 16, dtype=torch.float64), loss="mse")
    assert meta["dtype"] == "float64" and meta["input_dtype"] == "float64"
    assert meta["loss"] == "mse" and meta["target_shape"] == [5] and "classes" not in meta
    assert [l["skip_from"] for l in meta["layers"]] == [None, None, "a"]


@pytest.mark.parametrize("model, kw, message", [
    (Blocks(), {}, "its children applied in order give [2, 6, 11] where the model's forward "
                    "gives [2, 6, 11] with other values"),
    (mlp(), {"classes": 7}, "classes 7, but the output [2, 5] has 5 in its last dimension"),
    (mlp(), {"loss": "hinge"}, "loss: expected cross_entropy or mse, got 'hinge'"),
])
def test_refuses_what_pipetwin_cannot_cut(tmp_path, model, kw, message):
    x = torch.randint(0, 11, (2, 6)) if isinstance(model, Blocks) else torch.randn(2, 16)
    with pytest.raises(ValueError) as e:
        save_for_pipetwin(model, x, str(tmp_path / "m.pt"), **kw)
    assert message in str(e.value)
    assert not (tmp_path / "m.pt").exists() and not (tmp_path / "m.pt.json").exists()


class Reshape(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(16, 16)
        self.fc1 = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc1(self.fc0(x).reshape(x.shape[0], 4, 4))


def test_refuses_a_forward_between_children_naming_the_child(tmp_path):
    with pytest.raises(ValueError) as e:
        save_for_pipetwin(Reshape(), torch.randn(2, 16), str(tmp_path / "m.pt"))
    assert str(e.value).startswith("child 1 ('fc1') fails on its input [2, 16] (RuntimeError: "
                                   "mat1 and mat2 shapes cannot be multiplied (2x16 and 4x5))")


def test_refuses_shared_and_outside_parameters(tmp_path):
    shared = mlp()
    shared.add_module("3", nn.Linear(24, 5))
    shared[3].weight = shared[2].weight
    with pytest.raises(ValueError, match=r"children share a parameter \(3.weight is 2.weight\)"):
        save_for_pipetwin(shared, torch.randn(2, 16), str(tmp_path / "m.pt"))
    own = Skip()
    own.scale = nn.Parameter(torch.ones(1))
    with pytest.raises(ValueError, match="the model holds scale outside its children"):
        save_for_pipetwin(own, torch.randn(2, 16), str(tmp_path / "m.pt"))


def test_pipetwin_trace_re_exports_the_helpers():
    from pipetwin_trace import annotate, save_for_pipetwin as again  # noqa: F401
    assert again is pipetwin_save.save_for_pipetwin
    assert pipetwin_trace.annotate is pipetwin_save.annotate
