#!/usr/bin/env python3
"""A peer in the same run: the same model trained by an ordinary PyTorch eager loop, then by
`pipetwin run` at K=1, and the ratio of their step times.

The peer is the architecture models/ builds (models/vit.cpp, bert.cpp, gpt2.cpp, layers.cpp):
the same widths, depth, dropout (on the embedding, the attention probabilities and every
sub-layer's output), norms and their epsilons, GELU (tanh for GPT-2), heads and loss (cross
entropy; a language model's averaged over tokens per sample), in the same dtype (float32
weights, autocast for bfloat16 / float16 with GradScaler for float16), with the same optimizer
(torch.optim.SGD or Adam, learning rate and momentum), batch B and micro-batch b: each step runs
B/b micro-batches, accumulates their gradients (each micro-batch's summed loss divided by B) and
steps once, as pipetwin's K=1 pipeline does. Its data are drawn in the loop, as pipetwin's
synthetic source draws them (normal images, uniform tokens and labels). Where the PyTorch has
fused attention (2.x) the attention runs there, as pipetwin's does; on 1.13 both run the textbook
softmax(Q K^T / sqrt(d)) V. The parameter count is checked against `pipetwin zoo`'s.

Timing: --warmup untimed steps, then --iterations timed ones, one host wait per step (the loss,
read once a step as a training loop logs it); the peer's step is the median. pipetwin's is the
median step of its steady window (metrics iteration_time_median_s) of a run with as many steps.
--repeats alternates peer and pipetwin that many times and reports each one's median over the
repeats, with the spread (min-max) of each, and as the ratio the median of the repeats' ratios
(each a peer and a pipetwin measured back to back). On a GPU the MFU of each is the model's analytic
training FLOPs per step (`pipetwin zoo`'s total, 3x the forward's) over the step time and the GPU's dense
peak for the dtype (hardware/devices.json).

Usage: /usr/bin/python3 experiments/peer_pytorch.py --device cpu --model vit:tiny --dtype float32
       -B 32 --micro-batch 8 --optimizer sgd [--pipetwin build/pipetwin] [--pipelines 2,4]
       [--csv peer.csv]
Prints per repeat the two step times, then K = 2 and 4 stream-set pipelines' step times (GPU;
--pipelines on a CPU), and as its last line
  peer: pipetwin K=1 X ms, PyTorch eager Y ms, ratio X/Y
(with ", MFU pipetwin A%, PyTorch B%" on a GPU).
"""
import csv
import ctypes
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from runcmd import HERE, arg_parser, sh

# The preset tables of profiles/zoo/transformer.cpp (the fields the peer needs).
VIT = {"test": dict(depth=2, dim=32, heads=2, image=32, patch=4, channels=3, classes=10, dropout=0.0),
       "tiny": dict(depth=12, dim=192, heads=3, image=32, patch=4, channels=3, classes=10, dropout=0.0),
       "small": dict(depth=12, dim=384, heads=6, image=32, patch=4, channels=3, classes=10, dropout=0.0),
       "base": dict(depth=12, dim=768, heads=12, image=224, patch=16, channels=3, classes=1000, dropout=0.1)}
VIT["b16"] = VIT["base"]
BERT = {"tiny": dict(layers=2, hidden=128, heads=2, ffn=512, vocab=30522, positions=512, seq=128, classes=2, dropout=0.0),
        "mini": dict(layers=4, hidden=256, heads=4, ffn=1024, vocab=30522, positions=512, seq=128, classes=2, dropout=0.0),
        "base": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=30522, positions=512, seq=512, classes=2, dropout=0.1)}
# GPT-2's embedding and LM head have the vocabulary padded to a multiple of vocab_multiple rows
# (configs.hpp Gpt2Config::padded_vocab: 50257 -> 50304); tokens and targets stay below vocab.
GPT2 = {"tiny": dict(layers=2, dim=128, heads=2, vocab=1024, ctx=64, seq=64, dropout=0.0, vocab_multiple=128),
        "small": dict(layers=12, dim=768, heads=12, vocab=50257, ctx=1024, seq=1024, dropout=0.1, vocab_multiple=128)}
