"""Exact step-size regimes (lagjax/analysis/regimes.py, docs/theory.md §8) against independent
routes.

The oracle for Δ and the final risk is lj.closed_form's plan simulator, which
differentiates the Laplace *risk* route (jax.grad, then two jacfwd) where
lj.regimes differentiates the attention moments (H, g); both are exact
float64 arithmetic on the same quadrature (error < 1e-15, docs/theory.md 3a),
so they differ by roundoff: a few 1e-16 relative in Δ, amplified by at most
cond(H) ~ 1e3 in β, hence the 1e-10 tolerances below.
"""

import math

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

import lagjax as lj
from experiments import regimes_overlay
from lagjax import closed_form, plans, regimes
from lagjax.risk import error as error_lib
from lagjax.risk import moments

jax.config.update("jax_enable_x64", True)

EPS = 1e-3


D = 50
STEPS = 10_000  # at d = 50 the phase-3 transient after 10^4 steps is below e^-400


@pytest.fixture(scope="module")
def simulate():
  """jit(vmap) of the closed-form three-phase plan from zero at d = 50, T = 10^4:
  etas (N, 3) -> (grouped α, final risk)."""
  run = closed_form.make_simulator(lj.occurrence(D), plans.three_phase(1.0, 1.0, 1.0, STEPS))
  chunk = 64  # one compiled batch shape for every call
  compiled = jax.jit(jax.vmap(lambda etas: (lambda out: (out[0]["alpha"], out[1]))(run(etas))))

  def simulate(etas):
    padded = np.concatenate([etas, np.ones((-len(etas) % chunk, 3))])
    outs = [compiled(padded[i:i + chunk]) for i in range(0, len(padded), chunk)]
    return tuple(np.concatenate(parts)[:len(etas)] for parts in zip(*outs))

  return simulate


@pytest.fixture(scope="module")
def regime():
  return regimes.three_phase_regime(lj.occurrence(D), EPS)


def random_pairs(seed, wall, d, size=8):
  rng = np.random.default_rng(seed)
  return (np.exp(rng.uniform(np.log(0.5), np.log(1.2 * wall), size)),
          np.exp(rng.uniform(np.log(1.0), np.log(1e4 * d), size)))


def test_delta_and_risk_match_the_closed_form_plan(simulate, regime):
  """Δ = η1η2(b + cη1) and the final risk equal the closed-form plan's at random pairs."""
  eta1, eta2 = random_pairs(0, regime.eta1_max, D)
  alpha, risk = simulate(np.stack([eta1, eta2, np.ones(8)], 1))
  delta = np.asarray(alpha[:, 0] - alpha[:, 1])
  np.testing.assert_allclose(regime.delta_of(eta1, eta2), delta, rtol=1e-10,
                             atol=1e-12 * np.abs(delta).max())
  np.testing.assert_allclose(regime.risk_of(eta1, eta2), risk, rtol=0, atol=1e-10)
  # Beyond the wall the attention step points away from the letter.
  assert np.all((delta < 0) == (eta1 > regime.eta1_max))


@pytest.mark.parametrize("d", [10, 200])
def test_delta_matches_two_explicit_gradient_steps(d):
  """At d = 10 and 200: Δ from one output and one attention step of exact per-token gradient
  descent (jax.grad of the Laplace risk route, docs/theory.md 3b)."""
  lang = lj.occurrence(d)
  partition = lj.partition.of_language(lang)
  grad = jax.grad(lj.risk.ROUTES["laplace"].build(lang, partition).risk)
  sizes = jnp.asarray(partition.sizes)
  zero = jnp.zeros(2)

  def delta(eta1, eta2):
    beta1 = -eta1 * grad({"alpha": zero, "beta": zero})["beta"] / sizes
    alpha = -eta2 * grad({"alpha": zero, "beta": beta1})["alpha"] / sizes
    return alpha[0] - alpha[1]

  regime = regimes.three_phase_regime(lang, EPS)
  eta1, eta2 = random_pairs(d, regime.eta1_max, d)
  expected = np.asarray(jax.jit(jax.vmap(delta))(eta1, eta2))
  np.testing.assert_allclose(regime.delta_of(eta1, eta2), expected, rtol=1e-10,
                             atol=1e-12 * np.abs(expected).max())


