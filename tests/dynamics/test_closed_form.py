"""lagjax/dynamics/closed_form.py: output phases and whole plans in closed form (docs/theory.md
section 5) against step-by-step gradient descent, and the three-phase entry point.

(Analytic values used as oracles for the risk routes are in test_analytic_oracles.py.)

output_phase.output_gd diagonalizes D^{-1/2} H D^{-1/2} once and raises each
eigen-coordinate's contraction to the power T; the loops below apply
β ← β - η D^{-1}(Hβ - g) T times. Both are exact arithmetic on the same
quadratic, so they differ only by float64 roundoff: the eigendecomposition
contributes ~cond(H)·1e-16 and each loop step a few 1e-16, times the size of
β. With cond(H) <= 1e3 and |β| = O(10), 1e-10 leaves two orders of margin.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lagjax as lj
from lagjax import closed_form
from lagjax.dynamics import output_phase

TOL = 1e-10
# Compiled once per problem size and type of T (int, or float for T = ∞): called eagerly,
# output_gd compiles its ~100 primitives one by one for every new size.
output_gd = jax.jit(output_phase.output_gd)
quadratic_risk = jax.jit(output_phase.quadratic_risk)


def random_problem(seed):
  """A random SPD H with cond <= ~1e2, target g, group sizes k, β0, and the metric's λ_max."""
  rng = np.random.default_rng(seed)
  size = int(rng.integers(1, 7))
  basis = np.linalg.qr(rng.normal(size=(size, size)))[0]
  hessian = basis @ np.diag(rng.uniform(0.05, 5.0, size)) @ basis.T
  target = rng.normal(size=size)
  sizes = rng.integers(1, 10, size).astype(np.float64)
  beta0 = rng.normal(size=size)
  root = np.sqrt(sizes)
  eigenvalues = np.linalg.eigvalsh(hessian / root[:, None] / root[None, :])
  return hessian, target, sizes, beta0, eigenvalues


def gd_loop(hessian, target, sizes, beta0, eta, steps):
  beta = beta0.copy()
  for _ in range(steps):
    beta = beta - eta * (hessian @ beta - target) / sizes
  return beta


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("steps", [0, 1, 7, 50])
def test_output_gd_equals_loop(seed, steps):
  """T steps in closed form = T explicit steps, for random sizes, metrics and contracting η."""
  hessian, target, sizes, beta0, eigenvalues = random_problem(seed)
  eta = 1.5 / eigenvalues.max()  # |1 - ηλ| < 1 on every eigenvalue
  expected = gd_loop(hessian, target, sizes, beta0, eta, steps)
  got = output_gd(hessian, target, sizes, beta0, eta, steps)
  np.testing.assert_allclose(got, expected, rtol=0, atol=TOL * max(1.0, np.abs(expected).max()))


@pytest.mark.parametrize("seed", range(6))
def test_output_gd_infinite_time_is_the_minimizer(seed):
  """T = ∞ with a contracting η is the solve H β = g, whatever β0 and the metric."""
  hessian, target, sizes, beta0, eigenvalues = random_problem(seed)
  eta = 1.9 / eigenvalues.max()
  got = output_gd(hessian, target, sizes, beta0, eta, jnp.inf)
  minimizer = np.linalg.solve(hessian, target)
  np.testing.assert_allclose(got, minimizer, rtol=0, atol=TOL * max(1.0, np.abs(minimizer).max()))
  # And the loop gets there too: (1 - ηλ_min)^T below 1e-15 after enough steps.
  contraction = max(abs(1 - eta * eigenvalues.min()), abs(1 - eta * eigenvalues.max()))
  steps = math.ceil(math.log(1e-15) / math.log(contraction))
  np.testing.assert_allclose(gd_loop(hessian, target, sizes, beta0, eta, steps), minimizer,
                             rtol=0, atol=TOL * max(1.0, np.abs(minimizer).max()))


