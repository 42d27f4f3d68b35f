"""The sweep and its quadrature grid (docs/theory.md §3a, §5b; issue 35 item 1): rows that
stop because θ left the grid are recomputed on a larger grid of risk/coverage.py's ladder,
and equal a sweep whose grid covered them from the start.

The default grid covers every θ on at most 8 token groups, so the test shrinks it to one
window (coverage.default_size), which the first attention step leaves.
"""

import numpy as np

import lagjax as lj
from lagjax import sweep
from lagjax.risk import coverage, quadrature
from lagjax.sweep import run as run_lib

EXACT = 1e-12   # the same dynamics on the same nodes (tests/sweep/test_sweep.py's tolerance)


def table():
  return sweep.build_table(["joint"], [3], [6], {"eta": np.array([0.5, 1.0, 2.0])})


def test_rows_stopped_by_the_grid_are_recomputed_on_a_larger_grid(tmp_path, monkeypatch):
  reference = sweep.run_sweep(table(), str(tmp_path / "reference"), lj.occurrence,
                              chunk_size=4, batch_size=4, num_records=4)
  assert not reference["diverged"].any()
  lang = lj.occurrence(3)
  width = quadrature.window_width(lang)
  monkeypatch.setattr(coverage, "default_size",
                      lambda lang, windows, step=quadrature.STEP, left=None:
                      quadrature.window_width(lang, step, left))
  grids = []
  make_evaluator = run_lib.make_evaluator

  def counting(*args, **kwargs):
    evaluator = make_evaluator(*args, **kwargs)
    grids.append(evaluator.num_points)
    return evaluator

  monkeypatch.setattr(run_lib, "make_evaluator", counting)
  resized = sweep.run_sweep(table(), str(tmp_path / "resized"), lj.occurrence, chunk_size=4,
                            batch_size=4, num_records=4)
  assert grids == [width, 2 * width]   # the one-window grid, then the covering one
  np.testing.assert_array_equal(resized["diverged"], reference["diverged"])
  for name in ("final_risk", "error", "margin", "lag_gap"):
    np.testing.assert_allclose(resized[name], reference[name], rtol=0, atol=EXACT)
  np.testing.assert_allclose(resized["risk_path"], reference["risk_path"], rtol=0, atol=EXACT)