def test_final_risk_depends_only_on_delta(simulate, regime):
  """Pairs with equal Δ have equal final risk (closed-form plan), equal to R*(Δ)."""
  eta1 = np.array([5.0, 50.0, 400.0])
  target = 10.0  # Δ, above Δ_ε ≈ 6.7 at d = 50
  eta2 = target / (eta1 * (regime.b + regime.c * eta1))
  _, risks = simulate(np.stack([eta1, eta2, np.ones(3)], 1))
  np.testing.assert_allclose(risks, float(regime.risk_of_delta(target)), rtol=0, atol=1e-12)


def test_risk_is_eps_on_the_exact_boundary(regime):
  """R = ε to 1e-8 relative at 64 random boundary points (roots are to 1e-12 in Δ and R*
  has d log R*/d log Δ of order 10, so the true error is ~1e-11). 64 points: the shape of
  regime.risk_of that the other tests compile."""
  eta1 = np.exp(np.random.default_rng(0).uniform(0.0, np.log(0.97 * regime.eta1_max), 64))
  risk = regime.risk_of(eta1, regime.eta2_min(eta1))
  np.testing.assert_allclose(risk, EPS, rtol=1e-8)
  # Δ_ε is the smallest such Δ to relative 1e-10: just left of it R* is above ε.
  assert float(regime.risk_of_delta(regime.delta_eps * (1 - 1e-10))) > EPS
  assert float(regime.risk_of_delta(regime.delta_eps)) <= EPS
  assert regime.monotone and regime.coordinates == 1


def test_grid_success_contour_lies_on_the_exact_boundary(simulate, regime):
  """On a 64 × 64 log grid over the sweep's ranges (T = 10^4), each η1 column succeeds exactly
  on the cells at or above the exact η2_min(η1) (bisection on R_T): the contour is within one
  cell of the boundary. No column beyond the wall succeeds."""
  eta1 = np.geomspace(1.0, 1e4, 64)
  eta2 = np.geomspace(1.0, 1e6, 64)
  grid = np.stack(np.meshgrid(eta1, eta2, indexing="ij"), -1).reshape(-1, 2)
  _, risk = simulate(np.concatenate([grid, np.ones((grid.shape[0], 1))], 1))
  success = np.asarray(risk).reshape(64, 64) <= EPS
  exact = np.asarray(regimes.three_phase_regime(lj.occurrence(D), EPS, steps=STEPS).eta2_min(eta1))
  for i in range(64):
    np.testing.assert_array_equal(success[i], eta2 >= exact[i], err_msg=f"η1 = {eta1[i]:.4g}")
  assert not success[eta1 > regime.eta1_max].any()
  assert success.any()


@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_finite_horizon_boundary_is_the_verified_law_or_a_bisection():
  """At finite T the T = ∞ law is a lower bound of the boundary (R_T >= R*). Where R_T <= ε
  just above it (T = 1000) the boundary is the law to 1e-10 relative; where phase 3 is too
  short (T = 100) it is bisected, above the law or infinite (docs/theory.md §8.5). Either
  way η2_min succeeds and 1e-9 below it fails (bisection width 1e-12 in log η2)."""
  lang = lj.occurrence(20)
  eta1 = np.array([10.0, 100.0])
  law = np.asarray(regimes.three_phase_regime(lang, EPS).eta2_min(eta1))
  long, short = (regimes.three_phase_regime(lang, EPS, steps=steps) for steps in (1000, 100))
  verified, bisected = np.asarray(long.eta2_min(eta1)), np.asarray(short.eta2_min(eta1))
  np.testing.assert_allclose(verified, law, rtol=2e-10)
  assert np.isinf(bisected[0]) and bisected[1] > law[1] * (1 + 1e-3)
  for regime, eta2 in ((long, verified), (short, bisected)):
    finite = np.isfinite(eta2)
    eta2 = np.where(finite, eta2, 1.0)  # every η1 at once: risk_of's compiled shape (2,)
    assert np.all(np.asarray(regime.risk_of(eta1, eta2))[finite] <= EPS)
    assert np.all(np.asarray(regime.risk_of(eta1, eta2 * (1 - 1e-9)))[finite] > EPS)


