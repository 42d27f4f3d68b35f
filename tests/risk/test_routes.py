"""The three risk routes against each other and against brute force (docs/theory.md section 3).

The oracle below is an independent numpy implementation of sections 1-2: it
enumerates every count vector c ∈ N^d with 1 <= Σc <= N, weights it by
P(n) · n!/Π c_σ! · Π π_σ^{c_σ}, evaluates f = Σ c e^α β / Σ c e^α (+ CLS once)
and labels it from the definition of the language (presence of letters). It
never calls lagjax.risk or lagjax.models.
"""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from quick import some_quick

import lagjax as lj

# Oracle cases: the alphabet size fixes π, the length law and the enumeration
# depth N. The dropped tail P(n > N) = (1-p)^N is 8.9e-16 (d = 3) and 1.2e-16
# (d = 4); times sup ℓ <= ½(max|β| + 1)² < 100 for the θ drawn here, the
# oracle's truncation error is < 1e-13.
ORACLE_PI = {3: (1 / 3, 1 / 3, 1 / 3), 4: (0.1, 0.2, 0.3, 0.4)}
ORACLE_P = {3: 0.5, 4: 0.6}
ORACLE_N = {3: 50, 4: 40}
LETTERS = {
    3: {"occurrence": (0,), "any_of": (0, 1), "all_of": (0, 2)},
    4: {"occurrence": (1,), "any_of": (0, 2), "all_of": (1, 3)},
}
CASES = [(d, kind, cls) for d in (3, 4) for kind in ("occurrence", "any_of", "all_of")
         for cls in (False, True)]
SEEDS = (0, 1, 2)
# The lattice is run with tail 1e-15, so its certified bound is <= 1e-15 · 100.
LATTICE_TOL = 1e-15
# Agreement tolerances. Each route is exact up to: the oracle tail (< 1e-13),
# the lattice tail (< 1e-13), the Laplace quadrature (< 1e-15 relative, docs/theory.md
# 3a) and float64 rounding. Risks are sums of n <= 1.4e5 positive terms adding
# up to R < 10 here: rounding is ~√n·ε·R ≈ 4e-13 (worst case n·ε·R ≈ 1.5e-10).
# Gradient entries are sums of the same size with |∂ℓ/∂θ| <= (max|β| + 1)·2max|β|.
# 1e-10 on risks and 1e-9 on gradients leave room for rounding only.
RISK_TOL = 1e-10
GRAD_TOL = 1e-9


def make_language(d, kind):
  """The oracle's language, with the π and geometric law of ORACLE_PI / ORACLE_P."""
  builder = {"occurrence": lj.occurrence, "any_of": lj.any_of, "all_of": lj.all_of}[kind]
  letters = LETTERS[d][kind]
  first = letters[0] if kind == "occurrence" else letters
  return builder(d, first, pi=ORACLE_PI[d], length=lj.geometric(ORACLE_P[d]))


def random_theta(d, seed, cls, scale=2.0):
  """Per-token θ with normal entries of standard deviation `scale`."""
  rng = np.random.default_rng(seed)
  theta = {"alpha": scale * rng.standard_normal(d), "beta": scale * rng.standard_normal(d)}
  if cls:
    # 0-d arrays, like lj.init_params(d, cls=True) makes.
    theta["alpha_cls"] = np.asarray(scale * rng.standard_normal())
    theta["beta_cls"] = np.asarray(scale * rng.standard_normal())
  return theta


def all_count_vectors(d, n_max):
  """Every c ∈ N^d with 1 <= Σc <= n_max, built one coordinate at a time."""
  rows = np.zeros((1, 0), dtype=np.int64)
  for _ in range(d):
    used = rows.sum(axis=1)
    rows = np.concatenate([
        np.concatenate([rows[used + v <= n_max], np.full(((used + v <= n_max).sum(), 1), v)],
                       axis=1) for v in range(n_max + 1)])
  return rows[rows.sum(axis=1) >= 1]