@pytest.mark.parametrize("seed", range(3))
def test_output_gd_divergence_is_detectable(seed):
  """A non-contracting η (|1 - ηλ_max| = 1.5) blows up like the loop, and T = ∞ is not finite."""
  hessian, target, sizes, beta0, eigenvalues = random_problem(seed)
  eta = 2.5 / eigenvalues.max()
  steps = 30
  expected = gd_loop(hessian, target, sizes, beta0, eta, steps)
  got = np.asarray(output_gd(hessian, target, sizes, beta0, eta, steps))
  # Roundoff is amplified by the same 1.5^T as the iterate: relative tolerance.
  np.testing.assert_allclose(got, expected, rtol=0, atol=TOL * np.abs(expected).max())
  assert np.abs(expected).max() > 1e3
  huge = np.asarray(output_gd(hessian, target, sizes, beta0, eta, 200))
  assert not np.all(np.isfinite(huge)) or np.abs(huge).max() > 1e30
  forever = np.asarray(output_gd(hessian, target, sizes, beta0, eta, jnp.inf))
  assert not np.all(np.isfinite(forever))


def test_output_gd_zero_step_size_stays_put():
  """η = 0 leaves β0 unchanged for every T, including T = ∞ (every |1 - ηλ| = 1, no divergence)."""
  hessian, target, sizes, beta0, _ = random_problem(0)
  for steps in (0, 5, 10**6, jnp.inf):
    got = output_gd(hessian, target, sizes, beta0, 0.0, steps)
    np.testing.assert_allclose(got, beta0, rtol=0, atol=TOL, err_msg=f"T = {steps}")


def test_output_gd_small_rates():
  """Contracting η with every ηλ <= 1e-10: T = ∞ is still the minimizer, and T = 1e10 follows
  z_T = (1-ηλ)^T z0 + η b (1 - (1-ηλ)^T)/(ηλ), evaluated here with log1p/expm1."""
  hessian, target, sizes, beta0, eigenvalues = random_problem(1)
  eta = 1e-10 / eigenvalues.max()
  forever = output_gd(hessian, target, sizes, beta0, eta, jnp.inf)
  minimizer = np.linalg.solve(hessian, target)
  np.testing.assert_allclose(forever, minimizer, rtol=0,
                             atol=TOL * max(1.0, np.abs(minimizer).max()))
  steps = 10**10
  root = np.sqrt(sizes)
  lam, basis = np.linalg.eigh(hessian / root[:, None] / root[None, :])
  rate = eta * lam
  power = np.exp(steps * np.log1p(-rate))
  z = power * (basis.T @ (root * beta0)) + eta * (basis.T @ (target / root)) * (
      -np.expm1(steps * np.log1p(-rate)) / rate)
  expected = basis @ z / root
  got = output_gd(hessian, target, sizes, beta0, eta, steps)
  # The oracle's error is ~1e-15 relative. An implementation that forms 1 - ηλ in
  # float64 loses up to 1e-16/ηλ = 1e-6 relative in the rate and so in the power;
  # 1e-4 allows that and still rejects the shortcut S_T ≈ T, which is off by
  # 1 - (1 - e^{-x})/x with x = ηλT in (0, 1] here: 0.5% to 37%.
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=0)


# ---------------------------------------------------------------------------
# Whole plans: make_simulator / three_phase vs lj.train.
# ---------------------------------------------------------------------------

D = 8


@functools.cache
def simulator(plan_key, cls):
  plan = PLANS[plan_key]
  return jax.jit(closed_form.make_simulator(lj.occurrence(D), plan, cls=cls))


PLANS = {
    "three_phase": lj.plans.three_phase(8.0, 64.0, 1.0, 40, steps1=2, steps2=3),
    "attention_first": lj.plans.attention_first(64.0, 1.0, 25),
    # Ends with an attention phase: the record at T is the state after its last step.
    "attention_last": lj.plans.custom([lj.plans.Phase("output", 5.0, 1),
                                       lj.plans.Phase("attention", 40.0, 2)]),
}


@pytest.mark.parametrize("plan_key, cls", [("three_phase", False), ("three_phase", True),
                                           ("attention_first", False),
                                           ("attention_last", False)])
@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_simulator_equals_train(plan_key, cls):
  """Closed-form plan (output phases O(1) in T) = lj.train step by step: params and risk."""
  lang = lj.occurrence(D)
  plan = PLANS[plan_key]
  grouped, risk = simulator(plan_key, cls)(jnp.asarray(plan.etas))
  run = lj.train(lang, plan, lj.init_params(D, cls=cls), record_every=plan.total_steps)
  partition = lj.partition.of_language(lang)
  np.testing.assert_allclose(partition.expand(grouped["alpha"]), run.params["alpha"], rtol=0,
                             atol=TOL)
  np.testing.assert_allclose(partition.expand(grouped["beta"]), run.params["beta"], rtol=0,
                             atol=TOL)
  if cls:
    for name in ("alpha_cls", "beta_cls"):
      np.testing.assert_allclose(grouped[name], run.params[name], rtol=0, atol=TOL)
    assert abs(float(run.params["beta_cls"])) > 1e-3
  np.testing.assert_allclose(risk, run.risk[-1], rtol=0, atol=TOL)
  assert float(risk) < 0.5 - 0.1  # the plan did something


