"""Analytic values as oracles for the exact risk routes: the closed forms of docs/theory.md
section 4 (gradient at zero, E[1/n], balanced laws, output-only floors) and the limits
of large score spreads.

(The closed-form *dynamics* of lagjax/dynamics/closed_form.py are tested in test_closed_form.py.)
The Laplace route is exact up to its quadrature error (< 1e-15 relative,
docs/theory.md section 3a); the lattice route up to its reported certified bound.
Tolerances below add float64 rounding of sums over at most ~1e6 terms.
"""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj

D = 50


def geometric_pgf(p, z):
  """G(z) = p z / (1 - (1-p) z), written out here so the oracles do not use lagjax."""
  return p * z / (1 - (1 - p) * z)


@functools.cache
def occurrence_per_token(d):
  """Jitted gradient and report of the Laplace route on per-token params of occurrence(d)."""
  route = lj.risk_fn(lj.occurrence(d))
  return route, jax.jit(jax.grad(route.risk)), jax.jit(route.report)


def test_gradient_at_zero():
  """At θ = 0: ∂R/∂β_a = -1/d, ∂R/∂β_σ = 1/(d(d-1)) for σ ≠ a, ∂R/∂α = 0 (section 4)."""
  route, grad_fn, _ = occurrence_per_token(D)
  assert route.name == "laplace"
  grad = grad_fn(lj.init_params(D))
  expected_beta = np.full(D, 1 / (D * (D - 1)))
  expected_beta[0] = -1 / D
  # Quadrature < 1e-15 relative; p = 1/(d-1) is rounded to 1 ulp, which moves
  # the balance G(1 - 1/d) = 1/2 by ~1e-15: 1e-14 absolute is 5e-13 relative.
  np.testing.assert_allclose(grad["beta"], expected_beta, rtol=0, atol=1e-14)
  # f ≡ 0 while β = 0 whatever α is, so ∂R/∂α vanishes identically.
  np.testing.assert_allclose(grad["alpha"], np.zeros(D), rtol=0, atol=1e-15)


def test_one_output_step_from_zero():
  """One output step of size η1 from zero: β_a = η1/d, β_σ = -η1/(d(d-1)) (section 4)."""
  _, grad_fn, _ = occurrence_per_token(D)
  eta1 = 50.0
  params = lj.init_params(D)
  beta = params["beta"] - eta1 * grad_fn(params)["beta"]
  expected = np.full(D, -eta1 / (D * (D - 1)))
  expected[0] = eta1 / D
  # η1 times the gradient tolerance of test_gradient_at_zero.
  np.testing.assert_allclose(beta, expected, rtol=0, atol=eta1 * 1e-14)


@pytest.mark.parametrize("p", [1 / 49, 0.3, 0.8])
def test_mean_inverse_length_geometric(p):
  """E[1/n] = -p ln p / (1-p) against a direct sum of the pmf Σ P(n)/n."""
  law = lj.geometric(p)
  n_max = lj.lengths.truncation_length(law, 1e-17)
  n = np.arange(1, n_max + 1)
  direct = np.sum(np.exp(np.asarray(law.log_pmf(n))) / n)
  # Dropped terms: < P(n > N)/N < 1e-17. numpy's pairwise summation of positive
  # terms adding up to < 1 errs by < ε log2(N) ≈ 1.2e-15.
  assert abs(direct - (-p * math.log(p) / (1 - p))) < 1e-14


def test_laplace_second_moment_at_zero_scores():
  """At α = 0, β = e_a: f = c_a/n, so E[f²] = π_a(1-π_a) E[1/n] + π_a² and E[y f] = π_a.

  This ties the Laplace route to E[1/n] of the geometric law (section 4) with
  no enumeration: c_a | n ~ Binomial(n, π_a), and y = +1 whenever c_a > 0.
  """
  lang = lj.occurrence(D)
  _, _, report_fn = occurrence_per_token(D)
  p = lang.length.p
  mean_inverse_length = -p * math.log(p) / (1 - p)
  beta = jnp.zeros(D).at[0].set(1.0)
  report = report_fn({"alpha": jnp.zeros(D), "beta": beta})
  pi_a = 1 / D
  assert abs(float(report["mean_f2"]) - (pi_a * (1 - pi_a) * mean_inverse_length + pi_a**2)) < 1e-15
  assert abs(float(report["mean_yf"]) - pi_a) < 1e-15


