"""Hand a PyTorch model to pipetwin: save it for the executor, or annotate a trace of it.

    from pipetwin_save import save_for_pipetwin
    save_for_pipetwin(model, example_input, "model.pt")    # also writes model.pt.json
    # then: pipetwin profile --model torchscript:model.pt -o model.profile.json
    #       pipetwin plan --profile model.profile.json ...; pipetwin run --plan plan.json

`save_for_pipetwin` scripts the model (torch.jit.script; torch.jit.trace with trace=True), saves
it with torch.jit.save and writes beside it the metadata `pipetwin ... --model torchscript:FILE.pt`
reads (FILE.pt.json, format "pipetwin.torchscript"): the input of one sample (shape and dtype, the
vocabulary of token ids), the loss and its target, and the layers — the model's top-level
children in order, a ModuleList child standing for its elements — with the skip edge each takes
(models/torchscript.hpp says what pipetwin checks and runs). It checks what the executor will
check, so that a model that cannot be cut fails here, in Python, with the child named.

`annotate(path, model, inputs, targets, loss_fn)` adds pipetwin's metadata to a trace recorded
without python/pipetwin_trace.py's helper (torch.profiler as its documentation shows it), so that
`pipetwin import-trace` finds the model's children in it.

Standard torch only; works with torch 1.13 and 2.x. pipetwin_trace re-exports both functions.
"""

import gzip
import json
import os
from collections import OrderedDict

import torch
import torch.nn as nn

from pipetwin_trace import LAYER, _chosen_layers, _dtype_name, _forward, _nbytes, _tensors, describe

LOSSES = ("cross_entropy", "mse")
FORMAT, VERSION = "pipetwin.torchscript", 1


# --- the executor's view of a model ------------------------------------------------------------

def pipetwin_layers(model):
    """[(name, module)]: the layers pipetwin cuts `model` into — its direct children in order, an
    nn.ModuleList (or ModuleDict) child standing for its elements ("layers.0", "layers.1", ...)."""
    out = []
    for name, child in model.named_children():
        if isinstance(child, (nn.ModuleList, nn.ModuleDict)):
            out += [("%s.%s" % (name, n), m) for n, m in child.named_children()]
        else:
            out.append((name, child))
    if not out:
        raise ValueError("the model has no children: pipetwin cuts a model into its top-level "
                         "children (an nn.Sequential, or a module that calls a `layers` "
                         "ModuleList in order)")
    return out


def _layer_kind(module):
    """The class of a layer in lower case; a Sequential is its first element's (as pipetwin's
    models/torchscript.cpp names the layers of a module saved without this metadata)."""
    if isinstance(module, nn.Sequential) and len(module):
        return _layer_kind(module[0])
    return type(module).__name__.lower()


def _check_state(model):
    """Every parameter and buffer lives in a layer, and no two layers share one."""
    containers = [("the model", model)] + [
        ("child %r" % n, c) for n, c in model.named_children()
        if isinstance(c, (nn.ModuleList, nn.ModuleDict))]
    for who, m in containers:
        own = [n for n, _ in m.named_parameters(recurse=False)]
        own += [n for n, _ in m.named_buffers(recurse=False)]
        if own:
            raise ValueError("%s holds %s outside its children: pipetwin trains the children, "
                             "move them into one" % (who, ", ".join(own)))
    owner = {}
    for name, layer in pipetwin_layers(model):
        for pn, p in layer.named_parameters():
            if id(p) in owner:
                raise ValueError("children share a parameter (%s.%s is %s): pipetwin needs each "
                                 "parameter in one layer" % (name, pn, owner[id(p)]))
            owner[id(p)] = "%s.%s" % (name, pn)


def _skips(model, layers, example_input, given):
    """{layer name: the earlier layer whose output is its second input}: `given`, else found by
    walking the autograd graph (pipetwin_trace.describe)."""
    if given is not None:
        return dict(given)
    found = describe(model, layers, example_input, None,
                     lambda y, t: sum(x.sum() for x in _tensors(y)), example_input.shape[0])
    out = {}
    for d in found:
        if len(d["skip_from"]) > 1:
            raise ValueError("layer %r reads the outputs of %s besides its predecessor's: "
                             "pipetwin feeds a layer at most one skip" % (d["name"],
                                                                         d["skip_from"]))
        if d["skip_from"]:
            out[d["name"]] = d["skip_from"][0]
    return out


def _chain(layers, skips, x):
    """The layers applied in order, each skip layer given its source's output too."""
    values, y = {}, x
    for i, (name, layer) in enumerate(layers):
        try:
            y = layer(y, values[skips[name]]) if name in skips else layer(y)
        except Exception as e:  # as pipetwin names it (models/torchscript.cpp)
            raise ValueError("child %d (%r) fails on its input %s (%s: %s): its forward must be "
                             "its children in order" % (i, name, list(y.shape),
                                                        type(e).__name__, e)) from e
        values[name] = y
    return y