def test_three_phase_closed_form():
  """closed_form.three_phase_outcome at a large finite T = lj.train (params, risk, 0-1 error), and
  = steps=math.inf, with T chosen so that (1 - η3 λ)^T < 1e-13 on every eigenvalue."""
  lang = lj.occurrence(D)
  partition = lj.partition.of_language(lang)
  etas = (8.0, 64.0, 1.0)
  limit = closed_form.three_phase_outcome(lang, *etas, math.inf)
  # λ of the last output phase's metric-scaled H, at the α the attention step reached.
  alpha = jnp.asarray(partition.group(np.asarray(limit["params"]["alpha"])))
  hessian, _ = jax.jit(lj.risk.laplace.attention_moments(lang, partition))({"alpha": alpha})
  root = np.sqrt(partition.sizes)
  eigenvalues = np.linalg.eigvalsh(np.asarray(hessian) / root[:, None] / root[None, :])
  contraction = np.abs(1 - etas[2] * eigenvalues).max()
  assert contraction < 1
  steps = math.ceil(math.log(1e-13) / math.log(contraction))
  finite = closed_form.three_phase_outcome(lang, *etas, steps)
  run = lj.train(lang, lj.plans.three_phase(*etas, steps), record_every=steps + 2)
  for name in ("alpha", "beta"):
    np.testing.assert_allclose(finite["params"][name], run.params[name], rtol=0, atol=TOL)
    np.testing.assert_allclose(limit["params"][name], finite["params"][name], rtol=0, atol=TOL)
  np.testing.assert_allclose(finite["risk"], run.risk[-1], rtol=0, atol=TOL)
  np.testing.assert_allclose(limit["risk"], finite["risk"], rtol=0, atol=TOL)
  # Both 0-1 errors are exact up to a certified truncation below 1e-12.
  np.testing.assert_allclose(finite["error"], run.error[-1], rtol=0, atol=2e-12)
  assert limit["error"] == finite["error"]
  assert limit["risk"] < 1e-3 and limit["error"] == 0.0


def test_closed_form_rejects_plans_it_cannot_simulate():
  lang = lj.occurrence(D)
  with pytest.raises(ValueError, match="both"):
    closed_form.make_simulator(lang, lj.plans.joint(1.0, 3))
  with pytest.raises(ValueError, match="population"):
    closed_form.make_simulator(lang, lj.plans.output_only(
        1.0, 3, objective=lj.plans.Empirical(10)))


# ---------------------------------------------------------------------------
# The risk in a form that cannot cancel (output_phase.quadratic_risk).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(20))
def test_quadratic_risk_at_a_zero_risk_minimizer_is_nonnegative(seed):
  """At β* with y = β*ᵀW exactly (R(β*) = 0), the Gram form gives 0 <= R <= 1e-14.

  The expanded ½β*ᵀHβ* - gᵀβ* + ½ comes out negative (down to -4.4e-16) on 6 of
  these 20 problems. Bound: the computed Gram matrix of M = E[(W, -y)(W, -y)ᵀ]
  (‖M‖ <= 4 here) is within ~10ε of the exact one, and ‖(β*, 1)‖² <= 50: < 1e-12;
  observed <= 2e-15, so 1e-14 still rejects a value that is off by a few ulps of 1.
  Away from β*, both forms agree to that bound.
  """
  rng = np.random.default_rng(seed)
  samples, size = 50, 3
  features = rng.uniform(size=(samples, size))
  labels = features @ rng.normal(size=size)
  labels /= np.sqrt(np.mean(labels**2))                     # E[y²] = 1, as for y = ±1
  beta_star = np.linalg.lstsq(features, labels, rcond=None)[0]
  hessian, target = features.T @ features / samples, features.T @ labels / samples
  assert np.sum(beta_star**2) + 1 <= 50
  at_minimum = float(quadratic_risk(hessian, target, beta_star))
  assert 0.0 <= at_minimum <= 1e-14
  beta = beta_star + rng.normal(size=size)
  expanded = 0.5 * beta @ hessian @ beta - target @ beta + 0.5
  exact = 0.5 * np.mean((features @ beta - labels) ** 2)
  np.testing.assert_allclose(quadratic_risk(hessian, target, beta), exact, rtol=0,
                             atol=1e-13)
  np.testing.assert_allclose(expanded, exact, rtol=0, atol=1e-13)


