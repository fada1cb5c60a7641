#!/usr/bin/env python3
"""Include what you use, for the names whose header moved between LibTorch/fmt versions.

Debian 12 ships LibTorch 1.13 and fmt 9; the GPU machines build against PyTorch 2.x's LibTorch,
which bundles fmt 11. Two things compile here only by accident of transitive includes and fail
there: LibTorch 2.x no longer brings at::NoGradGuard in through <ATen/ATen.h>, and fmt 11 keeps
fmt::join in <fmt/ranges.h> alone. This check fails a file that names such a symbol without
including a header that declares it, so the mistake shows on a machine that has neither version.

Usage: scripts/check_includes.py [ROOT]   (exit 1 and one line per offence when any is found)
"""
import pathlib
import re
import sys

# symbol (a regular expression) -> headers, any one of which declares it in every version we build
# against (LibTorch 1.13 and 2.x; fmt 9 and 11).
RULES = [
    (r"\bat::(NoGradGuard|AutoGradMode|GradMode)\b", ["ATen/core/grad_mode.h"]),
    (r"\bc10::(NoGradGuard|AutoGradMode|GradMode)\b", ["c10/core/GradMode.h", "ATen/core/grad_mode.h"]),
    (r"\btorch::(NoGradGuard|AutoGradMode)\b", ["torch/utils.h", "torch/torch.h", "torch/all.h"]),
    (r"\bfmt::join\b", ["fmt/ranges.h"]),
    # Autocast's switches (models/torch_compat.hpp adapts their 1.13 and 2.x names): neither
    # <ATen/ATen.h> nor <torch/torch.h> declares them in 2.x.
    (r"\bat::autocast::", ["ATen/autocast_mode.h"]),
    (r"\bc10::(promoteTypes|isFloatingType)\b", ["c10/core/ScalarType.h"]),
]
FOLDERS = ["core", "sim", "exec", "models", "cli", "tests", "bench", "fuzz"]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def offences(path: pathlib.Path):
    text = path.read_text(encoding="utf-8", errors="replace")
    included = set(INCLUDE.findall(text))
    code = COMMENT.sub("", text)
    for pattern, headers in RULES:
        m = re.search(pattern, code)
        if m and not included.intersection(headers):
            line = code[: m.start()].count("\n") + 1
            yield f"{path}:{line}: {m.group(0)} used without #include <{headers[0]}>"


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in (".cpp", ".hpp", ".h", ".cc") and path.is_file():
                found.extend(offences(path))
    for line in found:
        print(line)
    if found:
        print(f"check_includes: {len(found)} file(s) rely on a transitive include "
              "(fails against LibTorch 2.x / fmt 11)")
        return 1
    print("check_includes: every use of a moved symbol includes its header")
    return 0


if __name__ == "__main__":
    sys.exit(main())
