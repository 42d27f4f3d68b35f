"""Census pairs with shared programs against per-language programs (docs/theory.md §10a;
docs/decisions/shared-programs.md).

In one run, the census binary (`experiments.atlas --config experiments/configs/census.py`) on
the nine two-state classes under the CLS query, one process each, twice, each with a fresh
persistent compilation cache:
- the baseline: closed-over arrays embedded in the programs
  (JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=False), so each language compiles its own;
- the binaries' default: closed-over arrays as arguments, so the languages share programs.
The ratio is the mean pair time after the first (which compiles in both) of the baseline over
the default; target: at least 1.5 (issue 38: the census in 60 minutes). The two runs' rows.csv
and curves.csv must be byte-identical (else the run fails).

Usage (from the repo root):
  python -m benchmarks.census_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from benchmarks import harness  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.5
SETTINGS = {"embedded (baseline)": "False", "arguments (the binaries' default)": "True"}


def _census(workdir: Path, cache: Path, simplified: str, quick: bool) -> float:
  config = "experiments/configs/census.py" + (":quick" if quick else "")
  command = [sys.executable, "-m", "experiments.atlas", f"--config={config}",
             f"--workdir={workdir}", "--config.languages=('census:2',)",
             "--config.layouts=('cls',)"]
  env = dict(os.environ, JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=simplified,
             LAGJAX_COMPILATION_CACHE=str(cache), PYTHONPATH=str(ROOT))
  start = time.perf_counter()
  subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
  return time.perf_counter() - start


def run(quick: bool) -> dict:
  info = harness.machine()
  seconds, pairs, outputs = {}, {}, {}
  with tempfile.TemporaryDirectory(prefix="census-bench-") as folder:
    for i, (label, simplified) in enumerate(SETTINGS.items()):
      workdir = Path(folder) / f"run{i}"
      seconds[label] = _census(workdir, Path(folder) / f"cache{i}", simplified, quick)
      metadata = json.loads((workdir / "metadata.json").read_text())
      pairs[label] = list(metadata["pair_seconds"].values())
      outputs[label] = [(workdir / name).read_bytes() for name in ("rows.csv", "curves.csv")]
  baseline, shared = SETTINGS
  if outputs[baseline] != outputs[shared]:
    raise AssertionError("the two settings wrote different rows.csv or curves.csv")
  later = {label: float(np.mean(times[1:])) for label, times in pairs.items()}
  ratio = later[baseline] / later[shared]
  return {"machine": info, "quick": quick, "pairs": len(pairs[shared]), "seconds": seconds,
          "first_pair": {label: times[0] for label, times in pairs.items()},
          "later_pairs": later, "ratio": ratio, "passed": ratio >= TARGET_RATIO}


def table(results: dict) -> str:
  rows = []
  for label in SETTINGS:
    ratio = (f"{results['ratio']:.2f}× per pair (target ≥ {TARGET_RATIO:g}: "
             f"{harness.status(results['passed'])})" if label != next(iter(SETTINGS))
             else "1.00")
    rows.append((label, f"{results['seconds'][label]:.0f}",
                 f"{results['first_pair'][label]:.1f}",
                 f"{results['later_pairs'][label]:.1f}", ratio))
  lines = harness.markdown_table(("closed-over arrays", "wall (s)", "first pair (s)",
                                  "later pairs, mean (s)", "ratio"), rows)
  horizons = "the quick horizons" if results["quick"] else "the atlas's horizons"
  return "\n".join([harness.machine_line(results["machine"]),
                    f"census:2 under the CLS query, {results['pairs']} pairs, one process, "
                    f"{horizons}, a fresh compilation cache per setting; rows.csv and "
                    "curves.csv byte-identical; float64", "", *lines])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "the census config's quick variant (short horizons)",
               argv)


if __name__ == "__main__":
  main()
