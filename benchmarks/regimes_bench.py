"""Timing of the exact three-phase regime lj.regimes.three_phase_regime (docs/theory.md §8).

Times, after compilation (one compile serves every d), the whole call
three_phase(occurrence(d), ε = 1e-3) for d = 50 … 10^5 (the language is built
outside the timer; the call includes grouping the d tokens, the coefficients
b and c, Δ_ε, the monotonicity check and the η3 limit), the exact boundary
η2_min on 10^4 values of η1 (the Δ law), the finite-T boundary by bisection on
64 values of η1, and, as the baseline measured in the same run, what the grid
route costs for one coarse answer: a 64 × 64 closed-form phase diagram at
d = 50 (T = 10^4), vmapped.

A regular language takes the general path (docs/theory.md §8.8: the transfer route's
moments, one compiled analysis per language). The issue's target: the whole call on a
regular language at d = 2 costs at most 20× the occurrence family's at d = 50, both after
their first call, timed round-robin in one run (harness.interleaved_times), so the ratio
does not see the machine's load change. The first calls (compilation included) are
reported beside it: each language compiles its own analysis once per process.

Usage (from the repo root):
  python -m benchmarks.regimes_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks.harness import median_time  # noqa: E402
from lagjax import closed_form, plans, regimes  # noqa: E402
from lagjax.data import regular_builtins  # noqa: E402

EPS = 1e-3
DS = (50, 1_000, 10_000, 100_000)
TARGET = 50e-3  # the target at d = 10^5
GRID = 64
STEPS = 10_000
REGULAR_TARGET = 20.0  # t(regular language, d = 2) / t(occurrence, d = 50), whole call
# Tomita 4 (no boundary at ε = 1e-3: R* stays above it) and, in a full run, Tomita 1 (a
# finite Δ_ε, learned from η1η2 ≥ 54.2; docs/results/regimes/languages.md).
REGULAR_QUICK = (4,)
REGULAR_FULL = (4, 1)


def grid_baseline(repeats: int) -> float:
  """Median seconds of a GRID × GRID closed-form phase diagram at d = 50, after compiling."""
  simulate = closed_form.make_simulator(lj.occurrence(50), plans.three_phase(1, 1, 1, STEPS))
  compiled = jax.jit(jax.vmap(lambda etas: simulate(etas)[1]))
  eta1, eta2 = np.meshgrid(np.geomspace(1, 1e4, GRID), np.geomspace(1, 1e6, GRID))
  etas = np.stack([eta1.ravel(), eta2.ravel(), np.ones(GRID * GRID)], 1)
  return median_time(compiled, etas, repeats=repeats)


def regular_ratios(occurrence_50, tomita_ks, repeats: int) -> dict:
  """Per Tomita k: the first call's seconds (compilation included) and the warm whole call's
  median, and the warm median of occurrence(50), timed round-robin in one run."""
  first = {}
  for k in tomita_ks:
    first[k] = harness.timed(lambda k=k: regimes.three_phase_regime(
        regular_builtins.tomita(k), EPS).eta1_stable)
  calls = [(lambda: regimes.three_phase_regime(occurrence_50, EPS).delta_eps, ())]
  calls += [(lambda k=k: regimes.three_phase_regime(regular_builtins.tomita(k), EPS).eta1_stable,
             ()) for k in tomita_ks]
  times = np.median(harness.interleaved_times(calls, repeats), axis=0)
  return {"occurrence_50": float(times[0]),
          "tomita": {k: {"first_call": first[k], "warm": float(t),
                         "ratio": float(t / times[0])} for k, t in zip(tomita_ks, times[1:])}}


def run(quick: bool) -> dict:
  info = harness.machine()
  repeats = 5 if quick else 15
  languages = {d: lj.occurrence(d) for d in DS}
  regime_of = {d: regimes.three_phase_regime(languages[d], EPS) for d in DS}  # compiles once
  times = {d: median_time(lambda lang=languages[d]: regimes.three_phase_regime(lang, EPS).delta_eps,
                          repeats=repeats) for d in DS}
  regime = regime_of[50]
  eta1 = np.geomspace(1.0, 0.99 * regime.eta1_max, 10_000)
  law = median_time(regime.eta2_min, eta1, repeats=repeats)
  finite = regimes.three_phase_regime(languages[50], EPS, steps=STEPS)
  bisection = median_time(finite.eta2_min, eta1[:: len(eta1) // 64][:64], repeats=repeats)
  grid = grid_baseline(max(3, repeats // 3))
  regular = regular_ratios(languages[50], REGULAR_QUICK if quick else REGULAR_FULL, repeats)
  rows = [(f"three_phase(occurrence({d}), ε = 1e-3), whole call", times[d],
           TARGET if d == 100_000 else None, grid) for d in DS]
  rows += [("η2_min on 10^4 η1 values (Δ law, T = ∞)", law, None, grid),
           (f"η2_min on 64 η1 values (T = {STEPS}: the law verified on R_T, bisection where "
            "that fails)", bisection, None, grid),
           (f"baseline: {GRID}×{GRID} closed-form grid at d = 50, T = {STEPS}", grid, None, None)]
  return {"machine": info, "quick": quick, "repeats": repeats, "rows": harness.timing_rows(rows),
          "cost_ratio_d1e5_over_d50": times[100_000] / times[50], "regular": regular,
          "checks": {"delta_eps": {d: regime_of[d].delta_eps for d in DS}}}


def table(results: dict) -> str:
  return "\n".join([
      harness.machine_line(results["machine"]),
      f"repeats per case: {results['repeats']} after compilation; float64; shared machine",
      "", *harness.timing_table(results["rows"]), "",
      "baseline / case: how many exact regimes fit in the time of one coarse grid diagram.",
      f"tied cost growth: t(d = 10^5) / t(d = 50) = {results['cost_ratio_d1e5_over_d50']:.2f} "
      "(the NumPy grouping of the d tokens is the only O(d) part).",
      f"checks: Δ_ε by d = {results['checks']['delta_eps']}",
      "", *regular_table(results["regular"]),
  ])


def regular_table(regular: dict) -> list[str]:
  """The regular-language rows: warm whole call against occurrence(50)'s, in one run."""
  rows = [(f"three_phase(tomita({k}), ε = 1e-3), d = 2, transfer route",
           harness.format_seconds(row["warm"]), harness.format_seconds(row["first_call"]),
           f"{row['ratio']:.1f}×", f"≤ {REGULAR_TARGET:g}×",
           harness.status(row["ratio"] <= REGULAR_TARGET))
          for k, row in regular["tomita"].items()]
  return [f"regular languages against three_phase(occurrence(50), ε = 1e-3), warm whole call "
          f"{harness.format_seconds(regular['occurrence_50'])} (round-robin, same run):", "",
          *harness.markdown_table(("case", "warm median", "first call (compiles)",
                                   "ratio to occurrence(50)", "target", "status"), rows)]


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "5 repeats", argv)


if __name__ == "__main__":
  main()