GPT2["124m"] = GPT2["small"]
DEFAULT = {"vit": "tiny", "bert": "tiny", "gpt2": "tiny"}
ALIASES = {"layers": "depth", "hidden": "dim"}  # ViT's other names for its options


def config(name):
    """The family and config of a zoo name (preset, then k=v options), as configs.hpp parses it."""
    family, _, rest = name.partition(":")
    table = {"vit": VIT, "bert": BERT, "gpt2": GPT2}.get(family)
    if table is None:
        sys.exit(f"peer_pytorch: model {name}: only vit, bert and gpt2 have a peer")
    parts = [p for p in rest.split(",") if p]
    preset = parts.pop(0) if parts and "=" not in parts[0] else DEFAULT[family]
    c = dict(table[preset])
    for p in parts:
        k, _, v = p.partition("=")
        k = ALIASES.get(k, k) if family == "vit" else k
        c[k] = float(v) if k == "dropout" else int(v)
    if family == "vit" or family == "gpt2":
        c.setdefault("mlp", 4 * c["dim"])  # every preset: MLP 4 * dim
    if family == "gpt2":
        c["rows"] = -(-c["vocab"] // c["vocab_multiple"]) * c["vocab_multiple"]  # padded vocabulary
    return family, c


class Attention(nn.Module):
    """layers.cpp AttentionImpl: fused q/k/v, output projection, dropout on the probabilities and
    the output; pre-norm x + ... or post-norm LN(x + ...)."""

    def __init__(self, dim, heads, p, eps, pre_norm, causal):
        super().__init__()
        self.norm, self.qkv, self.proj = nn.LayerNorm(dim, eps), nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.heads, self.p, self.pre_norm, self.causal = heads, p, pre_norm, causal
        self.prob_dropout, self.out_dropout = nn.Dropout(p), nn.Dropout(p)

    def attend(self, qkv):
        b, s, _ = qkv.shape
        hd = qkv.shape[-1] // 3 // self.heads
        q, k, v = qkv.view(b, s, 3, self.heads, hd).permute(2, 0, 3, 1, 4)
        fused = hasattr(F, "scaled_dot_product_attention")
        if fused and (not self.training or self.p == 0 or qkv.is_cuda):
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0,
                                                 is_causal=self.causal)
        else:
            scores = q @ k.transpose(-2, -1) / math.sqrt(hd)
            if self.causal:
                future = torch.ones(s, s, dtype=torch.bool, device=qkv.device).triu(1)
                scores = scores.masked_fill(future, float("-inf"))
            out = self.prob_dropout(scores.softmax(-1)) @ v
        return out.transpose(1, 2).reshape(b, s, -1)

    def forward(self, x):
        h = self.norm(x) if self.pre_norm else x
        a = self.out_dropout(self.proj(self.attend(self.qkv(h))))
        return x + a if self.pre_norm else self.norm(x + a)


class Mlp(nn.Module):
    def __init__(self, dim, mlp, p, eps, pre_norm, tanh):
        super().__init__()
        self.norm, self.fc1, self.fc2 = nn.LayerNorm(dim, eps), nn.Linear(dim, mlp), nn.Linear(mlp, dim)
        self.drop, self.pre_norm, self.approx = nn.Dropout(p), pre_norm, "tanh" if tanh else "none"

    def forward(self, x):
        h = self.norm(x) if self.pre_norm else x
        y = self.drop(self.fc2(F.gelu(self.fc1(h), approximate=self.approx)))
        return x + y if self.pre_norm else self.norm(x + y)


