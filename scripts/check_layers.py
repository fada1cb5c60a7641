#!/usr/bin/env python3
"""The layer check: every #include follows the folder order of docs/design.md "Layout".

A folder may include its own files and those of the layers it stands on, nothing above:

    core/            the vocabulary both engines use (IR, cost model, memory, plan, profile, ...)
      core/schedule/   the IR's generators        -> core
      core/partition/  partitioners               -> core, core/schedule
      core/elastic/    PipeTransformer's elastic  -> core, core/schedule, core/partition
    profiles/        where a profile comes from    -> core
    sim/             the event engine and what it simulates -> core
    studies/         sweeps, capacity, reproductions -> core, profiles, sim
    report/          the HTML report               -> core
    models/          LibTorch models               -> core, profiles
    exec/            the executor                  -> core, profiles, sim, models
      exec/platform/   devices, transports, control planes
      exec/runtime/    the IR interpreter         -> exec/platform
      exec/profile/    the per-layer profiler     -> exec/platform, exec/runtime
      exec/train/      `pipetwin train`           -> exec/platform, exec/runtime
    cli/             the binary                    -> everything

Also: no include cycle between two files anywhere, and no LibTorch header (torch/, ATen/, c10/)
below models/. tests/, bench/, fuzz/ and python/ may include anything.

Usage: scripts/check_layers.py [ROOT]   (exit 1 and one line per offence when any is found)
"""
import pathlib
import re
import sys

# layer -> the layers it may include (besides itself). The base of core/ and core/schedule/ are
# one layer read both ways (the plan holds a schedule; a schedule is made of core's actions);
# the file-level cycle check still holds between them.
ALLOWED = {
    "core": {"core/schedule"},
    "core/schedule": {"core"},
    "core/partition": {"core", "core/schedule"},
    "core/elastic": {"core", "core/schedule", "core/partition"},
    "profiles": {"core", "core/schedule", "core/partition", "core/elastic"},
    "sim": {"core", "core/schedule", "core/partition", "core/elastic"},
    "studies": {"core", "core/schedule", "core/partition", "core/elastic", "profiles", "sim"},
    "report": {"core", "core/schedule", "core/partition", "core/elastic"},
    "models": {"core", "core/schedule", "core/partition", "core/elastic", "profiles"},
    "cli": {"core", "core/schedule", "core/partition", "core/elastic", "profiles", "sim",
            "studies", "report", "models", "exec", "exec/platform", "exec/runtime", "exec/profile",
            "exec/train"},
}
_EXEC_BASE = {"core", "core/schedule", "core/partition", "core/elastic", "profiles", "sim", "models"}
ALLOWED["exec"] = _EXEC_BASE | {"exec/platform", "exec/runtime", "exec/profile", "exec/train"}
ALLOWED["exec/platform"] = _EXEC_BASE | {"exec"}
ALLOWED["exec/runtime"] = _EXEC_BASE | {"exec", "exec/platform"}
ALLOWED["exec/profile"] = _EXEC_BASE | {"exec", "exec/platform", "exec/runtime"}
ALLOWED["exec/train"] = _EXEC_BASE | {"exec", "exec/platform", "exec/runtime"}
SUBFOLDERS = {"core": ("schedule", "partition", "elastic"),
              "exec": ("platform", "runtime", "profile", "train")}
NO_TORCH = {"core", "core/schedule", "core/partition", "core/elastic", "profiles", "sim",
            "studies", "report"}
TORCH = re.compile(r"^(torch|ATen|c10|caffe2)/")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"]+)[>"]', re.M)
SUFFIXES = (".cpp", ".hpp", ".h", ".cc")


def layer_of(rel: str):
    """The layer of a repository-relative path, or None for a path outside the checked folders."""
    parts = rel.split("/")
    if len(parts) > 2 and parts[1] in SUBFOLDERS.get(parts[0], ()):
        return parts[0] + "/" + parts[1]
    return parts[0] if parts[0] in ALLOWED else None


def includes(path: pathlib.Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    for m in INCLUDE.finditer(text):
        yield text[: m.start()].count("\n") + 1, m.group(1), m.group(2)


def find_cycles(graph):
    """File-level include cycles (each reported once, as the list of its files)."""
    cycles, state, stack = [], {}, []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def check(root: pathlib.Path):
    offences, graph = [], {}
    for folder in ALLOWED:
        if "/" in folder:
            continue
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(root).as_posix()
            mine = layer_of(rel)
            for line, kind, target in includes(path):
                if kind == "<":
                    if mine in NO_TORCH and TORCH.match(target):
                        offences.append(f"{rel}:{line}: includes LibTorch <{target}> below models/")
                    continue
                theirs = layer_of(target)
                if theirs is None:
                    continue
                graph.setdefault(rel, set()).add(target)
                if theirs != mine and theirs not in ALLOWED[mine]:
                    offences.append(f"{rel}:{line}: {mine}/ includes \"{target}\" of {theirs}/, "
                                    f"above it (docs/design.md \"Layout\")")
    for cycle in find_cycles(graph):
        offences.append("include cycle: " + " -> ".join(cycle))
    return offences


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    found = check(root)
    for line in found:
        print(line)
    if found:
        print(f"check_layers: {len(found)} include(s) against the layer order")
        return 1
    print("check_layers: every include follows the layer order")
    return 0


if __name__ == "__main__":
    sys.exit(main())
