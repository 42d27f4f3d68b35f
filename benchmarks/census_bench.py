"""Census pairs: shared programs against per-language programs, and compiled programs kept
across pairs against freed after each (docs/theory.md §10a; docs/decisions/shared-programs.md,
docs/decisions/atlas.md).

In one run, the census binary (`experiments.atlas --config experiments/configs/census.py`) on
the nine two-state classes under the CLS query, one process each, three times, each with a
fresh persistent compilation cache:
- closed-over arrays embedded in the programs (JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=False), so
  each language compiles its own, every program freed after each pair (the first baseline);
- closed-over arrays as arguments (the binaries' default), so the languages share programs,
  every program freed after each pair (experiments.common.RELEASE_AT = 0: the second
  baseline, the binary as it was before 2026-12-06);
- the binary's default: arguments, programs freed once the process holds half its memory
  maps (experiments.common.release_programs).
Each ratio is the mean pair time after the first (which compiles in all three) of a baseline
over the next run; targets: at least 1.5 for shared programs (issue 38: the census in 60
minutes), at least 1 for keeping programs. The three runs' rows.csv and curves.csv must be
byte-identical (else the run fails).

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
# Each setting: (JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS, programs freed after every pair), and the
# target of its ratio over the setting before it.
SETTINGS = {"embedded, freed after each pair": ("False", True, None),
            "arguments, freed after each pair": ("True", True, 1.5),
            "arguments, freed at half the maps (default)": ("True", False, 1.0)}
# The binary with every program freed after each pair: RELEASE_AT = 0 (experiments/common.py).
FREED_EACH_PAIR = (
    "from experiments import atlas, cli, common; common.RELEASE_AT = 0.0; cli.run(atlas.main)")


def _census(workdir: Path, cache: Path, simplified: str, each_pair: bool, quick: bool) -> float:
  config = "experiments/configs/census.py" + (":quick" if quick else "")
  binary = ["-c", FREED_EACH_PAIR] if each_pair else ["-m", "experiments.atlas"]
  command = [sys.executable, *binary, f"--config={config}", f"--workdir={workdir}",
             "--config.languages=('census:2',)", "--config.layouts=('cls',)"]
  env = dict(os.environ, JAX_USE_SIMPLIFIED_JAXPR_CONSTANTS=simplified,
             LAGJAX_COMPILATION_CACHE=str(cache), PYTHONPATH=str(ROOT))
  start = time.perf_counter()
  subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True)
  return time.perf_counter() - start


def run(quick: bool) -> dict:
  info = harness.machine()
  seconds, pairs, outputs = {}, {}, {}
  with tempfile.TemporaryDirectory(prefix="census-bench-") as folder:
    for i, (label, (simplified, each_pair, _)) in enumerate(SETTINGS.items()):
      workdir = Path(folder) / f"run{i}"
      seconds[label] = _census(workdir, Path(folder) / f"cache{i}", simplified, each_pair,
                               quick)
      metadata = json.loads((workdir / "metadata.json").read_text())
      pairs[label] = list(metadata["pair_seconds"].values())
      outputs[label] = [(workdir / name).read_bytes() for name in ("rows.csv", "curves.csv")]
  first = next(iter(SETTINGS))
  if any(outputs[label] != outputs[first] for label in SETTINGS):
    raise AssertionError("the settings wrote different rows.csv or curves.csv")
  later = {label: float(np.mean(times[1:])) for label, times in pairs.items()}
  labels = list(SETTINGS)
  ratios = {label: later[before] / later[label] for before, label in zip(labels, labels[1:])}
  passed = {label: ratios[label] >= SETTINGS[label][2] for label in ratios}
  return {"machine": info, "quick": quick, "pairs": len(pairs[first]), "seconds": seconds,
          "first_pair": {label: times[0] for label, times in pairs.items()},
          "later_pairs": later, "ratios": ratios, "passed": passed}


def table(results: dict) -> str:
  rows = []
  for label, (_, _, target) in SETTINGS.items():
    if label in results["ratios"]:
      ratio = (f"{results['ratios'][label]:.2f}× per pair over the row above (target ≥ {target:g}: "
               f"{harness.status(results['passed'][label])})")
    else:
      ratio = "1.00"
    rows.append((label, f"{results['seconds'][label]:.0f}",
                 f"{results['first_pair'][label]:.1f}",
                 f"{results['later_pairs'][label]:.1f}", ratio))
  lines = harness.markdown_table(("closed-over arrays, programs", "wall (s)", "first pair (s)",
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
