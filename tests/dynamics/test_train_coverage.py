"""lj.train and its quadrature grid (docs/theory.md §3a, §5; issue 35 item 1): a run that
stops because θ left the grid runs again on a larger grid of risk/coverage.py's ladder and
equals a run on that grid from the start; a fixed grid stops the run and says why.

The routes' default grid covers every θ on at most 8 token groups, so these tests shrink the
default to one window (coverage.default_size), which the first step of attention leaves:
tiny runs that exercise the same path as a 50-token run whose scores spread over 100 nats.
"""

import jax
import numpy as np
import pytest

import lagjax as lj
from lagjax.dynamics import train as train_lib
from lagjax.risk import coverage, quadrature

EXACT = 1e-12   # the same dynamics on the same nodes (test_train.py's tolerance)


@pytest.fixture
def one_window(monkeypatch):
  """The default grid shrunk to one window; compiled runners of other grids not reused."""
  monkeypatch.setattr(coverage, "default_size",
                      lambda lang, windows, step=quadrature.STEP, left=None:
                      quadrature.window_width(lang, step, left))
  train_lib._compiled_runner.cache_clear()
  yield
  train_lib._compiled_runner.cache_clear()


def assert_same_run(run, other):
  np.testing.assert_array_equal(run.steps, other.steps)
  for name in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(run, name), getattr(other, name), rtol=0, atol=EXACT)
  assert bool(run.diverged) == bool(other.diverged)


def test_a_run_that_leaves_its_grid_is_resized_and_equals_the_large_grid_run(one_window):
  lang, plan = lj.occurrence(3), lj.plans.joint(1.0, 6)
  width = quadrature.window_width(lang)
  run = lj.train(lang, plan)
  assert not bool(run.diverged) and bool(run.summary["grid_covered"])
  assert dict(run.info)["grid_points"] == 2 * width
  large = lj.train(lang, plan, num_points=2 * width)   # fixed, and covering from the start
  assert_same_run(run, large)
  assert "grid_points" not in dict(large.info)


def test_smallest_starts_on_the_grid_covering_theta0_and_resizes_from_there():
  """num_points="smallest" (the atlas's GD): θ0 = 0 needs one window, so the run starts
  there (not on the default 3), leaves it at the first attention step and re-sizes to 2
  windows, equal to a run on 2 windows from the start; the default grid gives the same risks
  but for roundoff (quadrature exact to ~1e-15, §3a, over 6 steps)."""
  lang, plan = lj.occurrence(3), lj.plans.joint(1.0, 6)
  width = quadrature.window_width(lang)
  assert coverage.needed(lang, lj.init_params(3)) <= width
  run = lj.train(lang, plan, num_points=coverage.SMALLEST)
  assert dict(run.info)["grid_points"] == 2 * width
  assert_same_run(run, lj.train(lang, plan, num_points=2 * width))
  default = lj.train(lang, plan)
  np.testing.assert_allclose(run.risk, default.risk, rtol=0, atol=1e-13)
  with pytest.raises(ValueError, match="^num_points"):
    lj.train(lang, plan, num_points="largest")


def test_a_fixed_grid_stops_the_run_and_says_why(one_window):
  lang, plan = lj.occurrence(3), lj.plans.joint(1.0, 6)
  width = quadrature.window_width(lang)
  run = lj.train(lang, plan, num_points=width)
  assert bool(run.diverged) and not bool(run.summary["grid_covered"])
  step = int(run.diverged_step)
  because = dict(run.info)["diverged_because"]
  assert because.startswith(f"quadrature grid exceeded at step {step}: θ needs ")
  assert because.endswith(f"the grid holds {width}")
  # The run stopped at θ_step, the first state outside the grid: its risk record is NaN.
  assert step >= 1 and np.isfinite(float(run.risk[step - 1]))
  assert np.isnan(np.asarray(run.risk[step:])).all()


def test_resizing_adds_at_most_two_compilations_on_a_long_run(one_window, monkeypatch):
  """One program per grid size the run uses: a 400-step run that leaves its first grid
  compiles the first and one larger grid (the ladder jumps to the covering size)."""
  built = []
  make_runner = train_lib.make_runner

  def counting(*args, **kwargs):
    built.append(kwargs.get("num_points"))
    return make_runner(*args, **kwargs)

  monkeypatch.setattr(train_lib, "make_runner", counting)
  lang = lj.occurrence(3)
  run = lj.train(lang, lj.plans.joint(1.0, 400), record_every=50)
  assert not bool(run.diverged)
  width = quadrature.window_width(lang)
  assert built == [width, 2 * width]
  assert len(built) - 1 <= 2


def test_seeds_resize_together(one_window):
  lang, plan = lj.occurrence(3), lj.plans.joint(1.0, 4)
  runs = lj.train(lang, plan, num_seeds=2)
  assert not np.asarray(runs.diverged).any()
  single = lj.train(lang, plan, num_points=2 * quadrature.window_width(lang))
  np.testing.assert_allclose(runs.risk[1], single.risk, rtol=0, atol=EXACT)


def test_kqv_training_resizes_too(one_window, monkeypatch):
  """lj.train_kqv, whose random init spreads the scores at once, re-sizes the same way and
  equals the run on the routes' default grid (which covers 3 windows)."""
  lang, plan = lj.occurrence(3), lj.plans.joint(1.0, 3)
  run = lj.train_kqv(lang, plan, jax.random.key(0), scale=1.0)
  assert not bool(run.diverged) and "grid_points" in dict(run.info)
  monkeypatch.undo()
  train_lib._compiled_runner.cache_clear()
  default = lj.train_kqv(lang, plan, jax.random.key(0), scale=1.0)
  assert "grid_points" not in dict(default.info)
  assert_same_run(run, default)
