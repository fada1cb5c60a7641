"""Record PyTorch profiler traces that `pipetwin import-trace` turns into a pipetwin profile.

    from pipetwin_trace import record
    paths = record(model, make_batch, nn.CrossEntropyLoss(), micro_batches=[1, 2, 4], steps=5,
                   out_dir="traces")
    # then: pipetwin import-trace traces/*.trace.json -o model.profile.json

For each micro-batch size, `record` trains the model for a few steps under torch.profiler (CPU
activity, plus CUDA when the model is on a GPU; record_shapes=True) and writes one Chrome-trace
JSON file. The steps, layers and optimizer are marked with record_function ranges, which is how
pipetwin finds them (profiles/trace_import/attribute.hpp):

    pipetwin.step:<i>          one training step: zero_grad, forward, loss, backward, optimizer
    pipetwin.layer:<name>      one layer's forward (forward pre/post hooks on the chosen layers)
    pipetwin.optimizer         the optimizer step (plain SGD)
    pipetwin.optimizer:<name>  with per_layer_optimizer=True: one SGD per layer, each in its range

It also adds a "pipetwin" object at the trace's top level with what a trace does not hold
exactly: per layer the parameter bytes, the output bytes per sample, the bytes its forward leaves
alive for backward (saved tensors, its output included, its input and parameters not: what
`pipetwin profile` measures as saved_bytes_per_sample), and the earlier layers whose outputs it
reads besides its predecessor's ("skip_from", found by walking the autograd graph back from the
layer's input to the nearest layer outputs). These come from one extra forward pass outside the
profiler, so the hooks that measure them do not slow the recorded steps.

PyTorch builds without Kineto (Debian's python3-torch 1.13) profile with the legacy profiler,
whose export carries no sequence numbers or shapes; there the file is written in Kineto's format
from the profiler's own events (same fields: "Sequence number", "Fwd thread id", "Input Dims").

A trace recorded without the helper (torch.profiler as its documentation shows it) imports too;
`annotate(path, model, inputs, targets, loss_fn)` adds the same "pipetwin" object to it, with the
operators one forward of the model runs and the child each ran in ("forward_ops"), by which
`pipetwin import-trace` finds the layers in a trace that has no layer ranges. It lives in
python/pipetwin_save.py with `save_for_pipetwin(model, example_input, path)`, which saves a model
for pipetwin's executor (`--model torchscript:FILE.pt`); both import from here too.

Standard torch only; works with torch 1.13 and 2.x. Run this file for a demo on a small MLP.
"""

import argparse
import ctypes
import json
import os
import resource
import sys
import time
from collections import OrderedDict

import torch
import torch.nn as nn
from torch.autograd.profiler import record_function

STEP, LAYER, OPTIMIZER = "pipetwin.step:", "pipetwin.layer:", "pipetwin.optimizer"

# glibc's mallopt(3) parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
_heap_reserved_mb = 0