@functools.cache
def enumeration(d, kind):
  """Count vectors, their probabilities and ±1 labels from the definitions of section 1."""
  counts = all_count_vectors(d, ORACLE_N[d])
  n = counts.sum(axis=1)
  p = ORACLE_P[d]
  log_factorial = np.array([math.lgamma(k + 1.0) for k in range(ORACLE_N[d] + 1)])
  log_weight = (math.log(p) + (n - 1) * math.log(1 - p) + log_factorial[n]
                - log_factorial[counts].sum(axis=1) + counts @ np.log(ORACLE_PI[d]))
  present = counts[:, list(LETTERS[d][kind])] > 0
  positive = present.all(axis=1) if kind == "all_of" else present.any(axis=1)
  return counts, np.exp(log_weight), np.where(positive, 1.0, -1.0)


def oracle(d, kind, theta):
  """Brute-force risks (squared, logistic), 0-1 error and risk gradients at θ."""
  counts, weight, y = enumeration(d, kind)
  cls = "alpha_cls" in theta
  alpha, beta = np.asarray(theta["alpha"], float), np.asarray(theta["beta"], float)
  shift = max(alpha.max(), float(theta["alpha_cls"])) if cls else alpha.max()
  u = np.exp(alpha - shift)
  numerator, denominator = counts @ (u * beta), counts @ u
  if cls:
    u0 = math.exp(float(theta["alpha_cls"]) - shift)
    numerator, denominator = numerator + u0 * float(theta["beta_cls"]), denominator + u0
  f = numerator / denominator
  # ∂f/∂β_σ = c_σ u_σ / B and ∂f/∂α_σ = c_σ u_σ (β_σ - f) / B (same for the CLS token).
  mass = counts * u / denominator[:, None]
  df = {"alpha": mass * (beta - f[:, None]), "beta": mass}
  if cls:
    mass0 = u0 / denominator
    df.update(alpha_cls=mass0 * (float(theta["beta_cls"]) - f), beta_cls=mass0)
  dloss = {"squared": f - y, "logistic": -y / (1.0 + np.exp(y * f))}
  return {
      "squared": weight @ (0.5 * (f - y) ** 2),
      "logistic": weight @ np.logaddexp(0.0, -y * f),
      "error": weight @ (np.sign(f) != y),
      "positive_rate": weight @ (y > 0),
      "grad": {loss: {k: weight @ (g * v if v.ndim == 1 else g[:, None] * v) for k, v in df.items()}
               for loss, g in dloss.items()},
  }


def jit_with_arrays_as_arguments(fn, example):
  """jit(fn) for arguments shaped like `example`, with the arrays fn closes over (a route's
  count vectors, weights, labels, masses) passed to the compiled program as arguments
  instead of embedded in it as constants. Routes that differ only in those arrays' values
  (occurrence and any_of on one alphabet) then lower to the same program, which the
  session's persistent compilation cache (conftest.py) compiles once.
  """
  closed, shapes = jax.make_jaxpr(fn, return_shape=True)(example)
  run = jax.jit(lambda arrays, *args: jax.core.eval_jaxpr(closed.jaxpr, arrays, *args))
  in_shapes = jax.tree.map(np.shape, (example,))

  def call(*args):
    assert jax.tree.map(np.shape, args) == in_shapes, "arguments must be shaped like example"
    return jax.tree.unflatten(jax.tree.structure(shapes),
                              run(closed.consts, *jax.tree.leaves(args)))

  return call


@functools.cache
def lattice_routes(d, kind):
  """The lattice routes of both losses, one group per token and the tail LATTICE_TOL."""
  lang = make_language(d, kind)
  return {loss: lj.risk_fn(lang, route="lattice", loss=loss, tol=LATTICE_TOL)
          for loss in ("squared", "logistic")}


