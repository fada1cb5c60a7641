"""One command of an experiment script: run it, return its standard output, or end the script
with the command and its error output (shared by the scripts of experiments/)."""
import os
import subprocess
import sys


def sh(*args):
    args = [str(a) for a in args]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        script = os.path.splitext(os.path.basename(sys.argv[0]))[0]
        sys.exit(f"{script}: {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
    return r.stdout
