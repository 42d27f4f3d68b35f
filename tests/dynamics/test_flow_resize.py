"""lj.flow and its quadrature grid (docs/theory.md §3a, §5c; issue 35, item 1 and Speed): a
flow whose scores spread past its grid's edge stops there, runs again on the next covering
size of risk/coverage.py's ladder, equals a flow on that grid from the start, and re-sizing
adds one compilation per grid size (the target: at most 2 over a run).

occurrence(3) has 3 score windows, so the routes' default grid holds all 3 and no θ leaves
it; the fixture shrinks the default to 2 windows (2 × 174 = 348 nodes), the size a language
with more than 8 windows starts on (quadrature.default_num_points). A flow stops at
GRID_MARGIN = 0.9 of its grid, 313.2 nodes here: two score clusters 35 nats apart need 314.
From θ0 with scores (0, -34, 0) (310 nodes) the flow moves the two high scores apart by
~1.3 nats by t = 100 and crosses that edge in mid-run: the small horizon of the 10⁶-unit run of
benchmarks/flow_bench.py (occurrence(12), re-sized at t ≈ 1.6e4), on a program that
compiles in seconds.
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.dynamics import flow as flow_lib
from lagjax.risk import coverage, quadrature

LANG = lj.occurrence(3)
PLAN = lj.plans.flow_plan("joint", (100.0,))
RECORDS = 8
WIDTH = quadrature.window_width(LANG)   # 174 nodes a window
# The 2-window default, and the next size of the ladder (width·min(2^k, 3)).
SMALL, LARGE = 2 * WIDTH, 3 * WIDTH
BETA0 = jnp.array([1.0, -0.5, 0.3])
NEAR = {"alpha": jnp.array([0.0, -20.0, 0.0]), "beta": BETA0}   # stays inside the small grid
FAR = {"alpha": jnp.array([0.0, -34.0, 0.0]), "beta": BETA0}    # reaches its edge at 0 < t < 100
# A re-sized run and a run on the large grid from the start: the same program (one grid
# size, one key of flow._compiled_flow) on the same numbers, so the same bits.
EXACT = 1e-12


@pytest.fixture
def built(monkeypatch):
  """The grid size of every flow program built, in order; compiled flows not reused."""
  sizes = []
  make_flow = flow_lib.make_flow

  def counting(*args, **kwargs):
    sizes.append(kwargs["num_points"])
    return make_flow(*args, **kwargs)

  monkeypatch.setattr(flow_lib, "make_flow", counting)
  flow_lib._compiled_flow.cache_clear()
  yield sizes
  flow_lib._compiled_flow.cache_clear()


@pytest.fixture
def two_windows(monkeypatch, built):
  """The default grid shrunk to 2 windows; the sizes built (`built`)."""
  monkeypatch.setattr(coverage, "default_size",
                      lambda lang, windows, step=quadrature.STEP, left=None:
                      2 * quadrature.window_width(lang, step, left))
  return built


def run_flow(theta0, **options):
  return lj.flow(LANG, PLAN, theta0, num_records=RECORDS, tied=False, **options)


def compilations(caplog, call):
  """(result, the XLA compilations call() triggers): JAX logs one "Compiling" record per
  compilation under jax.log_compiles."""
  caplog.clear()
  with jax.log_compiles(True), caplog.at_level(logging.DEBUG, logger="jax"):
    result = call()
    jax.block_until_ready(result.risk)
  return result, [r.getMessage()[:80] for r in caplog.records if "Compiling" in r.getMessage()]


@pytest.mark.slow
def test_resizing_adds_one_compilation_and_equals_the_large_grid_run(two_windows, caplog):
  """A flow on the default grid compiles its program; a second flow of the same language and
  options that reaches the grid's edge compiles the next grid size's program and nothing
  else (1 extra compilation, target ≤ 2); it equals a flow on that size from the start,
  which compiles nothing more; a fixed small grid stops at the edge and says so."""
  built = two_windows
  assert coverage.needed(LANG, NEAR) < coverage.needed(LANG, FAR) < flow_lib.GRID_MARGIN * SMALL
  covered = run_flow(NEAR)
  assert "grid_points" not in dict(covered.info) and built == [SMALL]
  assert bool(covered.summary["grid_covered"])

  resized, compiled = compilations(caplog, lambda: run_flow(FAR))
  assert dict(resized.info)["grid_points"] == LARGE
  assert flow_lib.status(resized) == "completed at t = 100"
  assert built == [SMALL, LARGE]           # one program per grid size visited
  extra = len(compiled)
  assert extra == 1, compiled              # the large grid's program, nothing else
  assert compiled[0].startswith("Compiling jit(run)")
  assert extra <= 2                        # issue 35's target over a run

  large, compiled = compilations(caplog, lambda: run_flow(FAR, num_points=LARGE))
  assert compiled == [] and built == [SMALL, LARGE]
  assert "grid_points" not in dict(large.info)
  np.testing.assert_array_equal(resized.time, large.time)
  for name in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(resized, name), getattr(large, name), rtol=0, atol=EXACT)

  # The small grid fixed: the run stops where θ needs GRID_MARGIN of it, in mid-run.
  stopped = run_flow(FAR, num_points=SMALL)
  assert built == [SMALL, LARGE]
  assert int(stopped.summary["status"]) == flow_lib.GRID_EXCEEDED and bool(stopped.diverged)
  assert 0.0 < float(stopped.t_end) < 100.0
  assert float(stopped.summary["grid_points_needed"]) >= flow_lib.GRID_MARGIN * SMALL


@pytest.mark.slow
def test_smallest_starts_at_the_size_covering_theta0_and_resizes_from_there(built):
  """num_points="smallest" (the atlas's flows): the default grid (3 windows here) is not
  touched; a flow from NEAR runs on the 2-window size alone, with the risks of the default
  grid to roundoff, and from FAR it starts there, meets the edge and re-sizes to 3 windows,
  equal to the default run (the same program) to EXACT."""
  near = run_flow(NEAR, num_points=coverage.SMALLEST)
  assert built == [SMALL] and "grid_points" not in dict(near.info)
  default = run_flow(NEAR)
  assert built == [SMALL, LARGE]
  # Two grids that both cover θ: the same risk but for roundoff (quadrature exact to
  # ~1e-15, §3a), carried along 100 time units of a contracting flow.
  np.testing.assert_allclose(near.risk, default.risk, rtol=0, atol=1e-13)
  far = run_flow(FAR, num_points=coverage.SMALLEST)
  assert built == [SMALL, LARGE] and dict(far.info)["grid_points"] == LARGE
  on_default = run_flow(FAR)
  for name in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(far, name), getattr(on_default, name), rtol=0,
                               atol=EXACT)