class Vit(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, n = c["dim"], (c["image"] // c["patch"]) ** 2
        self.patch = nn.Conv2d(c["channels"], d, c["patch"], c["patch"])
        self.cls, self.pos = nn.Parameter(torch.zeros(1, 1, d)), nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.drop = nn.Dropout(c["dropout"])
        self.blocks = nn.Sequential(*[m for _ in range(c["depth"]) for m in (
            Attention(d, c["heads"], c["dropout"], 1e-6, True, False),
            Mlp(d, c["mlp"], c["dropout"], 1e-6, True, False))])
        self.norm, self.fc = nn.LayerNorm(d, 1e-6), nn.Linear(d, c["classes"])

    def forward(self, images):
        x = self.patch(images).flatten(2).transpose(1, 2)
        x = self.drop(torch.cat([self.cls.expand(x.shape[0], 1, -1), x], 1) + self.pos)
        return self.fc(self.norm(self.blocks(x)[:, 0]))


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["hidden"]
        self.word, self.position = nn.Parameter(torch.randn(c["vocab"], d) * 0.02), nn.Parameter(torch.randn(c["positions"], d) * 0.02)
        self.token_type = nn.Parameter(torch.randn(2, d) * 0.02)
        self.norm, self.drop = nn.LayerNorm(d, 1e-12), nn.Dropout(c["dropout"])
        self.blocks = nn.Sequential(*[m for _ in range(c["layers"]) for m in (
            Attention(d, c["heads"], c["dropout"], 1e-12, False, False),
            Mlp(d, c["ffn"], c["dropout"], 1e-12, False, False))])
        self.pooler, self.head_drop, self.classifier = nn.Linear(d, d), nn.Dropout(c["dropout"]), nn.Linear(d, c["classes"])

    def forward(self, ids):
        x = F.embedding(ids, self.word) + self.position[: ids.shape[1]] + self.token_type[0]
        x = self.blocks(self.drop(self.norm(x)))
        return self.classifier(self.head_drop(torch.tanh(self.pooler(x[:, 0]))))


class Gpt2(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["dim"]
        self.wte, self.wpe = nn.Parameter(torch.randn(c["rows"], d) * 0.02), nn.Parameter(torch.randn(c["ctx"], d) * 0.02)
        self.drop = nn.Dropout(c["dropout"])
        self.blocks = nn.Sequential(*[m for _ in range(c["layers"]) for m in (
            Attention(d, c["heads"], c["dropout"], 1e-5, True, True),
            Mlp(d, c["mlp"], c["dropout"], 1e-5, True, True))])
        self.ln_f, self.lm_head = nn.LayerNorm(d, 1e-5), nn.Linear(d, c["rows"], bias=False)

    def forward(self, ids):
        x = self.drop(F.embedding(ids, self.wte) + self.wpe[: ids.shape[1]])
        return self.lm_head(self.ln_f(self.blocks(x)))


def build(family, c):
    return {"vit": Vit, "bert": Bert, "gpt2": Gpt2}[family](c)


def batch_maker(family, c, b, device):
    """A micro-batch of synthetic data as pipetwin's synthetic source draws it."""
    if family == "vit":
        return lambda: (torch.randn(b, c["channels"], c["image"], c["image"], device=device),
                        torch.randint(c["classes"], (b,), device=device))
    if family == "bert":
        return lambda: (torch.randint(c["vocab"], (b, c["seq"]), device=device),
                        torch.randint(c["classes"], (b,), device=device))

    def lm():
        tokens = torch.randint(c["vocab"], (b, c["seq"] + 1), device=device)
        return tokens[:, :-1], tokens[:, 1:]
    return lm


def summed_loss(family, out, y):
    """The sum over the micro-batch of the per-sample losses (models/layered_model.cpp). Called
    inside the autocast region as an ordinary autocast loop does: autocast's policy for
    cross_entropy casts reduced-precision logits to float32 inside the operator."""
    if family == "gpt2":
        nll = F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), reduction="none")
        return nll.view(y.shape).mean(1).sum()
    return F.cross_entropy(out, y, reduction="sum")


def peer_steps(args, family, c):
    """Per timed step, the seconds of the peer's step."""
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    model = build(family, c).to(device).train()
    params = list(model.parameters())
    if args.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=args.lr)
    else:
        opt = torch.optim.SGD(params, lr=args.lr, momentum=args.momentum)
    mixed = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(args.dtype)
    scaler = torch.cuda.amp.GradScaler() if args.dtype == "float16" else None
    M = args.batch // args.micro_batch
    make = batch_maker(family, c, args.micro_batch, device)
    times = []
    for step in range(args.warmup + args.iterations):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        total = torch.zeros((), device=device)
        for _ in range(M):
            x, y = make()
            with torch.autocast(device.type, dtype=mixed, enabled=mixed is not None):
                loss = summed_loss(family, model(x), y) / args.batch
            (scaler.scale(loss) if scaler else loss).backward()
            total += loss.detach()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        total.item()  # one host wait a step: the loss a training loop logs
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    return times, sum(p.numel() for p in params)