def test_eta3_stability_limit():
  """Phase 3 at T = ∞ converges for η3 just below 2/λ_max and diverges just above."""
  lang = lj.occurrence(20)
  # float64 scalars, as eta2_min passes them to risk_of: one compiled program for both (a
  # Python float is weakly typed and compiles its own).
  eta1, eta2 = np.float64(20.0), np.float64(400.0)
  limit = float(regimes.three_phase_regime(lang, EPS).eta3_max(eta1, eta2))
  below = regimes.three_phase_regime(lang, EPS, eta3=limit * (1 - 1e-6)).risk_of(eta1, eta2)
  above = regimes.three_phase_regime(lang, EPS, eta3=limit * (1 + 1e-6)).risk_of(eta1, eta2)
  assert np.isfinite(below) and below < 0.5
  assert not (np.isfinite(above) and above < 1e8)


def test_steps_needed_is_the_first_step_within_eps():
  """R_T - R_∞ <= ε at T = steps_needed and > ε one step before."""
  lang = lj.occurrence(20)
  # float64 scalars, as eta2_min passes them to risk_of: one compiled program for both (a
  # Python float is weakly typed and compiles its own).
  eta1, eta2 = np.float64(20.0), np.float64(400.0)
  regime = regimes.three_phase_regime(lang, EPS)
  steps = int(regime.steps_needed(eta1, eta2))
  limit = float(regime.risk_of(eta1, eta2))
  at = float(regimes.three_phase_regime(lang, EPS, steps=steps).risk_of(eta1, eta2))
  before = float(regimes.three_phase_regime(lang, EPS, steps=steps - 1).risk_of(eta1, eta2))
  assert steps > 1 and at - limit <= EPS < before - limit


def test_new_numbers_do_not_retrace():
  """New d, ε and η3 reuse the compiled functions of the same structure."""
  # Both functions are compiled once here, so the test does not depend on an earlier one.
  regimes.three_phase_regime(lj.occurrence(30), EPS).risk_of_delta(1.0)
  sizes = [f._cache_size() for f in (regimes._analyse, regimes._risk_of_delta)]
  for d, eps, eta3 in [(31, 2e-3, 0.5), (400, 1e-4, 1.5), (12, 1e-2, 1.0)]:
    regime = regimes.three_phase_regime(lj.occurrence(d), eps, eta3=eta3)
    regime.risk_of_delta(1.0)
  assert [f._cache_size() for f in (regimes._analyse, regimes._risk_of_delta)] == sizes


@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_cls_has_two_coordinates_and_bisection_boundary():
  """With CLS, α_cls moves too: two coordinates; the bisection boundary still has R = ε."""
  regime = regimes.three_phase_regime(lj.occurrence(20), EPS, cls=True)
  assert regime.coordinates == 2 and regime.risk_of_delta is None
  eta1 = np.array([0.3, 1.0, 3.0])
  eta2 = np.asarray(regime.eta2_min(eta1))
  finite = np.isfinite(eta2)
  assert finite.any()
  np.testing.assert_allclose(regime.risk_of(eta1[finite], eta2[finite]), EPS, rtol=1e-8)


@pytest.mark.parametrize("eps", [0.0, -1.0, math.nan, math.inf, 0.5, 0.7])
def test_bad_eps(eps):
  with pytest.raises(ValueError, match="eps"):
    regimes.three_phase_regime(lj.occurrence(10), eps)


