"""The coverage rule of the quadrature routes (docs/theory.md §3a, issue 35 item 1): outside
its static grid a route gives NaN, value and gradient, never a finite wrong number; the eager
conveniences size the grid and stay exact; risk/coverage.py's ladder and resize."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quick import some_quick

import lagjax as lj
from lagjax.risk import coverage, quadrature

# Two trapezoid sums on the same lattice that differ only by nodes of weight zero, or the
# same integrand on lattices of step h and h/2, agree to the rule's error (< 1e-15,
# quadrature's module docstring) plus float64 roundoff of sums of ~1e3 terms.
TOL = 1e-12


def spread_theta(spread, d=50, seed=0):
  """d untied scores drawn uniformly over `spread` nats, values from N(0, 1) (seed 0)."""
  rng = np.random.default_rng(seed)
  return {"alpha": jnp.asarray(rng.uniform(0.0, spread, d)),
          "beta": jnp.asarray(rng.normal(size=d))}


@pytest.fixture(scope="module")
def occurrence50():
  lang = lj.occurrence(50)
  return lang, lj.risk_fn(lang)


@pytest.mark.parametrize("spread", some_quick([100.0, 300.0], [100.0]))
def test_jitted_route_outside_its_grid_is_nan_and_population_risk_is_exact(occurrence50,
                                                                          spread):
  """The issue's case: jax.jit(lj.risk_fn(lj.occurrence(50)).risk) on 50 untied scores
  over 100 (300) nats: the default grid (2 windows, 374 nodes) does not cover them, so NaN;
  lj.population_risk sizes its grid and gives the exact value, the same as the largest grid
  of the ladder and as a grid of half the step."""
  lang, route = occurrence50
  theta = spread_theta(spread)
  assert np.isnan(float(jax.jit(route.risk)(theta)))
  report = jax.jit(route.report)(theta)
  assert not bool(report["grid_covered"])
  assert int(report["grid_points_needed"]) > coverage.default_size(lang, 50)
  assert np.isnan(float(report["mean_yf"])) and np.isnan(float(report["mean_f2"]))
  result = lj.population_risk(lang, theta)
  assert result.details["grid_covered"] and np.isfinite(result.value)
  top = lj.risk_fn(lang, num_points=coverage.ladder(lang, 50)[-1])
  assert abs(float(jax.jit(top.risk)(theta)) - result.value) <= TOL
  fine = lj.risk_fn(lang, step=0.125, num_points=coverage.ladder(lang, 50, step=0.125)[-1])
  assert abs(float(jax.jit(fine.risk)(theta)) - result.value) <= TOL


def test_the_gradient_outside_the_grid_is_nan_too(occurrence50):
  lang, route = occurrence50
  theta = spread_theta(100.0)
  grads = jax.jit(jax.grad(route.risk))(theta)
  assert np.all(np.isnan(np.asarray(grads["alpha"])))
  assert np.all(np.isnan(np.asarray(grads["beta"])))
  covering = coverage.size_covering(lang, coverage.needed(lang, theta), 50)
  grads = jax.jit(jax.grad(lj.risk_fn(lang, num_points=covering).risk))(theta)
  assert np.all(np.isfinite(np.asarray(grads["alpha"])))


def test_a_covered_result_does_not_depend_on_the_grid_size():
  """Inside its coverage the mask multiplies by 1: a larger grid only adds nodes of weight
  zero, so the values agree to roundoff (and to the committed results)."""
  lang = lj.occurrence(12)
  theta = spread_theta(30.0, d=12)
  values = [float(jax.jit(lj.risk_fn(lang, num_points=size).risk)(theta))
            for size in coverage.ladder(lang, 12)[1:]]
  assert np.isfinite(values).all()
  assert max(values) - min(values) <= TOL


def test_moments_outside_the_grid_are_nan():
  """The moments (H, g) of both quadrature routes, and the traced-problem form."""
  lang = lj.occurrence(4)
  partition = lj.partition.of_language(lang)
  width = quadrature.window_width(lang)
  far = {"alpha": jnp.array([0.0, -60.0]), "beta": jnp.zeros(2)}
  narrow = lj.risk.laplace.attention_moments(lang, partition, num_points=width)
  H, g = jax.jit(narrow)(far)
  assert np.isnan(np.asarray(H)).all() and np.isnan(np.asarray(g)).all()
  H, g = jax.jit(lj.risk.laplace.attention_moments(lang, partition))(far)
  assert np.isfinite(np.asarray(H)).all()
  pairs = lj.data.regular_builtins.even_pairs()
  pair_width = quadrature.window_width(pairs)
  H, g = jax.jit(lj.risk.transfer.attention_moments(
      pairs, lj.partition.of_language(pairs), num_points=pair_width))(far)
  assert np.isnan(np.asarray(H)).all() and np.isnan(np.asarray(g)).all()
  grid, problem = lj.risk.moments.problem(lang, lj.partition.token_group_ids(lang), False)
  narrow_grid = lj.risk.moments.Grid(grid.cls, grid.left, grid.width, grid.width)
  H, g = jax.jit(lj.risk.moments.moments, static_argnums=0)(narrow_grid, problem,
                                                            jnp.array([0.0, -60.0]))
  assert np.isnan(np.asarray(H)).all()


def test_transfer_route_outside_its_grid_is_nan():
  pairs = lj.data.regular_builtins.even_pairs()
  width = quadrature.window_width(pairs)
  route = lj.risk_fn(pairs, num_points=width)
  theta = {"alpha": jnp.array([0.0, -60.0]), "beta": jnp.array([1.0, -1.0])}
  report = jax.jit(route.report)(theta)
  assert not bool(report["grid_covered"]) and np.isnan(float(report["risk"]))
  assert np.isnan(np.asarray(jax.jit(jax.grad(route.risk))(theta)["alpha"])).all()
  assert np.isfinite(lj.population_risk(pairs, theta).value)


def test_scores_beyond_any_exact_grid_give_nan_not_a_finite_risk():
  """The ±1e300 case, where the Laplace route once returned 8.03: the lattice nodes are no
  longer exact there, so no grid covers θ; the route and population_risk say so."""
  lang = lj.occurrence(4)
  theta = {"alpha": jnp.array([1e300, -1e300, 0.0, 0.0]), "beta": jnp.array([1.0, -1.0, 0.5, 2.0])}
  report = jax.jit(lj.risk_fn(lang).report)(theta)
  assert np.isnan(float(report["risk"])) and not bool(report["grid_covered"])
  result = lj.population_risk(lang, theta)
  assert np.isnan(result.value) and not result.details["grid_covered"]
  assert "beyond any exact grid" in result.details["grid"]
  assert coverage.needed(lang, theta) == float("inf")
  assert coverage.size_covering(lang, coverage.needed(lang, theta), 4) is None


def test_ladder_matches_population_risk_sizes():
  """population_risk's grid is the smallest size of the ladder that covers θ."""
  lang = lj.occurrence(50)
  width = quadrature.window_width(lang)
  assert coverage.ladder(lang, 50) == tuple(width * k for k in (1, 2, 4, 8, 16, 32, 50))
  assert coverage.size_covering(lang, width + 1, 50) == 2 * width
  assert coverage.size_covering(lang, 40 * width, 50) == 50 * width
  assert coverage.default_size(lang, 50) in coverage.ladder(lang, 50)
  assert coverage.grid_options("transfer", 7) == {"num_points": 7}
  assert coverage.grid_options("lattice", 7) == {}


def test_resize_reruns_only_for_the_grid():
  """resize reruns while the stop was the grid's, jumps to the covering size, stops when
  the stop has another cause, and runs once on a fixed grid."""
  lang = lj.occurrence(50)
  theta = spread_theta(100.0)
  points = coverage.needed(lang, theta)
  sizes = []

  def attempt(num_points):
    sizes.append(num_points)
    return num_points

  def grid_stop(num_points):
    return theta if num_points < points else None

  resized = coverage.resize(attempt, lang, 50, stopped_at=grid_stop)
  assert sizes == [374, coverage.size_covering(lang, points, 50)]
  assert resized.failures == ((374, points),) and not resized.exceeded
  sizes.clear()
  covered = {"alpha": jnp.zeros(50), "beta": jnp.zeros(50)}
  resized = coverage.resize(attempt, lang, 50, stopped_at=lambda size: covered)
  assert sizes == [374] and resized.failures == () and not resized.exceeded
  sizes.clear()
  resized = coverage.resize(attempt, lang, 50, stopped_at=grid_stop, num_points=374,
                            fixed=True)
  assert sizes == [374] and resized.exceeded
  assert "θ needs" in coverage.describe(points, 374)
