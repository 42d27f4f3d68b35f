"""Wall time of one command at this checkout against a baseline commit, in one run.

The baseline is checked out into a temporary git worktree; the command runs in
each tree in turn (baseline, current, baseline, current, ...), so both see the
same machine load, and the ratio of the medians is reported. Each tree imports
its own lagjax: commands are run with the tree as working directory, and
`python -m` puts it first on sys.path.

Usage (from the repo root):
  python -m benchmarks.compare_commits --baseline REV --repeats 3 -- \\
      python -m experiments.sweep --config experiments/configs/sweep.py \\
      --workdir {workdir} --quiet
"{workdir}" in the command is replaced by a fresh temporary folder per run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(command: list[str], cwd: str) -> float:
  workdir = tempfile.mkdtemp(prefix="lagjax-compare-")
  try:
    start = time.perf_counter()
    subprocess.run([part.replace("{workdir}", workdir) for part in command], cwd=cwd,
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start
  finally:
    shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--baseline", required=True, help="git revision to compare against")
  parser.add_argument("--repeats", type=int, default=3, help="runs per tree (>= 1)")
  parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
  args = parser.parse_args()
  command = args.command[1:] if args.command[:1] == ["--"] else args.command
  if not command or args.repeats < 1:
    parser.error("give --repeats >= 1 and a command after --")
  here = os.getcwd()
  base = tempfile.mkdtemp(prefix="lagjax-baseline-")
  subprocess.run(["git", "worktree", "add", "--detach", base, args.baseline], check=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    times = {"baseline": [], "current": []}
    for repeat in range(args.repeats):
      for name, tree in (("baseline", base), ("current", here)):
        times[name].append(timed(command, tree))
        print(f"run {repeat + 1}/{args.repeats} {name}: {times[name][-1]:.1f} s", file=sys.stderr)
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"baseline {args.baseline}: median {medians['baseline']:.1f} s "
          f"({', '.join(f'{t:.1f}' for t in times['baseline'])})")
    print(f"current: median {medians['current']:.1f} s "
          f"({', '.join(f'{t:.1f}' for t in times['current'])})")
    print(f"ratio current / baseline: {medians['current'] / medians['baseline']:.2f}")
  finally:
    subprocess.run(["git", "worktree", "remove", "--force", base], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


if __name__ == "__main__":
  main()
