"""Timing of the exact three-phase regime lj.regimes.three_phase_regime (docs/theory.md §8).

Times, after compilation (one compile serves every d), the whole call
three_phase(occurrence(d), ε = 1e-3) for d = 50 … 10^5 (the language is built
outside the timer; the call includes grouping the d tokens, the coefficients
b and c, Δ_ε, the monotonicity check and the η3 limit), the exact boundary
η2_min on 10^4 values of η1 (the Δ law), the finite-T boundary by bisection on
64 values of η1, and, as the baseline measured in the same run, what the grid
route costs for one coarse answer: a 64 × 64 closed-form phase diagram at
d = 50 (T = 10^4), vmapped.

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

EPS = 1e-3
DS = (50, 1_000, 10_000, 100_000)
TARGET = 50e-3  # the target at d = 10^5
GRID = 64
STEPS = 10_000


def grid_baseline(repeats: int) -> float:
  """Median seconds of a GRID × GRID closed-form phase diagram at d = 50, after compiling."""
  simulate = closed_form.make_simulator(lj.occurrence(50), plans.three_phase(1, 1, 1, STEPS))
  compiled = jax.jit(jax.vmap(lambda etas: simulate(etas)[1]))
  eta1, eta2 = np.meshgrid(np.geomspace(1, 1e4, GRID), np.geomspace(1, 1e6, GRID))
  etas = np.stack([eta1.ravel(), eta2.ravel(), np.ones(GRID * GRID)], 1)
  return median_time(compiled, etas, repeats=repeats)


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
  rows = [(f"three_phase(occurrence({d}), ε = 1e-3), whole call", times[d],
           TARGET if d == 100_000 else None, grid) for d in DS]
  rows += [("η2_min on 10^4 η1 values (Δ law, T = ∞)", law, None, grid),
           (f"η2_min on 64 η1 values (T = {STEPS}: the law verified on R_T, bisection where "
            "that fails)", bisection, None, grid),
           (f"baseline: {GRID}×{GRID} closed-form grid at d = 50, T = {STEPS}", grid, None, None)]
  return {"machine": info, "quick": quick, "repeats": repeats, "rows": harness.timing_rows(rows),
          "cost_ratio_d1e5_over_d50": times[100_000] / times[50],
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
  ])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "5 repeats", argv)


if __name__ == "__main__":
  main()