@pytest.mark.parametrize("call, match", [
    (lambda: regimes.three_phase_regime(lj.occurrence(10), EPS, loss="logistic"),
     "experiments.sweep"),
    (lambda: regimes.of_plan("joint", lj.occurrence(10), EPS), "experiments.sweep"),
    (lambda: regimes.three_phase_regime("occurrence", EPS), "experiments.sweep"),
    (lambda: regimes.three_phase_regime(lj.occurrence(10), EPS, steps=0), "steps"),
    (lambda: regimes.three_phase_regime(lj.occurrence(10), EPS, eta3=-1.0), "eta3"),
])
def test_outside_reach_names_the_route(call, match):
  with pytest.raises(ValueError, match=match):
    call()


@pytest.mark.parametrize("lang", [
    lj.data.regular_builtins.parity(),
    lj.regular([[0, 1], [0, 1]], [1], name="ends_in_one"),       # a user's automaton
    lj.data.regular_builtins.occurrence_automaton(4),             # presence, as an automaton
], ids=lambda lang: lang.describe())
@pytest.mark.parametrize("call", ["check_language", "limit_risk"])
def test_a_language_out_of_reach_gets_one_plain_line(lang, call):
  """Issue 34: a language whose label is not the presence of letters used to fail deep in the
  moments ("PresenceLabels", "the traced problem"). The occurrence family's entry points
  (limit_risk, check_language: the Δ law in d of experiments.regimes) refuse it first, in one
  line naming the language, what they cover, and what to do instead. (Issue 36:
  three_phase_regime now covers these languages by the transfer route,
  tests/analysis/test_regimes_general.py.)"""
  with pytest.raises(ValueError) as error:
    if call == "limit_risk":
      regimes.limit_risk(lang)
    else:
      regimes.check_language(lang)
  message = str(error.value)
  assert message == (
      "lj.regimes covers only languages whose label depends only on which letters occur "
      f"(occurrence, any_of, all_of); {lang.describe()} is not one, so it has no regime law "
      "yet: map it with the grid sweep instead: python -m experiments.sweep --config "
      "experiments/configs/sweep.py --config.language=<its spec>, or train it with lj.train.")
  with pytest.raises(ValueError, match=r"--config\.language=parity, or train it"):
    regimes.check_language(lj.data.regular_builtins.parity(), "parity")
  assert regimes.check_language(lj.occurrence(4)).d == 4   # in reach: returned as given


def expected_floor(lang, mean_inverse_length):
  """Output-only floor at α = 0 (uniform attention) from docs/theory.md §4: f = β_σ +
  (β_a - β_σ) x with x = c_a/n, E[x] = π, E[x y] = π, Var x = π(1-π)E[1/n], so least squares
  leaves ½(Var y - Cov(x, y)²/Var x), with E y = 1 - 2G(1 - π)."""
  pi = 1.0 / lang.d
  mean_y = 1.0 - 2.0 * float(lang.length.pgf(1.0 - pi))
  covariance = pi - pi * mean_y
  return 0.5 * (1.0 - mean_y**2 - covariance**2 / (pi * (1 - pi) * mean_inverse_length))


@pytest.mark.parametrize("length, mean_inverse", [
    (lj.geometric(1 / 49), -(1 / 49) * math.log(1 / 49) / (48 / 49)),
])
def test_output_only_floor_matches_the_closed_form(length, mean_inverse):
  lang = lj.occurrence(50, length=length)
  floor = regimes.three_phase_regime(lang, EPS).risk_floor
  assert floor == pytest.approx(expected_floor(lang, mean_inverse), abs=1e-12)


def test_fixed_length_uniform_attention_separates_the_classes():
  """At α = 0 and fixed n, β = (1, -1/(2n)) puts every c_a >= 1 above zero and c_a = 0
  below: zero 0-1 error (exact threshold route). A geometric law of the same mean cannot:
  long strings with one letter fall below the threshold."""
  errors = []
  for length in (lj.fixed(20), lj.geometric(1 / 20)):
    lang = lj.occurrence(10, length=length)
    partition = lj.partition.of_language(lang)
    report, _ = error_lib.best_route(lang, partition)
    params = {"alpha": jnp.zeros(2), "beta": jnp.asarray([1.0, -1.0 / 40])}
    errors.append(float(jax.jit(lambda p, report=report: report(p)["error"])(params)))
  assert errors[0] == 0.0 and errors[1] > 1e-4