@pytest.mark.parametrize("d", [5, 10, 50])
def test_balanced_occurrence_and_or(d):
  """Balanced geometric law: p = 1/(d-1) for occurrence, 2/(d-2) for OR; P(y=+1) = 1/2."""
  occurrence = lj.occurrence(d)
  either = lj.any_of(d, (0, 1))
  # Closed-form p is computed as (1-z)/z in the library: a few ulps.
  assert occurrence.length.p == pytest.approx(1 / (d - 1), rel=1e-14)
  assert either.length.p == pytest.approx(2 / (d - 2), rel=1e-14)
  # P(y = -1) = G(π_{Σ∖L}) with the pgf written out here.
  assert geometric_pgf(occurrence.length.p, 1 - 1 / d) == pytest.approx(0.5, abs=1e-14)
  assert geometric_pgf(either.length.p, 1 - 2 / d) == pytest.approx(0.5, abs=1e-14)
  assert occurrence.positive_rate() == pytest.approx(0.5, abs=1e-14)
  assert either.positive_rate() == pytest.approx(0.5, abs=1e-14)


def test_balanced_and_at_d50():
  """AND at d = 50: p ≈ 0.0113230, mean length ≈ 88.3, and the balance equation holds."""
  lang = lj.all_of(D, (0, 1))
  p = lang.length.p
  # docs/theory.md states 6 significant digits of p and 3 of the mean.
  assert abs(p - 0.0113230) < 5e-8
  assert abs(lang.length.mean - 88.3) < 0.05
  # 1 - 2G(1 - 1/d) + G(1 - 2/d) = 1/2; p is bisected to ~1e-16 and the
  # balance has slope ~10 in p, so it holds to ~1e-14.
  balance = 1 - 2 * geometric_pgf(p, 1 - 1 / D) + geometric_pgf(p, 1 - 2 / D)
  assert abs(balance - 0.5) < 1e-13
  assert abs(lang.positive_rate() - 0.5) < 1e-13


def tied_output_only_floor(d):
  """min over β of R(α = 0, β) for occurrence(d) on the 2 groups {a}, Σ∖{a}.

  At α = 0 the model is linear in β, so R is an exact quadratic:
  R(β) = R(0) + gᵀβ + ½ βᵀHβ, minimized at β* = -H⁻¹g with value R(0) - ½ gᵀH⁻¹g.
  """
  lang = lj.occurrence(d)
  partition = lj.partition.of_language(lang)
  assert partition.blocks[0] == (0,)
  route = lj.risk_fn(lang, route="laplace", partition=partition)
  risk = lambda beta: route.risk({"alpha": jnp.zeros(2), "beta": beta})
  zero = jnp.zeros(2)
  value, gradient, hessian = jax.jit(
      lambda b: (risk(b), jax.grad(risk)(b), jax.hessian(risk)(b)))(zero)
  beta_star = -jnp.linalg.solve(hessian, gradient)
  floor = float(value + 0.5 * gradient @ beta_star)
  # R is quadratic: evaluating at β* must give the same value (quadrature < 1e-15).
  assert abs(float(jax.jit(risk)(beta_star)) - floor) < 1e-13
  return floor


@pytest.mark.parametrize("d, expected", [(5, 0.2295), (10, 0.2977), (50, 0.3741)])
def test_output_only_floor(d, expected):
  """The least-squares floor of output-only training (section 4), stated to 4 digits."""
  # Rounding of a 4-digit figure: |error| <= 5e-5.
  assert abs(tied_output_only_floor(d) - expected) < 5e-5


def test_output_only_floor_untied_equals_tied():
  """Per-token β cannot beat the tied floor: the quadratic is convex and symmetric under
  permutations of Σ∖{a}, so its minimum is attained at a tied β (checked at d = 5)."""
  d = 5
  route = lj.risk_fn(lj.occurrence(d))
  risk = lambda beta: route.risk({"alpha": jnp.zeros(d), "beta": beta})
  zero = jnp.zeros(d)
  value, gradient, hessian = jax.jit(
      lambda b: (risk(b), jax.grad(risk)(b), jax.hessian(risk)(b)))(zero)
  floor = float(value - 0.5 * gradient @ jnp.linalg.solve(hessian, gradient))
  assert abs(floor - tied_output_only_floor(d)) < 1e-13


