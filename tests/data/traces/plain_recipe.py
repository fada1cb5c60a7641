"""The profiler recipe of PyTorch's documentation on a 5-child nn.Sequential: a trace recorded
without pipetwin's helper, as users have them. docs/import-trace.md runs it ("A trace of your
own"); tests/trace_import_recipe_test.cpp records it with Debian's /usr/bin/python3 (torch 1.13).

    /usr/bin/python3 tests/data/traces/plain_recipe.py OUT.json [--schedule] [--annotate]
        [--sequence-numbers SEQ.json]

--schedule          give the profiler a schedule (wait=1, warmup=1, active=5), which adds a
                    ProfilerStep#<n> range per prof.step(), and export from on_trace_ready
--annotate          then add pipetwin's metadata to OUT.json (python/pipetwin_trace.py annotate())
--sequence-numbers  also write the same events with their autograd sequence numbers, as
                    python/pipetwin_trace.py writes a legacy profiler's events (for the test that
                    the order-matched backward equals the one by sequence number)
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--schedule", action="store_true")
ap.add_argument("--annotate", action="store_true")
ap.add_argument("--sequence-numbers")
args = ap.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                      nn.Linear(256, 10))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

schedule = {}
if args.schedule:
    schedule = dict(schedule=torch.profiler.schedule(wait=1, warmup=1, active=5, repeat=1),
                    on_trace_ready=lambda p: p.export_chrome_trace(args.out))

# The documentation's recipe: the profiler around the training loop, prof.step() after each step.
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True,
                            with_stack=True, with_modules=True, **schedule) as prof:
    for step in range(8):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        prof.step()
if not args.schedule:
    prof.export_chrome_trace(args.out)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "..", "python"))
if args.sequence_numbers:
    from pipetwin_trace import _legacy_events
    with open(args.sequence_numbers, "w") as f:
        json.dump({"traceEvents": _legacy_events(prof)}, f)
if args.annotate:
    from pipetwin_trace import annotate
    annotate(args.out, model, x, y, loss_fn)
print(args.out)
