"""Fixtures of the TorchScript tests (tests/models_torchscript_test.cpp,
tests/exec_torchscript_test.cpp), made at test time with Debian's python3-torch 1.13, the LibTorch
pipetwin links:

    /usr/bin/python3 tests/data/torchscript_fixtures.py make OUT_DIR
        saves, with python/pipetwin_save.py's save_for_pipetwin, in float32 and float64:
          mlp{32,64}.pt     nn.Sequential of five Linear+ReLU blocks and a head (cross entropy)
          tfm{32,64}.pt     a small transformer: embedding, a `layers` ModuleList of three
                            nn.TransformerEncoderLayer, a head; a label per token (cross entropy)
          skip64.pt         three blocks and a head that also reads the first block (a skip edge)
          reg64.pt          a regression MLP (mse)
        and, with torch.jit.save alone (no metadata), modules pipetwin refuses:
          two_inputs.pt     a child takes two tensors and no skip edge is declared
          tuple_out.pt      a child returns a tuple
          reshape.pt        the forward reshapes between two children
          shared.pt         two children share a weight
          own_param.pt      the module holds a parameter outside its children
        and mlp32_plain.pt: mlp32 without metadata; outputs.pt: each model's output on a batch
        (reference values for the tests).

    /usr/bin/python3 tests/data/torchscript_fixtures.py train MODEL.pt BATCHES.pt OUT.pt
            --loss cross_entropy|mse --lr LR --momentum MU
        plain single-process training of the saved module: torch.optim.SGD over the batches
        BATCHES.pt holds ([x0, y0, x1, y1, ...], as pipetwin's executor made them), the mean loss
        of each mini-batch; writes [losses (float64), parameters...] to OUT.pt.
"""

import argparse
import os
import sys
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from pipetwin_save import save_for_pipetwin  # noqa: E402

SEQ, VOCAB, WIDTH = 8, 32, 16


def mlp(inputs=16, width=24, classes=5, blocks=5):
    layers, d = OrderedDict(), inputs
    for i in range(blocks):
        layers["fc%d" % i] = nn.Sequential(nn.Linear(d, width), nn.ReLU())
        d = width
    layers["head"] = nn.Linear(d, classes)
    return nn.Sequential(layers)


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.randn(SEQ, WIDTH) * 0.1)

    def forward(self, x):
        return self.tok(x) + self.pos


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, x):
        return self.out(self.norm(x))


class TinyTransformer(nn.Module):
    def __init__(self, blocks=3):
        super().__init__()
        self.embed = Embed()
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(WIDTH, 2, 2 * WIDTH, dropout=0.0, batch_first=True)
            for _ in range(blocks)])
        self.head = Head()

    def forward(self, x):
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class SkipHead(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.fc = nn.Linear(width, classes)

    def forward(self, x, skip):
        return self.fc(x + skip)


class SkipMLP(nn.Module):
    def __init__(self, inputs=16, width=24, classes=5):
        super().__init__()
        self.fc0 = nn.Sequential(nn.Linear(inputs, width), nn.ReLU())
        self.fc1 = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.fc2 = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.head = SkipHead(width, classes)

    def forward(self, x):
        a = self.fc0(x)
        return self.head(self.fc2(self.fc1(a)), a)


class Pair(nn.Module):
    def forward(self, x):
        return x, x * 2


class TakesFirst(nn.Module):
    def forward(self, xy: tuple[torch.Tensor, torch.Tensor]):
        return xy[0] + xy[1]


class TupleOut(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.pair = Pair()
        self.join = TakesFirst()

    def forward(self, x):
        return self.join(self.pair(self.fc(x)))


class Reshape(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(16, 16)
        self.fc1 = nn.Linear(4, 5)

    def forward(self, x):
        return self.fc1(self.fc0(x).reshape(x.shape[0], 4, 4))


class Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(16, 16)
        self.fc1 = nn.Linear(16, 16)
        self.fc1.weight = self.fc0.weight

    def forward(self, x):
        return self.fc1(self.fc0(x))


class OwnParam(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(16))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(x)


def make(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    p = lambda name: os.path.join(out_dir, name)  # noqa: E731
    outputs = []
    x = torch.randn(4, 16)
    tokens = torch.randint(0, VOCAB, (4, SEQ))
    for bits, dtype in ((32, torch.float32), (64, torch.float64)):
        torch.manual_seed(bits)
        model = mlp().to(dtype)
        save_for_pipetwin(model, x.to(dtype), p("mlp%d.pt" % bits), name="mlp")
        outputs += [x.to(dtype), model(x.to(dtype)).detach()]
        torch.manual_seed(bits + 1)
        model = TinyTransformer().to(dtype)
        save_for_pipetwin(model, tokens, p("tfm%d.pt" % bits), name="tiny-transformer")
        outputs += [tokens, model.eval()(tokens).detach()]
    torch.manual_seed(3)
    save_for_pipetwin(SkipMLP().double(), x.double(), p("skip64.pt"), name="skip-mlp")
    torch.manual_seed(4)
    reg = nn.Sequential(nn.Linear(16, 24), nn.Tanh(), nn.Linear(24, 8)).double()
    save_for_pipetwin(reg, x.double(), p("reg64.pt"), loss="mse", name="regression")
    torch.manual_seed(32)
    torch.jit.save(torch.jit.script(mlp()), p("mlp32_plain.pt"))
    torch.save(outputs, p("outputs.pt"))
    torch.jit.save(torch.jit.script(SkipMLP()), p("two_inputs.pt"))
    torch.jit.save(torch.jit.script(TupleOut()), p("tuple_out.pt"))
    torch.jit.save(torch.jit.script(Reshape()), p("reshape.pt"))
    torch.jit.save(torch.jit.script(Shared()), p("shared.pt"))
    torch.jit.save(torch.jit.script(OwnParam()), p("own_param.pt"))


def per_sample_mean_loss(output, target, loss):
    if loss == "mse":
        return F.mse_loss(output, target)
    return F.cross_entropy(output.reshape(-1, output.shape[-1]), target.reshape(-1))


def train(a):
    model = torch.jit.load(a.model)
    model.train()
    batches = torch.load(a.batches)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    losses = []
    for step in range(len(batches) // 2):
        x, y = batches[2 * step], batches[2 * step + 1]
        opt.zero_grad()
        loss = per_sample_mean_loss(model(x), y, a.loss)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    params = [p.detach().clone() for p in model.parameters()]
    torch.save([torch.tensor(losses, dtype=torch.float64)] + params, a.out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("out_dir")
    t = sub.add_parser("train")
    t.add_argument("model")
    t.add_argument("batches")
    t.add_argument("out")
    t.add_argument("--loss", default="cross_entropy", choices=["cross_entropy", "mse"])
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--momentum", type=float, default=0.0)
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.command == "make":
        make(a.out_dir)
    else:
        train(a)


if __name__ == "__main__":
    main()