# ---------------------------------------------------------------------------
# Large score spreads (docs/theory.md section 3a, numerics): finite results equal to the limits.
# ---------------------------------------------------------------------------

BETA_A, BETA_B = 0.7, -0.4  # output of a, and of every other (tied) token


def spread_limit(alpha_a):
  """Risk and ∂R/∂β (grouped: a, others) in the limit α_a → ±∞, others 0, occurrence(a).

  With P0 = P(a ∉ w) = G(1 - 1/d) and Pa = P(w ⊆ {a}) = G(1/d):
    α_a → +∞: f = β_a if a ∈ w, else β_b;
    α_a → -∞: f = β_b if w has a non-a token, else (only a's) β_a.
  """
  p = lj.occurrence(D).length.p
  absent, only_a = geometric_pgf(p, 1 - 1 / D), geometric_pgf(p, 1 / D)
  if alpha_a > 0:
    risk = 0.5 * ((1 - absent) * (BETA_A - 1) ** 2 + absent * (BETA_B + 1) ** 2)
    grad = [(1 - absent) * (BETA_A - 1), absent * (BETA_B + 1)]
  else:
    mixed = 1 - absent - only_a
    risk = 0.5 * (only_a * (BETA_A - 1) ** 2 + mixed * (BETA_B - 1) ** 2
                  + absent * (BETA_B + 1) ** 2)
    grad = [only_a * (BETA_A - 1), mixed * (BETA_B - 1) + absent * (BETA_B + 1)]
  return risk, np.array(grad)


@functools.cache
def tied_occurrence_routes():
  lang = lj.occurrence(D)
  partition = lj.partition.of_language(lang)
  laplace = lj.risk_fn(lang, route="laplace", partition=partition)
  lattice = lj.risk_fn(lang, route="lattice", partition=partition)
  return (jax.jit(jax.value_and_grad(laplace.risk)),
          jax.jit(lambda theta: (jax.grad(lattice.risk)(theta), lattice.report(theta))))


@functools.cache
def per_token_value_and_grad():
  return jax.jit(jax.value_and_grad(lj.risk_fn(lj.occurrence(D)).risk))


SPREADS = [1e2, 1e3, 1e4, -1e2, -1e3, -1e4]


@pytest.mark.parametrize("alpha_a", SPREADS)
def test_large_spread_tied_routes(alpha_a):
  """α_a = ±1e2…±1e4, others 0, on grouped params: Laplace and lattice equal the limit.

  At |α_a| >= 100 the distance to the limit is O(n e^{-100}) < 1e-40, so the
  limits are exact to double precision; 1e-12 covers quadrature and rounding.
  """
  expected_risk, expected_grad = spread_limit(alpha_a)
  grouped = {"alpha": jnp.array([alpha_a, 0.0]), "beta": jnp.array([BETA_A, BETA_B])}
  laplace_value_and_grad, lattice_evaluate = tied_occurrence_routes()
  value, grad = laplace_value_and_grad(grouped)
  chex.assert_tree_all_finite(grad)
  assert abs(float(value) - expected_risk) < 1e-12
  np.testing.assert_allclose(grad["beta"], expected_grad, rtol=0, atol=1e-12)
  # Attention is saturated: ∂f/∂α is O(e^{-|α_a|}) on every string.
  np.testing.assert_allclose(grad["alpha"], np.zeros(2), rtol=0, atol=1e-12)
  lattice_grad, report = lattice_evaluate(grouped)
  chex.assert_tree_all_finite(lattice_grad)
  bound = float(report["risk_bound"])
  assert bound < 1e-11
  assert abs(float(report["risk"]) - expected_risk) < 1e-12 + bound
  # The lattice gradient drops the same tail: |∂ℓ/∂β| <= max|β| + 1 per string.
  np.testing.assert_allclose(lattice_grad["beta"], expected_grad, rtol=0,
                             atol=1e-12 + float(report["error_bound"]) * (BETA_A + 1))