def pipetwin_step(args, K, tmp):
    """The median step of pipetwin's steady window, K stages."""
    plan, metrics = os.path.join(tmp, f"plan{K}.json"), os.path.join(tmp, f"metrics{K}.json")
    sh(args.pipetwin, "plan", "--model", args.model, "--cluster", args.cluster, "-K", K,
       "--schedule", args.schedule, "-B", args.batch, "-M", args.batch // args.micro_batch,
       "--iterations", args.warmup + args.iterations, "-q", "-o", plan)
    sh(args.pipetwin, "run", "--plan", plan, "--device", args.device, "--dtype", args.dtype,
       "--optimizer", args.optimizer, "--lr", args.lr, "--momentum", args.momentum,
       "--threads-per-stage", args.threads, "--seed", args.seed, "--metrics", metrics, "-q")
    with open(metrics) as f:
        return json.load(f)["iteration_time_median_s"]


def count(n):
    """A parameter count as `pipetwin zoo` prints it (cli/cmd_zoo.cpp)."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.{2 if unit == 'B' else 1}f}{unit}"
    return f"{n:.0f}"


def zoo_figures(args):
    """(parameter count as printed, training FLOPs per sample) of the model: `pipetwin zoo NAME`'s
    total row (3x the forward's FLOPs for forward and backward)."""
    for line in sh(args.pipetwin, "zoo", args.model).splitlines():
        cells = [c.strip() for c in line.split("|") if c.strip()] if "|" in line else line.split()
        if "total" in cells:
            i = cells.index("total")
            return cells[i + 1], 3 * float(cells[i + 2]) * 1e9
    sys.exit(f"peer_pytorch: no total in `pipetwin zoo {args.model}`")


def peak_flops(args):
    """The GPU's dense peak for the dtype (hardware/devices.json), or None."""
    name = torch.cuda.get_device_name().lower()
    with open(os.path.join(HERE, "..", "hardware", "devices.json")) as f:
        devices = json.load(f)["devices"]
    for d in devices:
        if d["name"].split("-")[0] in name:
            return d["peak_flops"].get(args.dtype)
    return None


def set_threads(n):
    """n intra-op threads, as pipetwin's stage threads have (exec/platform/host.cpp): ATen's, and
    OpenBLAS's own pool, which torch.set_num_threads does not reach."""
    torch.set_num_threads(n)
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "openblas" in line and ".so" in line}
    for lib in sorted(libs):  # loaded privately: not reachable through the global namespace
        blas = ctypes.CDLL(lib)
        if hasattr(blas, "openblas_set_num_threads"):
            blas.openblas_set_num_threads(n)


def spread(xs):
    return f"{statistics.median(xs) * 1e3:.1f} ms (min {min(xs) * 1e3:.1f}, max {max(xs) * 1e3:.1f})"