def _check_chain(model, layers, skips, example_input):
    """The layers in order compute the model's forward (eval mode, as pipetwin checks it)."""
    with torch.no_grad():
        whole = _forward(model, example_input)
        if not torch.is_tensor(whole):
            raise ValueError("the model's forward returns %s, not one tensor" % type(whole).__name__)
        chained = _chain(layers, skips, example_input)
    if chained.shape != whole.shape or not torch.allclose(chained, whole, rtol=1e-5, atol=1e-6):
        raise ValueError("its children applied in order give %s where the model's forward gives "
                         "%s%s: its forward must be its children in order (pass skips= for skip "
                         "edges)" % (list(chained.shape), list(whole.shape),
                                     " with other values" if chained.shape == whole.shape else ""))
    return whole


def _input_fields(model, example_input, vocab):
    """input_shape, input_dtype and, for token ids, vocab."""
    x = example_input
    if not torch.is_tensor(x) or x.dim() < 1:
        raise ValueError("example_input: one tensor with the batch first")
    fields = OrderedDict([("input_shape", list(x.shape[1:]))])
    if x.is_floating_point():
        fields["input_dtype"] = {torch.float64: "float64"}.get(x.dtype, "float32")
        return fields
    fields["input_dtype"] = "int64"
    if vocab is None:
        embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding)]
        if not embeddings:
            raise ValueError("example_input holds token ids: give vocab= (no nn.Embedding to "
                             "take it from)")
        vocab = embeddings[0].num_embeddings
    fields["vocab"] = int(vocab)
    return fields


def _target_fields(output, loss, classes, target_shape):
    """loss, classes and target_shape from the output of a batch, checked against those given."""
    if loss not in LOSSES:
        raise ValueError("loss: expected cross_entropy or mse, got %r" % (loss,))
    out = list(output.shape[1:])
    if not out:
        raise ValueError("the output %s has one value per sample; loss %s needs at least "
                         "[batch, N]" % (list(output.shape), loss))
    fields, target = OrderedDict([("loss", loss)]), list(out)
    if loss == "cross_entropy":
        target.pop()
        if classes is not None and classes != out[-1]:
            raise ValueError("classes %d, but the output %s has %d in its last dimension"
                             % (classes, list(output.shape), out[-1]))
        fields["classes"] = out[-1]
    if target_shape is not None and list(target_shape) != target:
        raise ValueError("target_shape %s, but loss %s on the output %s needs %s"
                         % (list(target_shape), loss, list(output.shape), target))
    fields["target_shape"] = target
    fields["output_shape"] = out
    return fields


def _write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)


def save_for_pipetwin(model, example_input, path, loss="cross_entropy", classes=None,
                      target_shape=None, vocab=None, skips=None, trace=False, name=None):
    """Scripts `model`, saves it to `path` (torch.jit.save) and its metadata to `path` + ".json";
    returns the metadata.

    example_input: one batch of the model's input, batch first (its shape and dtype are recorded
    per sample; integer inputs are token ids in [0, vocab), vocab defaulting to the model's first
    nn.Embedding). loss: "cross_entropy" (over the output's last dimension, the mean over the other
    positions of a sample) or "mse"; classes and target_shape, when given, are checked against the
    output. skips: {layer: earlier layer} for layers that take a second input, else found from the
    autograd graph. trace: torch.jit.trace instead of torch.jit.script. Raises ValueError for a
    model pipetwin cannot cut, naming the child."""
    layers = pipetwin_layers(model)
    _check_state(model)
    fields = _input_fields(model, example_input, vocab)
    was_training = model.training
    try:
        found = _skips(model, layers, example_input, skips)
        model.eval()
        _check_chain(model, layers, found, example_input)
        scripted = torch.jit.trace(model, example_input) if trace else torch.jit.script(model)
        with torch.no_grad():
            output = scripted(example_input)
    finally:
        model.train(was_training)
    scripted.train(was_training)
    meta = OrderedDict([("format", FORMAT), ("version", VERSION),
                        ("model", name or type(model).__name__.lower()),
                        ("torch", torch.__version__), ("dtype", _dtype_name(model)),
                        ("parameters", sum(p.numel() for p in model.parameters()))])
    meta.update(fields)
    meta.update(_target_fields(output, loss, classes, target_shape))  # checked before any write
    meta["layers"] = [OrderedDict([("name", n), ("kind", _layer_kind(m)),
                                   ("skip_from", found.get(n))]) for n, m in layers]
    tmp = path + ".tmp"
    torch.jit.save(scripted, tmp)
    os.replace(tmp, path)
    _write_json(path + ".json", meta)
    return meta