@pytest.mark.parametrize("alpha_a", SPREADS)
def test_large_spread_per_token(alpha_a):
  """The same limits with one (α, β) per token, via risk_fn and lj.population_risk."""
  expected_risk, expected_grad = spread_limit(alpha_a)
  theta = {"alpha": jnp.zeros(D).at[0].set(alpha_a),
           "beta": jnp.full(D, BETA_B).at[0].set(BETA_A)}
  value, grad = per_token_value_and_grad()(theta)
  chex.assert_tree_all_finite(grad)
  assert abs(float(value) - expected_risk) < 1e-12
  # Each of the d-1 other tokens carries 1/(d-1) of its group's gradient (docs/theory.md 3b).
  expected_beta = np.full(D, expected_grad[1] / (D - 1))
  expected_beta[0] = expected_grad[0]
  np.testing.assert_allclose(grad["beta"], expected_beta, rtol=0, atol=1e-12)
  np.testing.assert_allclose(grad["alpha"], np.zeros(D), rtol=0, atol=1e-12)
  result = lj.population_risk(lj.occurrence(D), theta)
  assert result.details["grid_covered"]
  assert abs(result.value - expected_risk) < 1e-12


@pytest.mark.parametrize("alpha_cls", [1e2, 1e4, -1e2, -1e4])
def test_large_spread_cls(alpha_cls):
  """A CLS score far above every token makes f ≡ β_cls; far below, the CLS token drops out.

  α_cls → +∞: R = ½[(β_cls - 1)² P(a ∈ w) + (β_cls + 1)² P(a ∉ w)];
  α_cls → -∞: R equals the risk without CLS token.
  """
  lang = lj.occurrence(D)
  beta_cls = 0.3
  theta = {"alpha": jnp.zeros(D), "beta": jnp.full(D, BETA_B).at[0].set(BETA_A),
           "alpha_cls": jnp.asarray(alpha_cls), "beta_cls": jnp.asarray(beta_cls)}
  if alpha_cls > 0:
    absent = geometric_pgf(lang.length.p, 1 - 1 / D)
    expected = 0.5 * ((beta_cls - 1) ** 2 * (1 - absent) + (beta_cls + 1) ** 2 * absent)
  else:
    expected = lj.population_risk(lang, {"alpha": theta["alpha"], "beta": theta["beta"]}).value
  result = lj.population_risk(lang, theta)
  assert result.details["grid_covered"]
  # Distance to the limit O(n e^{-100}); quadrature < 1e-15; rounding.
  assert abs(result.value - expected) < 1e-12


@functools.cache
def hard_attention_case():
  """occurrence(10) with α_σ = 100 σ: ten score clusters, each e^{-100} from the next."""
  d = 10
  lang = lj.occurrence(d)
  beta = np.random.default_rng(0).standard_normal(d)
  return lang, {"alpha": 100.0 * np.arange(d), "beta": beta}


def hard_attention_risk(lang, beta):
  """Squared risk when f = β of the largest present token (occurrence of letter 0).

  The largest present token is σ with probability G((σ+1)/d) - G(σ/d); for
  σ >= 1 the label is +1 on the part where 0 also occurs,
  G((σ+1)/d) - 2G(σ/d) + G((σ-1)/d), and -1 on G(σ/d) - G((σ-1)/d).
  """
  d, p = lang.d, lang.length.p
  G = lambda z: geometric_pgf(p, z)
  risk = 0.5 * G(1 / d) * (beta[0] - 1) ** 2
  for s in range(1, d):
    positive = G((s + 1) / d) - 2 * G(s / d) + G((s - 1) / d)
    negative = G(s / d) - G((s - 1) / d)
    risk += 0.5 * (positive * (beta[s] - 1) ** 2 + negative * (beta[s] + 1) ** 2)
  return risk


def test_many_score_clusters_population_risk():
  """population_risk sizes its grid to cover ten separated clusters and gets the limit."""
  lang, theta = hard_attention_case()
  expected = hard_attention_risk(lang, theta["beta"])
  result = lj.population_risk(lang, theta)
  assert result.details["grid_covered"]
  # Limit exact to O(e^{-100}); quadrature < 1e-15 per cluster; rounding.
  assert abs(result.value - expected) < 1e-12


def test_many_score_clusters_route_reports_coverage():
  """The default route (MAX_CLUSTERS clusters when d > 8) flags the uncovered grid;
  one built for 10 clusters is exact."""
  lang, theta = hard_attention_case()
  expected = hard_attention_risk(lang, theta["beta"])
  small = jax.jit(lj.risk_fn(lang).report)(theta)
  assert not bool(small["grid_covered"])
  large = jax.jit(lj.risk_fn(lang, max_clusters=10).report)(theta)
  assert bool(large["grid_covered"])
  assert abs(float(large["risk"]) - expected) < 1e-12