def test_sweep_report_names_the_wall():
  """The sweep's regime report says where the attention step reverses sign, not "none"."""
  config = ml_collections.ConfigDict(dict(language="occurrence", letters=(0,), loss="squared",
                           success_risk=1e-3, diagram_axes=("eta1", "eta2")))
  eta2 = np.geomspace(1.0, 1e6, 8)
  wall = regimes_overlay.no_success_reason(config, 50, 10_000, 2000.0, eta2, [1.0])
  assert wall.startswith("attention step reverses sign beyond η1 = 958.98")
  beyond = regimes_overlay.no_success_reason(config, 50, 10_000, 1.0, eta2[:3], [1.0])
  assert beyond.startswith("needs η2 >=")
  assert regimes_overlay.exact_regime(config, "joint", 50, 10, 0, [1.0]) is None


def test_kqv_attention_step_matches_train_kqv():
  """α after the KQV plan's first two steps equals α0 + η2 α1 + η2² α2 from the bilinear
  closed form (both exact float64 gradient steps on the same Laplace route)."""
  lang, scale, eta1, eta2 = lj.occurrence(4), 0.3, 4.0, 50.0
  key = jax.random.key(3)
  run = lj.train_kqv(lang, plans.three_phase(eta1, eta2, 0.0, 1), key, scale=scale)
  params, fixed = lj.models.kqv.init_kqv(jax.random.split(key)[0], lang.d, scale=scale)
  # One compiled program: eager, the two gradients compile some 450 primitives one by one.
  alpha0, alpha1, alpha2 = jax.jit(regimes.kqv_attention_step(lang, fixed))(params, eta1)
  np.testing.assert_allclose(run.alpha[2], alpha0 + eta2 * alpha1 + eta2**2 * alpha2,
                             rtol=1e-10, atol=1e-12)
  assert np.abs(eta2**2 * alpha2).max() > 1e-6  # the quadratic term is really tested


@pytest.mark.parametrize("eta1", [[-10.0], [0.0, 1.0], [np.inf], [np.nan]])
def test_eta2_min_refuses_step_sizes_that_are_not_positive(regime, eta1):
  """A negative, zero or non-finite η1 is refused in one line naming the values (it used to
  return inf silently); a traced η1 passes unchecked (see the jit call)."""
  with pytest.raises(ValueError, match=r"^eta2_min takes step sizes eta1 that are finite and "
                                       r"> 0; got \["):
    regime.eta2_min(np.asarray(eta1))
  assert np.isfinite(np.asarray(jax.jit(regime.eta2_min)(np.array([1.0])))).all()


# --- blind spots of the issue-17 mutation campaign (docs/results/mutation/campaign.md)


def test_steps_needed_when_the_limit_risk_is_far_above_zero():
  """steps_needed is the first T with R_T - R_∞ <= ε, measured from the limit R_∞ even when
  R_∞ is far above ε (η2 = 40: R_∞ ≈ 0.17 at ε = 0.01, asserted), so it is finite there
  (54 steps) and R_T - R_∞ crosses ε between T - 1 and T. The risks are the closed-form
  quadratic risks the route itself compares, so the comparison with ε is exact.
  Kills: R_T + R_∞ > ε in _steps_needed (never true below ε there, so T = ∞)."""
  lang, eps = lj.occurrence(20), 0.01
  # float64 scalars, as eta2_min passes them to risk_of: one compiled risk_of for both.
  eta1, eta2 = np.float64(20.0), np.float64(40.0)
  regime = regimes.three_phase_regime(lang, eps)
  limit = float(regime.risk_of(eta1, eta2))
  steps = float(regime.steps_needed(eta1, eta2))
  assert limit > 10 * eps and np.isfinite(steps) and steps > 1
  at = float(regimes.three_phase_regime(lang, eps, steps=int(steps)).risk_of(eta1, eta2))
  before = float(regimes.three_phase_regime(lang, eps, steps=int(steps) - 1).risk_of(eta1, eta2))
  assert at - limit <= eps < before - limit


