"""Regenerate committed results and compare them with what is committed, number by number.

Each entry runs one binary into a fresh folder and compares the text files it names with
their committed copies in docs/results/: the same lines, word for word, except that two
numbers are equal when |a - b| <= rtol * max(|a|, |b|) + atol (default rtol 1e-12, atol
1e-300). Times, dates and paths are not compared (metadata.json, timing lines).

  python -m tools.check_results                 # every entry
  python -m tools.check_results claims regimes  # some
  python -m tools.check_results --baseline REV
      # every entry against the same binary run at git revision REV, in a temporary
      # worktree, on this machine (entries without committed files, such as Table 1's
      # quick variant, need it)

Exit status 0 when every compared file agrees, 1 otherwise, with the first differences.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import NamedTuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
# Lines that record when or how long, not what: never compared.
VOLATILE = re.compile(r"took|seconds|wall|elapsed|UTC|git|commit| s\b|min \d+ s|cold|^Written by",
                      re.I)


class Entry(NamedTuple):
  """One committed result: the binary's module and config, and the files it writes."""
  module: str
  config: str
  committed: str | None   # folder under docs/results/, or None: compare with --baseline
  files: tuple[str, ...]
  normalize: Callable[[str], str] = lambda text: text   # applied to both sides first


def not_reached_as_empty(text: str) -> str:
  """Before issue 34 the atlas printed -1 for a time not reached; now an empty cell."""
  return re.sub(r"(?<=,)-1(?:\.0)?(?=,|$)", "", text, flags=re.M)


def sweep_config() -> str:
  """The main job's config: configs/sweep.py, or phase_diagram.py before the rename."""
  for name in ("sweep.py", "phase_diagram.py"):
    if os.path.exists(os.path.join(ROOT, "experiments", "configs", name)):
      return f"experiments/configs/{name}"
  raise FileNotFoundError("no sweep config in experiments/configs")


ENTRIES = {
    "sweep": Entry("experiments.sweep", "SWEEP", "phase_diagram", ("regime_report.txt",)),
    "claims": Entry("experiments.claims", "experiments/configs/claims.py", "claims",
                    ("claims.csv", "claims.md")),
    "regimes": Entry("experiments.regimes", "experiments/configs/regimes.py", "regimes",
                     ("regimes.csv", "regimes.md", "lengths.csv", "lengths.md", "kqv.csv",
                      "kqv.md")),
    # The second edition (issue 38): its numbers are rows.csv's; the full run takes about 4.6
    # hours of one core, 2.3 hours in two processes (docs/results/atlas/README.md).
    "atlas": Entry("experiments.atlas", "experiments/configs/atlas.py", "atlas",
                   ("rows.csv",), not_reached_as_empty),
    "table1_quick": Entry("experiments.table1", "experiments/configs/table1.py:quick", None,
                          ("table1.csv", "table1.md")),
}


def run_binary(entry: Entry, tree: str, workdir: str) -> float:
  """Runs the entry's binary with the tree as working directory; returns its wall time."""
  config = sweep_config() if entry.config == "SWEEP" else entry.config
  if not os.path.exists(os.path.join(tree, config.split(":")[0])) and entry.config == "SWEEP":
    config = "experiments/configs/phase_diagram.py"
  command = [sys.executable, "-m", entry.module, f"--config={config}", f"--workdir={workdir}"]
  start = time.perf_counter()
  subprocess.run(command, cwd=tree, check=True, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=tree))
  return time.perf_counter() - start


def differences(expected: str, found: str, rtol: float, atol: float) -> list[str]:
  """The lines where `found` differs from `expected` beyond the tolerance (at most 5)."""
  out = []
  old_lines = [line for line in expected.splitlines() if not VOLATILE.search(line)]
  new_lines = [line for line in found.splitlines() if not VOLATILE.search(line)]
  if len(old_lines) != len(new_lines):
    out.append(f"{len(old_lines)} lines committed, {len(new_lines)} regenerated")
  for number, (old, new) in enumerate(zip(old_lines, new_lines), 1):
    if NUMBER.sub("#", old) != NUMBER.sub("#", new):
      out.append(f"line {number}: text differs:\n    - {old}\n    + {new}")
    else:
      for a, b in zip(NUMBER.findall(old), NUMBER.findall(new)):
        x, y = float(a), float(b)
        if abs(x - y) > rtol * max(abs(x), abs(y)) + atol:
          out.append(f"line {number}: {a} != {b}")
          break
    if len(out) >= 5:
      break
  return out


def check(name: str, entry: Entry, baseline: str | None, rtol: float, atol: float) -> bool:
  """Regenerates one entry and compares its files; prints the verdict."""
  with tempfile.TemporaryDirectory(prefix=f"lagjax-check-{name}-") as scratch:
    new_dir = os.path.join(scratch, "new")
    seconds = run_binary(entry, ROOT, new_dir)
    if baseline is not None:
      tree = os.path.join(scratch, "baseline")
      subprocess.run(["git", "worktree", "add", "--detach", tree, baseline], cwd=ROOT,
                     check=True, capture_output=True)
      old_dir = os.path.join(scratch, "old")
      try:
        run_binary(entry, tree, old_dir)
      finally:
        subprocess.run(["git", "worktree", "remove", "--force", tree], cwd=ROOT,
                       capture_output=True)
    elif entry.committed is not None:
      old_dir = os.path.join(ROOT, "docs", "results", entry.committed)
    else:
      print(f"{name}: skipped (no committed files; give --baseline REV)")
      return True
    problems = []
    for file in entry.files:
      with open(os.path.join(old_dir, file)) as f:
        expected = f.read()
      with open(os.path.join(new_dir, file)) as f:
        found = f.read()
      problems += [f"{file}: {p}" for p in differences(
          entry.normalize(expected), entry.normalize(found), rtol, atol)]
  verdict = f"identical to rtol {rtol:g}" if not problems else "DIFFERS"
  print(f"{name}: {verdict} ({len(entry.files)} files, {seconds:.0f} s)")
  for problem in problems:
    print("  " + problem)
  return not problems


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("names", nargs="*", help=f"entries (default all): {', '.join(ENTRIES)}")
  parser.add_argument("--baseline", help="git revision for entries with no committed files")
  parser.add_argument("--rtol", type=float, default=1e-12)
  parser.add_argument("--atol", type=float, default=1e-300)
  args = parser.parse_args()
  unknown = [name for name in args.names if name not in ENTRIES]
  if unknown:
    parser.error(f"unknown entries {unknown}; known: {', '.join(ENTRIES)}")
  names = args.names or list(ENTRIES)
  ok = [check(name, ENTRIES[name], args.baseline, args.rtol, args.atol) for name in names]
  sys.exit(0 if all(ok) else 1)


if __name__ == "__main__":
  main()