@functools.cache
def exact_routes(d, kind, cls):
  """One compiled θ -> {route: (risk, ∇risk)} for the Laplace and both lattice routes.

  The Laplace route takes per-token params (partition=None); the lattice routes
  use one group per token and the tail LATTICE_TOL. Compiling the three routes
  as one program with their arrays as arguments keeps the suite fast.
  """
  laplace = lj.risk_fn(make_language(d, kind), route="laplace", cls=cls)
  lattice = lattice_routes(d, kind)

  def evaluate(theta):
    out = {"laplace": jax.value_and_grad(laplace.risk)(theta)}
    for loss, route in lattice.items():
      out[loss] = jax.value_and_grad(route.risk)(theta)
      out[loss + "_report"] = route.report(theta)
    return out

  return jit_with_arrays_as_arguments(evaluate, random_theta(d, 0, cls))


def as_numpy(tree):
  return jax.tree.map(np.asarray, tree)


@functools.cache
def exact_values(d, kind, cls, seed):
  """exact_routes at random_theta(d, seed, cls), computed once for the tests that read it."""
  return as_numpy(exact_routes(d, kind, cls)(random_theta(d, seed, cls)))


def test_oracle_enumeration_is_a_probability():
  """Σ weights = 1 - (1-p)^N and the count of vectors is C(N+d, d) - 1 (checks the oracle)."""
  for d in (3, 4):
    counts, weight, _ = enumeration(d, "occurrence")
    assert counts.shape == (math.comb(ORACLE_N[d] + d, d) - 1, d)
    assert len({tuple(c) for c in counts}) == counts.shape[0]
    # Summation of ~1e5 positive terms: relative rounding < 1e-13.
    np.testing.assert_allclose(weight.sum(), 1 - (1 - ORACLE_P[d]) ** ORACLE_N[d], atol=1e-13)


@pytest.mark.parametrize("d, kind", [(d, kind) for d, kind, cls in CASES if not cls])
def test_positive_rate_matches_oracle(d, kind):
  """P(y = +1) from the pgf (inclusion-exclusion) equals the enumerated label balance."""
  lang = make_language(d, kind)
  expected = oracle(d, kind, random_theta(d, 0, False))["positive_rate"]
  # Oracle tail < 1e-15; pgf evaluation exact to rounding.
  assert abs(lang.positive_rate() - expected) < 1e-13


@pytest.mark.parametrize("d, kind, cls", CASES)
def test_laplace_matches_oracle(d, kind, cls):
  """Laplace route (per-token params) equals brute force in value and gradient."""
  for seed in SEEDS:
    theta = random_theta(d, seed, cls)
    expected = oracle(d, kind, theta)
    value, grad = exact_values(d, kind, cls, seed)["laplace"]
    assert abs(float(value) - expected["squared"]) < RISK_TOL
    chex.assert_trees_all_close(as_numpy(grad), expected["grad"]["squared"], atol=GRAD_TOL,
                                rtol=0)


@pytest.mark.parametrize("d, kind, cls", CASES)
def test_lattice_matches_oracle(d, kind, cls):
  """Lattice route (per-token groups) equals brute force: risks, gradients and 0-1 error."""
  for seed in SEEDS:
    theta = random_theta(d, seed, cls)
    expected = oracle(d, kind, theta)
    out = exact_values(d, kind, cls, seed)
    for loss in ("squared", "logistic"):
      value, grad = out[loss]
      details = out[loss + "_report"]
      assert float(details["risk_bound"]) < 1e-13
      assert abs(float(value) - expected[loss]) < RISK_TOL
      assert abs(float(details["risk"]) - expected[loss]) < RISK_TOL
      chex.assert_trees_all_close(as_numpy(grad), expected["grad"][loss], atol=GRAD_TOL, rtol=0)
      # The 0-1 error is a weighted sum of indicators; its only errors are the
      # two tails (< 1e-15 each) and rounding.
      assert abs(float(details["error"]) - expected["error"]) < RISK_TOL


@pytest.mark.parametrize("d, kind, cls", CASES)
def test_laplace_and_lattice_gradients_agree(d, kind, cls):
  """jax.grad of the two exact routes agree with each other (no oracle involved)."""
  theta = random_theta(d, 10, cls)
  out = exact_routes(d, kind, cls)(theta)
  laplace_value, laplace_grad = out["laplace"]
  lattice_value, lattice_grad = out["squared"]
  assert abs(float(laplace_value) - float(lattice_value)) < RISK_TOL
  chex.assert_trees_all_close(as_numpy(laplace_grad), as_numpy(lattice_grad), atol=GRAD_TOL,
                              rtol=0)