def test_eta2_min_is_the_low_end_when_the_whole_scan_succeeds():
  """η2_min(η1) by bisection is the smallest η2 of eta2_range with R_T <= ε: at T = 100,
  η1 = 10, ε = 0.01 (d = 20) the T = ∞ law fails at finite T (the boundary is bisected),
  and every η2 of [300, 3e4] succeeds (the boundary lies near 214), so η2_min is the low end
  300 itself: exp(log 300), equal to 300 to a few ulp (rtol 1e-14).
  Kills: exp(xs[1]) for the first scan point (300 · 100^(1/95) ≈ 314.8)."""
  low, high = 300.0, 3e4
  regime = regimes.three_phase_regime(lj.occurrence(20), 0.01, steps=100, eta2_range=(low, high))
  law = np.float64(regimes.three_phase_regime(lj.occurrence(20), 0.01).eta2_min(10.0))
  # float64 scalars, as eta2_min passes them to risk_of: one compiled risk_of for both.
  assert float(regime.risk_of(np.float64(10.0), law * (1 + regimes.LAW_CHECK))) > 0.01  # bisected
  # η2_min = 300 also shows that the whole scan succeeds: a failing first point would put
  # the bisected root above 300, a failing later one would make η2_min NaN.
  np.testing.assert_allclose(float(regime.eta2_min(10.0)), low, rtol=1e-14)


def test_eta3_limit_is_two_over_the_top_scaled_eigenvalue_at_delta_eps():
  """Regime.eta3_limit = 2/λ_max(D^{-1/2} H D^{-1/2}) at the boundary Δ = Δ_ε (docstring),
  recomputed here from lj.risk.moments.moments_fn on the language's two token groups at
  α = (Δ_ε on the letters, 0 elsewhere) (only score differences matter) and numpy's eigvalsh.
  Both are exact quadratures (error < 1e-15) on different grids; an eigenvalue of a
  well-conditioned 2 × 2 matrix: rtol 1e-10.
  Kills: H taken at Δ_ε / direction (α = ±2Δ_ε instead of ±Δ_ε/2)."""
  lang = lj.occurrence(20)
  regime = regimes.three_phase_regime(lang, 0.01)
  partition = lj.partition.of_language(lang)
  letters = np.isin(np.arange(lang.d), lang.margin_letters())
  alpha = partition.group(np.where(letters, regime.delta_eps, 0.0))
  hessian, _ = jax.jit(moments.moments_fn(lang, partition))({"alpha": jnp.asarray(alpha)})
  root = np.sqrt(partition.sizes)
  top = np.linalg.eigvalsh(np.asarray(hessian) / root[:, None] / root[None, :])[-1]
  np.testing.assert_allclose(regime.eta3_limit, 2.0 / top, rtol=1e-10)


def test_limit_risk_is_the_least_squares_minimum():
  """regimes.limit_risk(lang)(α) = min_β R(α, β) = ½ - ½ gᵀH⁻¹g for per-token α of any
  leading shape (here (2, 2, d): the result is (2, 2)), against (H, g) from
  lj.risk.moments.moments_fn and a numpy solve at d = 4. Both exact quadratures (< 1e-15)
  on different grids, H well conditioned at these α: atol 1e-10.
  Kills: alpha.reshape(-2, d) (jnp refuses a -2 dimension)."""
  lang = lj.occurrence(4)
  alpha = np.array([[[0.0, 0.0, 0.0, 0.0], [1.0, -0.5, 0.2, 0.3]],
                    [[-1.0, 0.5, 0.0, 2.0], [0.3, 0.3, -0.7, 0.1]]])
  got = np.asarray(regimes.limit_risk(lang)(alpha))
  assert got.shape == (2, 2)
  moments_of = jax.jit(moments.moments_fn(lang))
  for index in np.ndindex(2, 2):
    hessian, target = (np.asarray(x) for x in moments_of({"alpha": jnp.asarray(alpha[index])}))
    expected = 0.5 - 0.5 * target @ np.linalg.solve(hessian, target)
    assert abs(got[index] - expected) < 1e-10
