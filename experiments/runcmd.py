"""What the scripts of experiments/ share: their common command line, and one command of a script:
run it, return its standard output, or end the script with the command and its error output."""
import argparse
import csv
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def arg_parser(doc):
    """The scripts' common command line: the description is the first line of `doc`, and
    --pipetwin names the binary (default: build/pipetwin of this checkout)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--pipetwin", default=os.path.join(HERE, "..", "build", "pipetwin"))
    return ap


def sh(*args):
    args = [str(a) for a in args]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        sys.exit(f"{script}: {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout


def median_worst(rows, key):
    """The median and the largest |rows[i][key]|."""
    values = [abs(r[key]) for r in rows]
    return statistics.median(values), max(values)


def write_csv(path, rows):
    """`rows` (dicts with the same keys) as a CSV file with a header."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_results(out, rows, columns, cells, summary):
    """OUT/validation.csv (`rows`) and OUT/validation.md: a Markdown table of `columns`, one line
    per row (`cells(row)`: its cells as text), then the `summary` text."""
    os.makedirs(out, exist_ok=True)
    write_csv(os.path.join(out, "validation.csv"), rows)
    with open(os.path.join(out, "validation.md"), "w") as f:
        f.write("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n")
        for r in rows:
            f.write("| " + " | ".join(cells(r)) + " |\n")
        f.write(summary)