@pytest.mark.parametrize("step", [0.2, 0.125])
def test_laplace_step_is_the_quadrature_weight(step):
  """The Laplace route at a non-default lattice step h equals the default-step route and the
  lattice route, in value and gradient.

  The trapezoid error falls like exp(-2πa/h): < 1e-15 relative at h = STEP = 0.25
  (docs/theory.md §3a) and smaller at every h < 0.25, so a route whose weights are not h
  (e.g. the module constant STEP = 0.25: off by 2.0 at h = 0.2 and 8.1 at h = 0.125 on
  this θ) fails. The tolerances are those of the oracle comparisons above (RISK_TOL,
  GRAD_TOL): quadrature < 1e-15 relative, lattice tail < 1e-13, then float64 rounding.
  """
  d, kind, cls = 4, "any_of", True
  theta = random_theta(d, 3, cls)
  lang = make_language(d, kind)
  value, grad = jax.jit(jax.value_and_grad(
      lj.risk_fn(lang, route="laplace", cls=cls, step=step).risk))(theta)
  out = exact_routes(d, kind, cls)(theta)
  for reference in ("laplace", "squared"):  # default step, and the lattice route
    reference_value, reference_grad = out[reference]
    assert abs(float(value) - float(reference_value)) < RISK_TOL, reference
    chex.assert_trees_all_close(as_numpy(grad), as_numpy(reference_grad), atol=GRAD_TOL, rtol=0)


# The eager API compiles its own routes per case; half the cases (each kind, both
# alphabets, with and without CLS) keep the suite fast. The routes themselves
# are checked on all of CASES above.
POPULATION_CASES = [(3, kind, False) for kind in ("occurrence", "any_of", "all_of")] + [
    (4, kind, True) for kind in ("occurrence", "any_of", "all_of")]


@pytest.mark.parametrize("d, kind, cls", POPULATION_CASES)
def test_population_risk_matches_oracle(d, kind, cls):
  """lj.population_risk (auto, lattice, logistic) and lj.error_rate equal brute force.

  population_risk ties θ itself and uses the default lattice tail 1e-12, so its
  certified bound is < 1e-12 · 100 = 1e-10 at worst; the reported bound is added.
  """
  lang = make_language(d, kind)
  theta = random_theta(d, 20, cls)
  expected = oracle(d, kind, theta)
  auto = lj.population_risk(lang, theta)
  assert auto.risk_route == "laplace" and auto.error_route is None
  assert auto.details["grid_covered"]
  assert abs(auto.value - expected["squared"]) < RISK_TOL
  lattice = lj.population_risk(lang, theta, route="lattice")
  assert lattice.risk_route == "lattice"
  assert abs(lattice.value - expected["squared"]) < RISK_TOL + lattice.details["risk_bound"]
  logistic = lj.population_risk(lang, theta, loss="logistic")
  assert logistic.risk_route == "lattice"
  assert abs(logistic.value - expected["logistic"]) < RISK_TOL + logistic.details["risk_bound"]
  error = lj.error_rate(lang, theta)
  assert error.error_route == "lattice" and error.risk_route is None
  assert abs(error.value - expected["error"]) < RISK_TOL + error.details["error_bound"]


