"""The GD columns of one atlas pair (docs/theory.md §10): the hybrid engine against lj.train's
loop, and the pair's parts.

In one run, on even pairs with first/last position tables (17 parameters), the atlas's
default GD grid (horizons.Horizons: 10⁴ steps; η ∈ {0.5, 1, 2, 4}, η2 ∈ {1, 10, 100}):
- every grid point of the mixed plans (three_phase, attention_first, output_only,
  attention_only: 32 runs) by lj.train's loop (the baseline: what the atlas ran before) and by
  lagjax/dynamics/hybrid.py, after one compiling call of each; target: the hybrid at least 1×
  the loop's throughput (issue 38: batched over looped ≥ 1);
- the joint grid (4 runs of lj.train; the hybrid does not apply), lj.optimum and the ten
  flows of the pair, for the pair's whole cost.
The two engines' final risks must agree to 1e-10 (else the run fails).

Usage (from the repo root):
  python -m benchmarks.atlas_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools  # noqa: E402

import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax.analysis import horizons, optimum  # noqa: E402
from lagjax.dynamics import hybrid, train  # noqa: E402

LANGUAGE, LAYOUT = "even_pairs", "cls+first_last"
TARGET_RATIO = 1.0
AGREE = 1e-10


def _grid_points(h: horizons.Horizons, name: str):
  grids = [h.gd_grid if axis == "out" else h.gd_attention_grid
           for axis in horizons.GD_AXES[name]]
  return list(itertools.product(*grids))


def run(quick: bool) -> dict:
  info = harness.machine()
  h = horizons.Horizons(gd_steps=1000, gd_settle_steps=100) if quick else horizons.Horizons()
  lang = lj.languages.from_spec(LANGUAGE)
  theta0 = lj.init_params(lang.d, **horizons.LAYOUTS[LAYOUT]._asdict())
  mixed = [(name, etas) for name in horizons.PLAN_NAMES if name != "joint"
           for etas in _grid_points(h, name)]
  plans = [horizons.padded_gd_plan(horizons.gd_plan(name, etas, h)) for name, etas in mixed]

  def looped(plan):
    return train.train(lang, plan, theta0, zero_one=False)

  def closed(plan):
    return hybrid.train(lang, plan, theta0)

  first_of_each = {}   # one plan per plan name: its compiling call
  for (name, _), plan in zip(mixed, plans):
    first_of_each.setdefault(name, plan)
  seconds, finals = {}, {}
  for label, engine in (("loop", looped), ("hybrid", closed)):
    for plan in first_of_each.values():
      engine(plan)
    start = time.perf_counter()
    finals[label] = [float(engine(plan).risk[-1]) for plan in plans]
    seconds[label] = time.perf_counter() - start
  gap = float(np.nanmax(np.abs(np.subtract(finals["loop"], finals["hybrid"]))
                        / np.maximum(1.0, np.abs(finals["loop"]))))
  if not gap <= AGREE:
    raise AssertionError(f"hybrid and loop final risks differ by {gap:.3g} (relative)")
  start = time.perf_counter()
  for etas in _grid_points(h, "joint"):
    looped(horizons.padded_gd_plan(horizons.gd_plan("joint", etas, h)))
  seconds["joint grid (loop)"] = time.perf_counter() - start
  start = time.perf_counter()
  found = optimum.optimum(lang, LAYOUT, num_starts=h.optimum_starts,
                          iterations=h.optimum_iterations)
  seconds["lj.optimum"] = time.perf_counter() - start
  start = time.perf_counter()
  horizons.row(lang, LAYOUT, horizons=h, found=found, dynamics=("flow",))
  seconds["flows and saddle checks"] = time.perf_counter() - start
  ratio = seconds["loop"] / seconds["hybrid"]
  return {"machine": info, "runs": len(plans), "steps": h.gd_steps, "seconds": seconds,
          "ratio": ratio, "passed": ratio >= TARGET_RATIO, "agreement": gap}


def table(results: dict) -> str:
  s = results["seconds"]
  rows = [("mixed plans' GD grid, lj.train loop (baseline)", s["loop"], "1.00"),
          ("mixed plans' GD grid, hybrid engine", s["hybrid"], f"{results['ratio']:.1f}× "
           f"throughput (target ≥ {TARGET_RATIO:g}: {harness.status(results['passed'])})"),
          ("joint GD grid (lj.train)", s["joint grid (loop)"], ""),
          ("lj.optimum", s["lj.optimum"], ""),
          ("flows and saddle checks", s["flows and saddle checks"], "")]
  lines = harness.markdown_table(("part", "seconds", "ratio"),
                                 [(name, f"{t:.1f}", r) for name, t, r in rows])
  return "\n".join([harness.machine_line(results["machine"]),
                    f"{LANGUAGE}, {LAYOUT}: {results['runs']} mixed-plan GD runs of "
                    f"{results['steps']} steps (every step recorded) after one compiling "
                    f"call per plan; final risks agree to {results['agreement']:.1e} "
                    "(relative); float64", "", *lines])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "1000 GD steps instead of 10⁴", argv)


if __name__ == "__main__":
  main()