# --- traces recorded without pipetwin_trace's helper ---------------------------------------

def _is_range(e):
    """Whether a profiler event is a range rather than an operator, as pipetwin reads the exported
    trace (profiles/trace_import/kineto.hpp): Kineto's user ranges, and in the legacy profiler's
    export (no categories) the ranges named as pipetwin's or torch's own."""
    if e.name.startswith(("pipetwin.", "nn.Module: ", "ProfilerStep#", "Optimizer.")):
        return True
    return torch.autograd.kineto_available() and getattr(e, "scope", None) == 7  # USER_SCOPE


def _nest(events):
    """[(event, parent)] per thread, nested as pipetwin nests a trace's events
    (profiles/trace_import/kineto.cpp): by start, longer first; an event that starts inside an open
    one is inside it, and one of zero duration that starts at its end is its last child."""
    out, by_thread = [], {}
    for e in events:
        by_thread.setdefault(e.thread, []).append(e)
    for evs in by_thread.values():
        evs.sort(key=lambda e: (e.time_range.start, -e.time_range.elapsed_us()))
        stack = []
        for e in evs:
            start, dur = e.time_range.start, e.time_range.elapsed_us()
            while stack:
                top = stack[-1]
                end = top.time_range.end
                last_child = start == end and dur == 0 and top.time_range.elapsed_us() > 0
                if start < end or last_child:
                    break
                stack.pop()
            out.append((e, stack[-1] if stack else None))
            stack.append(e)
    return out


def _forward_ops(model, layers, inputs):
    """The outermost operators one forward of the model runs, in order, each with the layer (of
    `layers`, [(name, module)]) it ran in, "" for none: [[operator, layer], ...], the metadata
    "forward_ops" by which `pipetwin import-trace` finds the layers among a trace's operators when
    the trace has no layer ranges (profiles/trace_import/plain.hpp). Recorded under torch.profiler
    with a range around each layer, opened by the profiler op that makes no tensor (torch 1.13's
    record_function allocates two, which would show as operators in and between the layers)."""
    ops = torch.ops.profiler
    open_ranges, handles = [], []
    for name, module in layers:

        def pre(mod, inp, name=name):
            open_ranges.append(ops._record_function_enter_new(LAYER + name, None))

        def post(mod, inp, out):
            ops._record_function_exit._RecordFunction(open_ranges.pop())

        handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            _forward(model, inputs)
    finally:
        for h in handles:
            h.remove()
    out, nested = [], _nest(list(prof.events()))
    parent_of = {id(e): p for e, p in nested}
    for e, p in sorted(nested, key=lambda ep: ep[0].time_range.start):
        if _is_range(e) or e.name.startswith("profiler::"):
            continue
        layer, inner = "", False
        while p is not None:
            if not _is_range(p):
                inner = True
                break
            if p.name.startswith(LAYER):
                layer = p.name[len(LAYER):]
            p = parent_of[id(p)]
        if not inner:
            out.append([e.name, layer])
    return out


def annotate(path, model, inputs, targets, loss_fn, layers=None, name=None, micro_batch=None):
    """Adds pipetwin's metadata to a trace recorded without this helper — torch.profiler as its
    documentation shows it, prof.step() after each step — so that `pipetwin import-trace` takes
    the model's direct children (or `layers`, module names) as the layers, with their exact bytes,
    without --layers or --micro-batch. `inputs`, `targets` and `loss_fn` are one micro-batch of the
    recorded training, as the loop fed it; the model runs one more forward and loss outside the
    profiler (and one forward under its own). Writes `path` in place (through a temporary file)."""
    layers = _chosen_layers(model, layers)
    b = micro_batch or _tensors(inputs)[0].shape[0]
    on_cuda = any(p.is_cuda for p in model.parameters())
    meta = OrderedDict([
        ("model", name or type(model).__name__.lower()), ("micro_batch", b),
        ("dtype", _dtype_name(model)), ("device", "cuda" if on_cuda else "cpu"),
        ("device_name", torch.cuda.get_device_name() if on_cuda else ""),
        ("torch", torch.__version__), ("threads", torch.get_num_threads()),
        ("input_bytes_per_sample", sum(_nbytes(t) for t in _tensors(inputs)) / b),
        ("layers", describe(model, layers, inputs, targets, loss_fn, b)),
        ("forward_ops", _forward_ops(model, layers, inputs))])
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    if isinstance(doc, list):  # the legacy profiler's export: a bare array of events
        doc = {"traceEvents": doc}
    doc["pipetwin"] = meta
    tmp = path + ".tmp"
    with opener(tmp, "wt") as f:
        json.dump(doc, f)
    os.replace(tmp, path)
    return meta