def test_zero_one_error_counts_sign_zero_as_error():
  """f = 0 is an error for both labels: at θ = 0 the error is 1, and with β = e_a, α = 0.

  With β = e_a, f = c_a / n is 0 exactly on strings without a (label -1) and
  positive otherwise, so the error of occurrence(a) is P(a ∉ w) = G(1 - π_a).
  """
  d, kind = 3, "occurrence"
  report = lambda theta: exact_routes(d, kind, False)(theta)["squared_report"]
  zero = {"alpha": np.zeros(d), "beta": np.zeros(d)}
  assert float(report(zero)["error"]) == pytest.approx(1.0, abs=1e-13)
  assert oracle(d, kind, zero)["error"] == pytest.approx(1.0, abs=1e-13)
  beta = np.zeros(d)
  beta[LETTERS[d][kind][0]] = 1.0
  theta = {"alpha": np.zeros(d), "beta": beta}
  p, z = ORACLE_P[d], 1 - ORACLE_PI[d][LETTERS[d][kind][0]]
  absent = p * z / (1 - (1 - p) * z)
  expected = oracle(d, kind, theta)["error"]
  # Tails < 1e-15; rounding over 2.3e4 terms < 1e-13.
  assert abs(expected - absent) < 1e-13
  assert abs(float(report(theta)["error"]) - absent) < 1e-13
  assert abs(lj.error_rate(make_language(d, kind), theta).value - absent) < 1e-12


@pytest.mark.parametrize("shift", [3.0, -3.0, 100.0, -100.0])
@pytest.mark.parametrize("cls", [False, True])
def test_risk_invariant_to_common_score_shift(shift, cls):
  """Adding c to every score (α and α_cls) leaves both exact routes unchanged (section 2)."""
  d, kind = 4, "any_of"
  theta = random_theta(d, 30, cls)
  shifted = dict(theta, alpha=theta["alpha"] + shift)
  if cls:
    shifted["alpha_cls"] = theta["alpha_cls"] + shift
  before, after = exact_routes(d, kind, cls)(theta), exact_routes(d, kind, cls)(shifted)
  # Both routes subtract the largest score first; what remains is rounding of
  # α + c - max (<= 1e-14 for |c| = 100) propagated through f: well below 1e-12.
  for route in ("laplace", "squared", "logistic"):
    assert abs(float(after[route][0]) - float(before[route][0])) < 1e-12


# ---------------------------------------------------------------------------
# d = 50 on tied parameters (section 3b).
# ---------------------------------------------------------------------------

D_LARGE = 50


@functools.cache
def tied_routes(kind):
  """Laplace (with CLS) and lattice routes on the language's coarsest partition at d = 50."""
  lang = lj.occurrence(D_LARGE) if kind == "occurrence" else lj.any_of(D_LARGE, (0, 1))
  partition = lj.partition.of_language(lang)
  laplace = lj.risk_fn(lang, route="laplace", partition=partition, cls=True)
  lattice = lj.risk_fn(lang, route="lattice", partition=partition)
  return lang, partition, jax.jit(laplace.risk), jax.jit(lattice.report)


@pytest.mark.parametrize("kind", ["occurrence", "any_of"])
def test_laplace_matches_lattice_on_tied_params_d50(kind):
  """On grouped θ at d = 50 the two routes agree within the lattice's certified bound.

  The Laplace route is exact to < 1e-15 (docs/theory.md §3a); the lattice drops a tail
  bounded by its reported risk_bound; 1e-13 covers rounding of the ~1e6-term sum.
  """
  lang, partition, laplace_risk, lattice_report = tied_routes(kind)
  assert partition.num_groups == 2
  rng = np.random.default_rng(7)
  for _ in range(2):
    grouped = {"alpha": 2 * rng.standard_normal(2), "beta": 2 * rng.standard_normal(2),
               "alpha_cls": np.asarray(2 * rng.standard_normal()),
               "beta_cls": np.asarray(2 * rng.standard_normal())}
    report = lattice_report(grouped)
    bound = float(report["risk_bound"])
    assert bound < 1e-10
    assert abs(float(laplace_risk(grouped)) - float(report["risk"])) < bound + 1e-13
    # The same θ untied to one entry per token, through the eager API: it
    # re-ties θ into the same two groups and sizes its own grid.
    per_token = dict(grouped, alpha=partition.expand(grouped["alpha"]),
                     beta=partition.expand(grouped["beta"]))
    chex.assert_shape((per_token["alpha"], per_token["beta"]), (D_LARGE,))
    assert abs(lj.population_risk(lang, per_token).value - float(laplace_risk(grouped))) < 1e-13