def main():
    ap = arg_parser(__doc__)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--model", default="vit:tiny")
    ap.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    ap.add_argument("-B", "--batch", type=int, default=32)
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--iterations", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    ap.add_argument("--repeats", type=int, default=1, help="peer and pipetwin alternated this often")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (both)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--schedule", default="gpipe")
    ap.add_argument("--cluster", default=None, help="default: local-cpu-2, or h200-1gpu on a GPU")
    ap.add_argument("--pipelines", default=None, help="K of the pipelines printed beside K=1 "
                    "(default: 2,4 on a GPU, none on a CPU)")
    ap.add_argument("--csv", default=None, help="append the row (peer.csv's columns) here")
    args = ap.parse_args()
    if args.batch % args.micro_batch:
        sys.exit("peer_pytorch: -B must be a multiple of --micro-batch")
    gpu = args.device == "cuda"
    if args.cluster is None:
        args.cluster = "h200-1gpu" if gpu and "H200" in torch.cuda.get_device_name() else (
            "h100-1gpu" if gpu else "local-cpu-2")
    if args.pipelines is None:
        args.pipelines = "2,4" if gpu else ""
    set_threads(args.threads)
    family, c = config(args.model)
    params, flops_per_sample = zoo_figures(args)
    ours, theirs = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            times, n = peer_steps(args, family, c)
            if count(n) != params:
                sys.exit(f"peer_pytorch: the peer of {args.model} has {count(n)} parameters, pipetwin's {params}")
            theirs.append(statistics.median(times))
            ours.append(pipetwin_step(args, 1, tmp))
            print(f"repeat {r + 1}: pipetwin K=1 {ours[-1] * 1e3:.1f} ms, PyTorch eager "
                  f"{theirs[-1] * 1e3:.1f} ms, ratio {ours[-1] / theirs[-1]:.3f}", flush=True)
        for K in [int(k) for k in args.pipelines.split(",") if k]:
            try:
                print(f"pipetwin K={K} ({args.schedule}): {pipetwin_step(args, K, tmp) * 1e3:.1f} ms", flush=True)
            except SystemExit as e:
                print(f"pipetwin K={K}: failed: {str(e).splitlines()[0]}", flush=True)
    # The ratio is the median of the repeats' ratios: a peer and a pipetwin measured minutes apart
    # on a shared machine see different machines, one right after the other nearly the same one.
    x, y = statistics.median(ours), statistics.median(theirs)
    ratio = statistics.median(a / b for a, b in zip(ours, theirs))
    if args.repeats > 1:
        print(f"spread over {args.repeats} repeats: pipetwin {spread(ours)}, PyTorch {spread(theirs)}; "
              f"ratios {', '.join(f'{a / b:.3f}' for a, b in zip(ours, theirs))}")
    line = f"peer: pipetwin K=1 {x * 1e3:.1f} ms, PyTorch eager {y * 1e3:.1f} ms, ratio {ratio:.3f}"
    mfu = ""
    if gpu:
        peak = peak_flops(args)
        if peak:
            flops = flops_per_sample * args.batch
            mfu = f"{flops / x / peak:.3f}"
            line += f", MFU pipetwin {100 * flops / x / peak:.1f}%, PyTorch {100 * flops / y / peak:.1f}%"
    if args.csv:
        new = not os.path.exists(args.csv)
        with open(args.csv, "a", newline="") as f:
            w = csv.writer(f)
            if new:
                w.writerow(["model", "dtype", "batch", "micro_batch", "pipetwin_ms", "peer_ms", "ratio", "mfu"])
            w.writerow([args.model, args.dtype, args.batch, args.micro_batch, f"{x * 1e3:.2f}",
                        f"{y * 1e3:.2f}", f"{ratio:.4f}", mfu])
    print(line)


if __name__ == "__main__":
    main()