def test_three_phase_reports_divergence():
  """η3 = 100 makes the last output phase expand (|1 - η3 λ| > 1): T = ∞ is marked
  diverged, with a NaN 0-1 error instead of an error about non-finite params."""
  result = closed_form.three_phase_outcome(lj.occurrence(D), 16.0, 200.0, 100.0, math.inf)
  assert result["diverged"]
  assert math.isnan(result["error"])
  outcome = closed_form.three_phase_outcome(lj.occurrence(D), 16.0, 200.0, 1.0, math.inf)
  assert not outcome["diverged"]


@pytest.mark.parametrize("steps", [10**4, math.inf])
def test_three_phase_risk_is_nonnegative_near_zero_risk(steps):
  """three_phase at d = 8, η = (16, 200, 1): the risk converges to ~1e-31 (attention
  saturated), which the Laplace route's ½(E f² - 2 E yf + 1) reports as -3.3e-16.

  The closed form's sum of squares is >= 0 and within the Laplace route's rounding
  error (a few ε on terms of size 1: 1e-14) of it.
  """
  lang = lj.occurrence(D)
  result = closed_form.three_phase_outcome(lang, 16.0, 200.0, 1.0, steps)
  assert not result["diverged"]
  assert 0.0 <= result["risk"] < 1e-14
  partition = lj.partition.of_language(lang)
  grouped = {k: jnp.asarray(partition.group(np.asarray(result["params"][k])))
             for k in ("alpha", "beta")}
  laplace = float(jax.jit(lj.risk.ROUTES["laplace"].build(lang, partition).risk)(grouped))
  assert abs(result["risk"] - laplace) < 1e-14


@pytest.mark.parametrize("phase_index", [0, 1])
def test_closed_form_refuses_optimizers_it_would_simulate_as_plain_gd(phase_index):
  """An Adam phase, output or attention, is refused with a message pointing to lj.train
  (the attention phase used to be stepped as plain GD without a word)."""
  phases = [lj.plans.Phase("output", 1.0, 1), lj.plans.Phase("attention", 10.0, 1),
            lj.plans.Phase("output", 1.0, 3)]
  phases[phase_index] = dataclasses.replace(phases[phase_index], optimizer=optax.adam)
  with pytest.raises(ValueError, match="plain SGD.*lj.train"):
    lj.closed_form.make_trajectory(lj.occurrence(5), lj.plans.custom(phases))


@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_symmetric_eigh_equals_lapack():
  """linalg.symmetric_eigh (Jacobi, no LAPACK; docs/theory.md §5, numerics) against numpy's
  eigvalsh on 50 random symmetric matrices per size G = 1..8, vmapped, with the zero matrix,
  a multiple of I, a repeated eigenvalue and the all-ones matrix among them: eigenvalues to
  1e-13 relative to the largest entry, V Λ Vᵀ = A and VᵀV = I to 1e-13 (backward stable
  rotations: errors a few ε times the entries, ≤ 1e-14 measured at G = 8). One sweep instead
  of linalg.SWEEPS fails at G ≥ 3."""
  from lagjax import linalg
  rng = np.random.default_rng(8)
  decompose = jax.jit(jax.vmap(linalg.symmetric_eigh))
  for size in range(1, 9):
    matrices = rng.normal(size=(50, size, size))
    matrices = matrices + np.swapaxes(matrices, 1, 2)
    matrices[0], matrices[1], matrices[3] = 0.0, 3.0 * np.eye(size), 1.0
    matrices[2] = np.diag(np.r_[np.ones(size - 1), 2.0])
    values, vectors = map(np.asarray, decompose(jnp.asarray(matrices)))
    scale = max(1.0, np.abs(matrices).max())
    assert np.abs(values - np.linalg.eigvalsh(matrices)).max() <= 1e-13 * scale
    rebuilt = vectors @ (values[..., None] * np.swapaxes(vectors, 1, 2))
    assert np.abs(rebuilt - matrices).max() <= 1e-13 * scale
    assert np.abs(np.swapaxes(vectors, 1, 2) @ vectors - np.eye(size)).max() <= 1e-13