# ---------------------------------------------------------------------------
# Sampled route (section 3c).
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", some_quick([0, 1], [0]))
def test_sampled_risk_within_four_standard_errors(seed):
  """lj.sampled_risk on 2e4 strings is within 4 standard errors of the exact risk at d = 10.

  The sample is fixed by the key, so the test is deterministic; a correct
  route fails it with probability P(|Z| > 4) ≈ 6e-5 per draw of the key.
  """
  d = 10
  lang = lj.occurrence(d)
  theta = random_theta(d, 100 + seed, cls=seed == 1, scale=1.0)
  mean, stderr = lj.sampled_risk(jax.random.key(seed), lang, theta, n_samples=20_000)
  exact = lj.population_risk(lang, theta).value
  assert 0 < stderr < 0.1 * exact
  assert abs(mean - exact) < 4 * stderr


def test_population_risk_accepts_python_float_cls():
  """CLS scalars given as Python floats (accepted by check_params) give the same risk.

  model.check_params accepts any value of shape (), so a Python float is a valid
  alpha_cls/beta_cls; every entry point must then compute, not crash.
  """
  lang = make_language(4, "occurrence")
  theta = random_theta(4, 40, cls=True)
  floats = dict(theta, alpha_cls=float(theta["alpha_cls"]), beta_cls=float(theta["beta_cls"]))
  expected = oracle(4, "occurrence", theta)["squared"]
  assert abs(lj.population_risk(lang, floats).value - expected) < RISK_TOL
  route = lj.risk_fn(lang, route="laplace", cls=True)
  assert abs(float(route.risk(floats)) - expected) < RISK_TOL


@pytest.mark.parametrize("name, lang, grouped", [
    ("occurrence(5), 2 groups", lj.occurrence(5), True),
    ("all_of(4, (0, 1)), 3 groups", lj.all_of(4, (0, 1)), True),
    ("occurrence(3), singletons", lj.occurrence(3), False),
    ("any_of, shifted Poisson", lj.any_of(4, (0, 1), length=lj.shifted_poisson(3.0)), False),
    ("occurrence, fixed length", lj.occurrence(4, length=lj.fixed(6)), False),
])
def test_lattice_weights_and_certified_tail_sum_to_one(name, lang, grouped):
  """Σ (kept weights) + certified tail = 1 at a coarse tol = 0.2, where every length up to N
  and the mass left out are both large (P(n = N) is 1.7e-2 to 1: a route that drops
  the strings of length N but reports only P(n > N) is off by that much).

  The loss ℓ ≡ 1 makes the route's risk Σ weights. Each weight is exp of a log
  with |log w| < 40, so its relative rounding error is < 50ε; < 10³ weights add
  up to <= 1: the sum errs by < 1e-14 (observed <= 9e-16).
  """
  partition = lj.partition.of_language(lang) if grouped else lj.partition.singletons(lang.d)
  route = lj.risk.ROUTES["lattice"].build(lang, partition, loss=lambda f, y: jnp.ones_like(f),
                                          tol=0.2)
  zeros = jnp.zeros(partition.num_groups)
  report = jax.jit(route.report)({"alpha": zeros, "beta": zeros})
  assert 0 < float(report["error_bound"]) <= 0.2, name
  assert abs(float(report["risk"]) + float(report["error_bound"]) - 1.0) < 1e-14, name


def test_an_overflowing_risk_names_the_parameter():
  """Finite θ whose risk is not finite in float64 (β ~ 1e300: f² overflows): the result
  says overflow and names β; a normal θ has no such entry."""
  lang = lj.occurrence(6)
  huge = {"alpha": np.zeros(6), "beta": np.full(6, 1e300)}
  result = lj.population_risk(lang, huge)
  assert not np.isfinite(result.value)
  assert "overflows float64: beta reaches |value| 1e+300" in result.details["overflow"]
  assert "overflow" not in lj.population_risk(lang, lj.init_params(6)).details