def steady_heap(reserve_mb=512):
    """Makes this process's heap behave as pipetwin's executor and profiler keep theirs, so that
    the recorded times are the ones `pipetwin run` would see. Returns the megabytes reserved now
    (0 where not glibc, or where as much is reserved already).

    pipetwin fixes glibc's malloc thresholds (exec/platform/host.cpp): no dynamic mmap threshold,
    no trimming, one arena, so a step's tensors reuse memory that earlier steps touched. Under the
    profiler that is not enough: its event records are allocated between the step's tensors, the
    freed tensors' chunks cannot merge, and the next step's tensors land on fresh pages of a
    growing heap. Measured with Debian's torch 1.13 on a 2-vCPU VM (an MLP of width 256): 1,000
    page faults per profiled step at micro-batch 512 against none unprofiled, +2 ms on a 14 ms
    step, all of it inside the operators' times (a weight-gradient matmul 336 us traced, 250 us
    unprofiled). So the heap is also grown once by `reserve_mb`, touched, and given back to malloc
    (not to the kernel: the trim threshold keeps it), and the profiled steps take their memory
    from pages that are already there; the faults per profiled step are recorded in the trace
    (metadata "page_faults_per_step") so that `pipetwin import-trace` can say when they were not
    avoided. A model whose steps need more memory than the reserve should pass a larger one.
    """
    global _heap_reserved_mb
    try:
        libc = ctypes.CDLL("libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return 0
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's largest on 64-bit, as pipetwin's
    mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    mallopt(_M_ARENA_MAX, 1)
    if reserve_mb <= _heap_reserved_mb:
        return 0
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    chunk = 16 << 20  # under the mmap threshold: from the heap, which keeps it when freed
    blocks = []
    for _ in range(reserve_mb // 16):
        block = libc.malloc(chunk)
        if not block:
            break
        libc.memset(block, 0, chunk)
        blocks.append(block)
    for block in reversed(blocks):
        libc.free(block)
    grown = len(blocks) * 16 - _heap_reserved_mb
    _heap_reserved_mb = len(blocks) * 16
    return max(grown, 0)


def _minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _tensors(x):
    """The tensors in a (nested) tuple, list or dict of module inputs or outputs."""
    if torch.is_tensor(x):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in _tensors(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in _tensors(v)]
    return []


def _nbytes(t):
    return t.numel() * t.element_size()


def _chosen_layers(model, layers):
    """[(name, module)]: the model's direct children, or the named / given modules."""
    if layers is None:
        return list(model.named_children())
    by_name = dict(model.named_modules())
    by_id = {id(m): n for n, m in model.named_modules()}
    out = []
    for layer in layers:
        if isinstance(layer, str):
            if layer not in by_name:
                raise ValueError("no module named %r in the model" % layer)
            out.append((layer, by_name[layer]))
        else:
            out.append((by_id.get(id(layer), type(layer).__name__.lower()), layer))
    return out


def _kind(module):
    """The class of the module's first leaf (a Sequential(Linear, ReLU) is a "linear")."""
    leaves = [m for m in module.modules() if not list(m.children())]
    return type(leaves[0] if leaves else module).__name__.lower()


def _nested(a, b):
    """Whether module a holds module b or b holds a."""
    return any(m is b for m in a.modules()) or any(m is a for m in b.modules())


def _forward(model, inputs):
    return model(*inputs) if isinstance(inputs, tuple) else model(inputs)


class _Ranges:
    """A record_function range around each chosen layer's forward, by forward pre/post hooks."""

    def __init__(self, layers):
        self.handles = []
        for name, module in layers:
            stack = []

            def pre(mod, inp, name=name, stack=stack):
                rf = record_function(LAYER + name)
                rf.__enter__()
                stack.append(rf)

            def post(mod, inp, out, stack=stack):
                stack.pop().__exit__(None, None, None)

            self.handles.append(module.register_forward_pre_hook(pre))
            self.handles.append(module.register_forward_hook(post))

    def remove(self):
        for h in self.handles:
            h.remove()


def _producers(node, out_node):
    """The layers whose outputs reach autograd node `node` without passing another layer."""
    found, seen, stack = set(), set(), [node]
    while stack:
        g = stack.pop()
        if g is None or id(g) in seen:
            continue
        seen.add(id(g))
        if id(g) in out_node:
            found |= out_node[id(g)]
            continue
        stack.extend(n for n, _ in g.next_functions)
    return found


def describe(model, layers, inputs, targets, loss_fn, micro_batch):
    """Per layer: kind, parameter bytes, output and saved bytes per sample, skip_from."""
    params = {p.data_ptr() for p in model.parameters()}
    n = len(layers)
    current, saved = [], [dict() for _ in range(n)]
    in_ptrs, in_nodes = [set() for _ in range(n)], [[] for _ in range(n)]
    out_bytes, out_keys, out_node, keep = [0] * n, [dict() for _ in range(n)], {}, []

    def pack(t):
        if current and t.data_ptr() not in params:
            saved[current[-1]][(t.data_ptr(), t.numel(), t.dtype)] = _nbytes(t)
        return t

    handles = []
    for i, (_, module) in enumerate(layers):

        def pre(mod, inp, i=i):
            current.append(i)
            for t in _tensors(inp):
                in_ptrs[i].add(t.data_ptr())
                in_nodes[i].append(t.grad_fn)

        def post(mod, inp, out, i=i):
            current.pop()
            for t in _tensors(out):
                out_bytes[i] += _nbytes(t)
                out_keys[i][(t.data_ptr(), t.numel(), t.dtype)] = _nbytes(t)
                if t.grad_fn is not None:  # nested layers may hand on one tensor: all produce it
                    out_node.setdefault(id(t.grad_fn), set()).add(i)
                    keep.append(t.grad_fn)

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss_fn(_forward(model, inputs), targets)
    finally:
        for h in handles:
            h.remove()
    out = []
    for i, (name, module) in enumerate(layers):
        # A parameter an earlier layer already has (a tied weight) counts once; one of an
        # enclosing or enclosed layer (layers chosen at several depths) counts in each.
        earlier = {id(p) for _, m in layers[:i] if not _nested(m, module)
                   for p in m.parameters()}
        own = [p for p in module.parameters() if id(p) not in earlier]
        kept = {k: v for k, v in saved[i].items() if k[0] not in in_ptrs[i]}
        kept.update({k: v for k, v in out_keys[i].items() if k[0] not in in_ptrs[i]})
        prods = set()
        for g in in_nodes[i]:
            prods |= _producers(g, out_node)
        skips = sorted(j for j in prods if j < i - 1)  # pipetwin keeps the selected ones
        out.append(OrderedDict([
            ("name", name), ("kind", _kind(module)),
            ("param_bytes", sum(_nbytes(p) for p in own)),
            ("output_bytes_per_sample", out_bytes[i] / micro_batch),
            ("saved_bytes_per_sample", sum(kept.values()) / micro_batch),
            ("skip_from", [layers[j][0] for j in skips])]))
    return out


def _dtype_name(model):
    for p in model.parameters():
        if p.is_floating_point():
            return {torch.float32: "float32", torch.float16: "float16",
                    torch.bfloat16: "bfloat16", torch.float64: "float64"}.get(p.dtype, "float32")
    return "float32"


def _legacy_events(prof):
    """Kineto-format events from the legacy profiler's FunctionEvents (builds without Kineto)."""
    pid, out = os.getpid(), []
    for e in prof.events():
        args = {}
        if e.sequence_nr is not None and e.sequence_nr >= 0:
            args["Sequence number"] = e.sequence_nr
            args["Fwd thread id"] = e.fwd_thread
        shapes = e.input_shapes or []
        if any(len(s) for s in shapes):
            args["Input Dims"] = [list(s) for s in shapes]
        # record_function ranges (RecordScope::USER_SCOPE, 7) are "user_annotation", as Kineto
        # writes them: pipetwin counts a range by the operators it holds.
        user = getattr(e, "scope", None) == 7 or e.name.startswith("pipetwin.")
        out.append({"ph": "X", "cat": "user_annotation" if user else "cpu_op",
                    "name": e.name, "pid": pid, "tid": e.thread,
                    "ts": e.time_range.start, "dur": e.time_range.elapsed_us(), "args": args})
    return out


def _export(prof, path, metadata):
    """Writes the trace with the metadata, through a temporary file renamed over `path`."""
    tmp = path + ".tmp"
    if torch.autograd.kineto_available():
        prof.export_chrome_trace(tmp)
        with open(tmp) as f:
            doc = json.load(f)
        if isinstance(doc, list):
            doc = {"traceEvents": doc}
    else:
        doc = {"traceEvents": _legacy_events(prof)}
    doc["pipetwin"] = metadata
    with open(tmp, "w") as f:
        json.dump(doc, f)
    os.replace(tmp, path)


def _train_step(model, inputs, targets, loss_fn, optimizers, on_cuda):
    # Gradients are zeroed in place and accumulated into, as `pipetwin profile` and the executor
    # keep them (torch 2.x's default would free them and make every backward allocate anew).
    for _, opt in optimizers:
        opt.zero_grad(set_to_none=False)
    loss_fn(_forward(model, inputs), targets).backward()
    with record_function(OPTIMIZER):
        for name, opt in optimizers:
            if name is None:
                opt.step()
            else:
                with record_function(OPTIMIZER + ":" + name):
                    opt.step()
    if on_cuda:
        torch.cuda.synchronize()


def _optimizers(model, layers, lr, per_layer):
    if not per_layer:
        return [(None, torch.optim.SGD(model.parameters(), lr=lr))]
    out, seen = [], set()
    for name, module in layers:
        own = [p for p in module.parameters() if id(p) not in seen]
        seen.update(id(p) for p in own)
        if own:
            out.append((name, torch.optim.SGD(own, lr=lr)))
    rest = [p for p in model.parameters() if id(p) not in seen]
    if rest:
        out.append((None, torch.optim.SGD(rest, lr=lr)))
    return out


def record(model, make_batch, loss_fn, micro_batches=(1, 2, 4), steps=5, layers=None,
           out_dir=".", name=None, warmup=2, lr=0.01, per_layer_optimizer=False,
           heap_reserve_mb=512):
    """Records one trace per micro-batch size; returns their paths.

    make_batch(micro_batch) -> (inputs, targets); inputs is a tensor or a tuple of the model's
    arguments. layers: None (the model's direct children), or module names / modules. steps: the
    profiled steps (pipetwin drops the first as warm-up); warmup: unprofiled steps before them,
    timed (metadata "unprofiled_step_s", their median: what the profiler adds shows against it).
    heap_reserve_mb: see steady_heap(); 0 leaves malloc as it is.
    """
    if heap_reserve_mb > 0:
        steady_heap(heap_reserve_mb)
    layers = _chosen_layers(model, layers)
    name = name or type(model).__name__.lower()
    on_cuda = any(p.is_cuda for p in model.parameters())
    if on_cuda and not torch.autograd.kineto_available():
        # The legacy profiler's events hold no kernels with launch ids to link them by.
        raise RuntimeError("tracing a model on a GPU needs a PyTorch built with Kineto")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if on_cuda:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for b in micro_batches:
        inputs, targets = make_batch(b)
        optimizers = _optimizers(model, layers, lr, per_layer_optimizer)
        meta = OrderedDict([
            ("model", name), ("micro_batch", b), ("dtype", _dtype_name(model)),
            ("device", "cuda" if on_cuda else "cpu"),
            ("device_name", torch.cuda.get_device_name() if on_cuda else ""),
            ("optimizer", "sgd"), ("torch", torch.__version__),
            ("threads", torch.get_num_threads()), ("steps", steps), ("warmup", warmup),
            ("input_bytes_per_sample", sum(_nbytes(t) for t in _tensors(inputs)) / b),
            ("layers", describe(model, layers, inputs, targets, loss_fn, b))])
        unprofiled = []
        for _ in range(warmup):
            start = time.perf_counter()
            _train_step(model, inputs, targets, loss_fn, optimizers, on_cuda)
            unprofiled.append(time.perf_counter() - start)
        ranges = _Ranges(layers)
        try:
            with torch.profiler.profile(activities=activities, record_shapes=True) as prof:
                faults = _minor_faults()
                for i in range(steps):
                    with record_function(STEP + str(i)):
                        _train_step(model, inputs, targets, loss_fn, optimizers, on_cuda)
                faults = _minor_faults() - faults
        finally:
            ranges.remove()
        timed = sorted(unprofiled[1:] or unprofiled)  # the first warms up
        if timed:
            meta["unprofiled_step_s"] = timed[len(timed) // 2]
        meta["page_faults_per_step"] = faults / max(steps, 1)
        path = os.path.join(out_dir, "%s.mb%d.trace.json" % (name, b))
        _export(prof, path, meta)
        paths.append(path)
    return paths


# --- re-exported from pipetwin_save ------------------------------------------------------------

def __getattr__(name):
    """`from pipetwin_trace import annotate` (or save_for_pipetwin): pipetwin_save's functions,
    imported on first use (pipetwin_save imports this module's helpers)."""
    if name in ("annotate", "save_for_pipetwin", "pipetwin_layers"):
        import pipetwin_save
        return getattr(pipetwin_save, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


# --- demo --------------------------------------------------------------------------------------

def mlp(layers=4, width=256, inputs=64, classes=10):
    """pipetwin's zoo `mlp` (models/mlp.cpp): layers x (Linear + ReLU), a Linear head."""
    blocks, d = OrderedDict(), inputs
    for i in range(layers):
        blocks["fc%d" % i] = nn.Sequential(nn.Linear(d, width), nn.ReLU())
        d = width
    blocks["head"] = nn.Linear(d, classes)
    return nn.Sequential(blocks)


class SkipHead(nn.Module):
    """Linear(x + skip): a layer with two inputs."""

    def __init__(self, width, classes):
        super().__init__()
        self.fc = nn.Linear(width, classes)

    def forward(self, x, skip):
        return self.fc(x + skip)


class SkipMLP(nn.Module):
    """Three Linear + ReLU blocks and a head that reads the first block's output too: pipetwin's
    zoo `mlp:layers=3,skip=1` (profiles/zoo/convnets.cpp)."""

    def __init__(self, width=256, inputs=64, classes=10):
        super().__init__()
        self.fc0 = nn.Sequential(nn.Linear(inputs, width), nn.ReLU())
        self.fc1 = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.fc2 = nn.Sequential(nn.Linear(width, width), nn.ReLU())
        self.head = SkipHead(width, classes)

    def forward(self, x):
        a = self.fc0(x)
        return self.head(self.fc2(self.fc1(a)), a)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=["mlp", "skip"], default="mlp")
    ap.add_argument("--layers", type=int, default=4, help="hidden layers of the mlp")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--inputs", type=int, default=64, help="input features")
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--micro-batches", default="1,2,4,8")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (pipetwin: 1)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:I (CUDA needs Kineto)")
    ap.add_argument("--per-layer-optimizer", action="store_true")
    ap.add_argument("--warmup", type=int, default=2, help="unprofiled steps first")
    ap.add_argument("--heap-reserve-mb", type=int, default=512,
                    help="heap grown and touched before recording (0: malloc as it is)")
    ap.add_argument("--out-dir", default=".")
    a = ap.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    model = (mlp(a.layers, a.width, a.inputs, a.classes) if a.model == "mlp"
             else SkipMLP(a.width, a.inputs, a.classes)).to(a.device)
    sizes = [int(b) for b in a.micro_batches.split(",")]

    def batch(b):
        return (torch.randn(b, a.inputs, device=a.device),
                torch.randint(0, a.classes, (b,), device=a.device))

    paths = record(model, batch, nn.CrossEntropyLoss(), micro_batches=sizes, steps=a.steps, out_dir=a.out_dir,
                   name=a.model, per_layer_optimizer=a.per_layer_optimizer, warmup=a.warmup,
                   heap_reserve_mb=a.heap_reserve_mb)
    print("\n".join(paths))
    print("next: pipetwin import-trace %s -o %s.profile.json" % (" ".join(paths), a.model),
          file=sys.stderr)


if __name__ == "__main__":
    main()
