"""Saddles and their escape law (docs/theory.md §10c): the Hessian's spectrum against LAPACK,
Newton onto saddles, the escape-law fit on exact data, and (slow) issue 38's check on
Tomita 4 with position tables."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.flatten_util import ravel_pytree

import lagjax as lj
from lagjax.analysis import saddles


def _double_well(p):
  """(x² − 1)² + y² + x y³: a saddle at 0 (eigenvalues -4, 2), minima near (±1, 0)."""
  return (p["x"] ** 2 - 1.0) ** 2 + p["y"] ** 2 + p["x"] * p["y"] ** 3


def test_newton_lands_on_the_saddle_and_reads_its_unstable_direction():
  found = saddles.saddle(_double_well, {"x": jnp.float64(0.2), "y": jnp.float64(-0.1)})
  assert found.is_saddle
  assert found.grad_norm < 1e-13 and found.displacement > 0.2
  np.testing.assert_allclose(found.eigenvalues, [-4.0, 2.0], atol=1e-12)
  assert abs(abs(float(found.direction["x"])) - 1.0) < 1e-12


def test_a_minimum_is_not_a_saddle_and_unrefined_points_stay_put():
  found = saddles.saddle(_double_well, {"x": jnp.float64(0.9), "y": jnp.float64(0.05)})
  assert not found.is_saddle and found.min_eigenvalue > 1.0
  assert abs(float(found.theta["x"]) - 1.0) < 1e-10
  at = saddles.saddle(_double_well, {"x": jnp.float64(0.2), "y": jnp.float64(0.0)},
                      refine=False)
  assert at.displacement == 0.0 and float(at.theta["x"]) == 0.2
  # Hessian at (0.2, 0): diag(12·0.04 − 4, 2) = diag(-3.52, 2).
  np.testing.assert_allclose(at.eigenvalues, [-3.52, 2.0], atol=1e-12)


@pytest.mark.parametrize("curvature, expected", [(-2e-6, True), (-2e-9, False), (2e-9, False)])
def test_the_saddle_threshold_is_tol(curvature, expected):
  """λ < −tol (1e-8) is a saddle; an eigenvalue within tol of 0 either side is not."""
  risk = lambda p: 0.5 * curvature * p[0] ** 2 + p[1] ** 2   # noqa: E731
  found = saddles.saddle(risk, jnp.zeros(2), refine=False)
  assert found.is_saddle is expected and abs(found.min_eigenvalue - curvature) < 1e-15


def test_spectrum_matches_lapack_on_a_random_quadratic():
  """Jacobi on the autodiff Hessian against numpy's eigvalsh of the matrix itself, to 1e-12
  (both backward stable: errors ~ P·ε·‖A‖)."""
  rng = np.random.default_rng(0)
  root = rng.standard_normal((7, 7))
  matrix = root + root.T
  risk = lambda x: 0.5 * x @ jnp.asarray(matrix) @ x   # noqa: E731
  values, vectors = saddles.hessian_spectrum(risk, jnp.asarray(rng.standard_normal(7)))
  np.testing.assert_allclose(values, np.linalg.eigvalsh(matrix), atol=1e-12)
  np.testing.assert_allclose(vectors.T @ vectors, np.eye(7), atol=1e-12)


def test_escape_law_fit_recovers_an_exact_line_and_refuses_bad_input():
  eps = np.array([1e-3, 1e-5, 1e-7, 1e-9])
  law = saddles.fit_escape_law(eps, 42.0 + np.log(1.0 / eps) / 0.0195, eigenvalue=-0.0195)
  assert abs(law.slope - 1 / 0.0195) < 1e-9 and abs(law.intercept - 42.0) < 1e-8
  assert abs(law.slope_ratio - 1.0) < 1e-12 and law.max_residual < 1e-9
  bent_times = 42.0 + np.log(1.0 / eps) / 0.0195 + [0, 30, 0, 0]
  bent = saddles.fit_escape_law(eps, bent_times)
  assert bent.max_residual > 10 and np.isnan(bent.slope_ratio)
  slope, intercept = np.polyfit(np.log(1.0 / eps), bent_times, 1)   # least squares, again
  assert abs(bent.slope - slope) < 1e-9 and abs(bent.intercept - intercept) < 1e-8
  with pytest.raises(ValueError, match="at least 3 distinct values in"):
    saddles.fit_escape_law([1e-4, 1e-8, 0.0], [1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match="times must be finite"):
    saddles.fit_escape_law(eps, [1.0, 2.0, np.nan, 3.0])
  with pytest.raises(ValueError, match="eigenvalue must be a finite real < 0"):
    saddles.fit_escape_law(eps, [1.0, 2.0, 3.0, 4.0], eigenvalue=0.01)


def test_unit_direction_is_seeded():
  template = lj.init_params(2, positions="first_last")
  first = ravel_pytree(saddles.unit_direction(template, seed=3))[0]
  assert abs(float(jnp.linalg.norm(first)) - 1.0) < 1e-15
  np.testing.assert_array_equal(first, ravel_pytree(saddles.unit_direction(template, 3))[0])
  assert not np.allclose(first, ravel_pytree(saddles.unit_direction(template, 4))[0])


def _tilted_well(tilt):
  """½(x − 1)² + ¼(y² − 1)² + tilt·x·y: at tilt 0 the reflection y ↦ −y is a symmetry, the
  line y = 0 is invariant, and (1, 0) is a saddle (λ = −1, v = ŷ) on it; a tilt moves the
  saddle off the line and lets the flow from 0 feel ŷ."""
  return lambda p: (0.5 * (p[0] - 1.0) ** 2 + 0.25 * (p[1] ** 2 - 1.0) ** 2
                    + tilt * p[0] * p[1])


def _flow_states(risk, times):
  """The flow dθ/dt = −∇R from θ0 = 0 by RK4 at step 1e-2, recorded at `times` (multiples of
  the step): a reference integrator independent of lj.flow."""
  step = 1e-2
  grad = jax.grad(risk)

  def rk4(theta, _):
    k1 = -grad(theta)
    k2 = -grad(theta + 0.5 * step * k1)
    k3 = -grad(theta + 0.5 * step * k2)
    k4 = -grad(theta + step * k3)
    return theta + step / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4), theta

  num_steps = int(round(times[-1] / step))
  _, path = jax.lax.scan(rk4, jnp.zeros(2), None, length=num_steps + 1)
  return path[np.round(np.asarray(times) / step).astype(int)]


TOY_TIMES = np.array([0.0, 0.5, 1.0, 2.0, 4.0, 8.0])


def test_excitability_across_a_symmetry_is_roundoff_only():
  risk = _tilted_well(0.0)
  found = saddles.saddle(risk, jnp.array([0.9, 0.05]))
  assert abs(found.min_eigenvalue + 1.0) < 1e-12
  check = saddles.excitability(risk, found, TOY_TIMES, _flow_states(risk, TOY_TIMES))
  assert not check.excited and check.kind == "across an invariant set (roundoff only)"
  assert check.alignment == 0.0 and check.span_component == 0.0   # y stays exactly 0
  # At t = 8 the envelope 1e-14·e^8/e^(-8) = 9e-8 exceeds 1e-8: the last record is not read.
  assert check.num_decisive == TOY_TIMES.size - 1 and check.decisive_until == 4.0
  assert check.from_zero == "stays at the saddle"
  assert check.from_noise == "learns after about ln(1/ε)/abs(λ) = 1·ln(1/ε)"


def test_excitability_sees_a_direction_the_flow_excites():
  """With tilt 0.1 the saddle sits at y ≈ 0.1 and v ≈ ŷ + 0.05 x̂: the gradient along the run
  from 0, (x − 1 + 0.1 y, y³ − y + 0.1 x), has a component along v of order 0.1."""
  risk = _tilted_well(0.1)
  found = saddles.saddle(risk, jnp.array([1.0, 0.1]))
  assert found.is_saddle and found.grad_norm < 1e-13
  check = saddles.excitability(risk, found, TOY_TIMES, _flow_states(risk, TOY_TIMES))
  assert check.excited and check.kind == "excited by the flow"
  assert check.alignment > 0.01 and check.span_component > 0.5
  assert check.from_zero == "leaves the saddle without help"


def test_excitability_reads_only_decisive_records_and_refuses_bad_input():
  """Late records, where roundoff grown like e^(abs(λ) t) could pass for excitation, are not
  read: at λ = −1 the envelope 1e-14·e^t/‖∇R‖ passes 1e-8 near t = 14 − ln ‖∇R‖⁻¹."""
  risk = _tilted_well(0.0)
  found = saddles.saddle(risk, jnp.array([0.9, 0.05]))
  times = np.array([0.0, 1.0, 5.0, 40.0])
  states = jnp.array([[0.0, 0.0], [0.6, 0.0], [0.99, 0.0], [1.0 - 1e-9, 0.5]])  # late: astray
  check = saddles.excitability(risk, found, times, states)
  assert check.num_decisive == 3 and check.decisive_until == 5.0 and not check.excited
  assert check.alignments[-1] > 0.1 and check.envelopes[-1] > 1.0
  late = saddles.excitability(risk, found, times[3:], states[3:])
  assert late.kind == "undecided (no decisive record)" and np.isnan(late.alignment)
  with pytest.raises(ValueError, match="found must be a saddle"):
    saddles.excitability(risk, saddles.saddle(risk, jnp.array([0.9, 0.9])), times, states)
  with pytest.raises(ValueError, match="times must be 1-D with one entry per state"):
    saddles.excitability(risk, found, times[:3], states)
  with pytest.raises(ValueError, match="strictly increasing"):
    saddles.excitability(risk, found, times[::-1], states)
  with pytest.raises(ValueError, match="threshold must be"):
    saddles.excitability(risk, found, times, states, threshold=1.0)


@pytest.mark.slow
def test_tomita_4_with_positions_is_a_roundoff_saddle_left_at_the_rate_its_eigenvalue_says():
  """Issue 38: the flow from 0 on Tomita 4 (CLS query, position tables) stalls at R ≈ 0.2368,
  a saddle. Kept cheap (the whole test was 13 minutes under load):

  - the plateau point is 200 steps of joint GD at η = 1 (the same invariant set as the flow;
    Newton then lands on the same critical point, R = 0.236770218289, λ = −0.0195309),
    compiled at XLA level 2 like the flows below (36.4 -> 31.8 s of CPU for the test);
  - its most negative eigenvalue matches LAPACK on a forward-over-reverse Hessian to 1e-8
    (both backward stable; the Hessian's norm is ~1.3);
  - the unstable direction is antisymmetric under first ↔ last, across the reversal-symmetric
    set the flow from 0 never leaves in exact arithmetic: excitability says roundoff only;
  - the escape law's slope is measured from the saddle itself, θ0 = θ* + ε·u at
    ε = 1e-2, 1e-3, 1e-4 (the approach from 0 only adds to the intercept; ε·abs(⟨u, v⟩) stays
    far above rtol 1e-6, see escape_times), and matches 1/abs(λ) within 10 %.
  """
  lang = lj.data.regular_builtins.tomita(4)
  template = lj.init_params(2, positions="first_last")
  risk = lj.risk_fn(lang, positions="first_last").risk
  plateau = lj.train(lang, lj.plans.joint(1.0, 200), template, tied=False, optimization_level=2)
  found = saddles.saddle(risk, plateau.params)
  assert found.is_saddle and abs(found.risk - 0.2368) < 1e-3 and found.grad_norm < 1e-12
  flat, unravel = ravel_pytree(found.theta)
  dense = jax.jit(jax.jacfwd(jax.jacrev(lambda x: risk(unravel(x)))))(flat)
  lapack = np.linalg.eigvalsh(0.5 * (np.asarray(dense) + np.asarray(dense).T))
  assert abs(found.min_eigenvalue - lapack[0]) < 1e-8
  assert -0.03 < found.min_eigenvalue < -0.01
  direction = found.direction
  np.testing.assert_allclose(direction["alpha_first"], -direction["alpha_last"], atol=1e-8)
  # The flows compile at LLVM level 2, not the suite's -O0: they run far longer than they
  # compile (docs/decisions/test-suite-speed.md).
  check = saddles.flow_excitability(lang, risk, found, template, t1=200.0, num_states=8,
                                    rtol=1e-6, tied=False, optimization_level=2)
  assert check.kind == "across an invariant set (roundoff only)", check
  assert check.num_decisive == 9 and check.alignment < 1e-12 and check.span_component < 1e-12
  eps = np.array([1e-2, 1e-3, 1e-4])
  times = saddles.escape_times(lang, template, eps, level=0.23, t1=1000.0, origin=found.theta,
                               num_records=4, rtol=1e-6, optimization_level=2)
  law = saddles.fit_escape_law(eps, times, found.min_eigenvalue)
  assert abs(law.slope_ratio - 1.0) < 0.1, (times, law)
