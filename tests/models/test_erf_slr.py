"""Marion et al.'s erf SLR model and its exact population risk (docs/theory.md §7b)."""

import functools
import math

import chex
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.integrate  # noqa: E402
import scipy.special  # noqa: E402

import lagjax as lj  # noqa: E402
from lagjax.dynamics import erf_train as erf_dynamics  # noqa: E402
from lagjax.models import erf_slr  # noqa: E402
from lagjax.risk import erf_gaussian as erf_risk  # noqa: E402

TASK_OPTIONS = {
    "fixed": {"m": 5, "length": lj.fixed(4), "gamma": 0.7, "noise_std": 0.3, "seed": 2},
    "geometric": {"m": 4, "length": lj.geometric(0.5), "gamma": 1.3, "noise_std": 0.2, "seed": 5},
}


@functools.cache
def task(name):
  return lj.tasks.get_task("slr", **TASK_OPTIONS[name])


LAM = 1.2  # λ of the objective used off the sphere and for the gradient checks


@functools.cache
def objective(name):
  return erf_risk.make_erf_objective(task(name), LAM)


def unit(x):
  return x / np.linalg.norm(x)


def points(t, seed=0):
  """(k, v, λ): generic, near (k*, v*), swapped (k ≈ v*, v ≈ k*), and off the sphere."""
  rng = np.random.default_rng(seed)
  m = t.options["m"]
  k_star, v_star = t.extras["k_star"], t.extras["v_star"]
  noise = lambda scale: scale * rng.standard_normal(m)
  return [
      (unit(noise(1.0)), unit(noise(1.0)), 0.8),
      (unit(k_star + noise(0.1)), unit(v_star + noise(0.1)), 2.0),
      (unit(v_star + noise(0.3)), unit(k_star + noise(0.3)), 0.3),
      (1.5 * unit(k_star + noise(0.5)), 0.6 * unit(v_star + noise(0.5)), LAM),
  ]


def exact_risk(name, k, v, lam):
  """erf_population_risk on the sphere; off it, the objective's value (same closed form)."""
  if abs(np.linalg.norm(k) - 1) < 1e-12 and abs(np.linalg.norm(v) - 1) < 1e-12:
    return float(erf_risk.erf_population_risk(task(name), k, v, lam))
  assert lam == LAM
  return float(objective(name)({"k": jnp.asarray(k), "v": jnp.asarray(v)}, 0, None)[0])


# --- The two special functions against independent numerics. ---------------


def test_owens_t_matches_scipy():
  h = np.array([0.0, 0.3, -1.7, 2.5, 5.0, 12.0, 1e-8, 40.0])
  omega = np.array([1.0, 0.5, 0.3, 1e-3, 1.0, 0.7, 0.99, 1e-9])
  # Quadrature error <= 1e-25 (docs/theory.md §7b); the rest is float64 rounding of
  # terms <= 1/8 in both codes.
  chex.assert_trees_all_close(np.asarray(erf_risk.owens_t(h, omega)),
                              scipy.special.owens_t(h, omega), atol=1e-16, rtol=0)


# quad warns of roundoff once it is at the 1e-16 level on these O(1) integrands.
@pytest.mark.filterwarnings("ignore::scipy.integrate.IntegrationWarning")
def test_erf_moments_match_quadrature():
  erf = scipy.special.erf
  d1 = lambda u: 2.0 / math.sqrt(math.pi) * np.exp(-u * u)
  d2 = lambda u: -2.0 * u * d1(u)
  integrands = [erf, d1, d2, lambda u: erf(u) ** 2, lambda u: 2.0 * erf(u) * d1(u),
                lambda u: 2.0 * d1(u) ** 2 + 2.0 * erf(u) * d2(u)]

  def gauss(f, a, s2):
    """E f(u), u ~ N(a, s2), by adaptive quadrature in z = (u - a)/√s2."""
    density = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    return scipy.integrate.quad(lambda z: f(a + math.sqrt(s2) * z) * density(z), -40, 40,
                                epsabs=1e-14, epsrel=1e-14, limit=500)[0]

  for a, s2 in [(0.0, 1.0), (0.7, 0.3), (-2.0, 4.0), (3.0, 0.01), (1.0, 0.0), (0.5, 100.0)]:
    # Integrands are O(1) and smooth: quad reaches ~1e-15; the closed forms are exact
    # up to rounding and the 1e-25 Owen's T error.
    chex.assert_trees_all_close(np.array(erf_risk.erf_moments(a, s2)),
                                np.array([gauss(f, a, s2) for f in integrands]), atol=1e-13, rtol=0)


# --- The risk against Monte Carlo. ------------------------------------------


@functools.partial(jax.jit, static_argnums=(0, 2))
def squared_error_sums(t, key, batch_size, ks, vs, lams):
  """Sums of e and e² for e = (T - y)², one row per (k, v, λ), on one batch."""
  batch = t.sample(key, batch_size)
  apply = lambda k, v, lam: erf_slr.apply({"k": k, "v": v}, batch.inputs, batch.mask, lam)
  errors = (jax.vmap(apply)(ks, vs, lams) - batch.targets) ** 2
  return errors.sum(1), (errors**2).sum(1)


@pytest.mark.slow  # compile-heavy: in the full suite, out of the quick loop
@pytest.mark.parametrize("name", sorted(TASK_OPTIONS))
def test_risk_matches_monte_carlo(name):
  t = task(name)
  ks, vs, lams = map(np.array, zip(*points(t)))
  batch_size, batches = 50_000, 8
  sums = [squared_error_sums(t, key, batch_size, ks, vs, lams)
          for key in jax.random.split(jax.random.key(0), batches)]
  samples = batch_size * batches
  mean = sum(s for s, _ in sums) / samples
  second = sum(q for _, q in sums) / samples
  standard_error = np.sqrt((second - mean**2) / samples)
  exact = np.array([exact_risk(name, k, v, lam) for k, v, lam in points(t)])
  # Four standard errors of the sample mean of (T - y)².
  assert np.all(np.abs(mean - exact) <= 4 * standard_error), (mean, exact, standard_error)


# --- Gradients against central differences of the closed form. --------------


@pytest.mark.parametrize("name", sorted(TASK_OPTIONS))
def test_gradient_matches_central_differences(name):
  t, rng = task(name), np.random.default_rng(1)
  k, v, _ = points(t)[1]
  params = {"k": jnp.asarray(k), "v": jnp.asarray(v)}
  value, grads = objective(name)(params, 0, None)
  step = 1e-5
  for _ in range(3):
    direction = {"k": jnp.asarray(rng.standard_normal(k.shape)),
                 "v": jnp.asarray(rng.standard_normal(v.shape))}
    plus, minus = (objective(name)(jax.tree_util.tree_map(
        lambda p, d, s=sign: p + s * step * d, params, direction), 0, None)[0] for sign in (1, -1))
    central = (plus - minus) / (2 * step)
    along = sum(jnp.vdot(grads[g], direction[g]) for g in grads)
    # Central differences: truncation step²/6 |D³R| (D³R = O(10) here) plus rounding
    # of R (~1e-14: a sum of terms up to max_len²·|E f|²) over step: both ~1e-9.
    np.testing.assert_allclose(float(along), float(central), rtol=0, atol=1e-8)
  # λ-derivative of the public function (differentiated with λ traced).
  risk_of_lam = lambda lam: erf_risk.erf_population_risk(t, k, v, lam)
  central = (risk_of_lam(LAM + step) - risk_of_lam(LAM - step)) / (2 * step)
  np.testing.assert_allclose(float(jax.grad(risk_of_lam)(LAM)), float(central), rtol=0, atol=1e-8)
  assert float(value) == pytest.approx(float(risk_of_lam(LAM)), abs=1e-14)


# --- Limits with independent exact values. ----------------------------------


def target_second_moment(t):
  return t.options["gamma"] ** 2 + t.options["noise_std"] ** 2


@pytest.mark.parametrize("name", sorted(TASK_OPTIONS))
def test_zero_model_costs_the_target_second_moment(name):
  t = task(name)
  k, v, _ = points(t)[0]
  zero = np.zeros_like(k)
  # k = 0 or v = 0 makes T = 0 exactly, so the risk is E[y²] = γ² + σ².
  for params in ({"k": zero, "v": v}, {"k": k, "v": zero}):
    value, _ = objective(name)(jax.tree_util.tree_map(jnp.asarray, params), 0, None)
    assert float(value) == pytest.approx(target_second_moment(t), abs=1e-14)
  # λ -> 0: |R - (γ² + σ²)| <= λ · 2 E|T/λ · y| + O(λ²), with E|T/λ · y| < 100 here.
  lam = 1e-12
  assert float(erf_risk.erf_population_risk(t, k, v, lam)) == pytest.approx(
      target_second_moment(t), abs=1e-9)


def assemble(t, signal, noise, *, sensitivity=False):
  """E[(T - y)²] from the token moments, by independence of the n tokens given n.

  signal = (E f(X_J), E f(X_J) y₀, E f(X_J)²), noise = (E f(G), E f(G)²) for a noise
  token G, with y₀ = ⟨X_J, v*⟩ (mean 0, variance γ²), T = f(X_J) + Σ_{ℓ≠J} f(X_ℓ).
  With sensitivity, also Σ |∂risk/∂moment| (to carry the moments' errors to the risk).
  """
  (signal_mean, signal_cross, signal_second), (noise_mean, noise_second) = signal, noise
  n = np.arange(1, t.max_len + 1)
  pmf = np.exp(np.asarray(t.length.log_pmf(n.astype(float))))
  pmf /= pmf.sum()
  others, other_pairs = pmf @ (n - 1), pmf @ ((n - 1) * (n - 2))
  risk = (signal_second - 2 * signal_cross + target_second_moment(t)
          + others * (2 * noise_mean * signal_mean + noise_second) + other_pairs * noise_mean**2)
  if not sensitivity:
    return risk
  return risk, (3 + others * (1 + 2 * abs(noise_mean) + 2 * abs(signal_mean))
                + 2 * other_pairs * abs(noise_mean))


def sign_model_risk(t, k, v):
  """E[(T_∞ - y)²] for T_∞ = Σ_ℓ sign(⟨X_ℓ,k⟩)⟨X_ℓ,v⟩, unit k, v: truncated-Gaussian moments.

  With s = ⟨X,k⟩ = c + γA, A ~ N(0,1), τ = c/γ: E sign(s) = 2Φ(τ) - 1,
  E[sign(s) A] = 2φ(τ), E[sign(s) A²] = 2(Φ(τ) - τφ(τ)) - 1, and sign² = 1.
  """
  m, gamma = t.options["m"], t.options["gamma"]
  k_star, v_star = t.extras["k_star"], t.extras["v_star"]
  centre_k, centre_v = math.sqrt(m / 2) * (k @ k_star), math.sqrt(m / 2) * (v @ k_star)
  kv, k_star_v, v_star_v = k @ v, k @ v_star, v @ v_star
  tau = centre_k / gamma
  cdf, pdf = scipy.special.ndtr(tau), math.exp(-tau * tau / 2) / math.sqrt(2 * math.pi)
  sign0, sign1, sign2 = 2 * cdf - 1, 2 * pdf, 2 * (cdf - tau * pdf) - 1
  signal = (centre_v * sign0 + gamma * kv * sign1,
            gamma * centre_v * k_star_v * sign1
            + gamma**2 * (kv * k_star_v * sign2 + (v_star_v - kv * k_star_v) * sign0),
            centre_v**2 + gamma**2)
  return assemble(t, signal, (kv * math.sqrt(2 / math.pi), 1.0))


def quadrature_token_moments(t, k, v, lam, gamma, centre):
  """(E f, E f y₀, E f²) for X = centre + γZ by quadrature in the span of k, v, v*.

  In a QR basis with k first, erf depends on the first coordinate z₁ only: adaptive
  quadrature (scipy quad_vec) there. ⟨X,v⟩ and y₀ are affine in the other two
  coordinates, so 2-point Gauss–Hermite is exact in them (degree <= 2).
  """
  basis, _ = np.linalg.qr(np.stack([k, v, t.extras["v_star"]], axis=1))
  points_2, weights_2 = np.polynomial.hermite_e.hermegauss(2)
  rest = np.stack(np.meshgrid(points_2, points_2, indexing="ij"), -1).reshape(-1, 2)
  rest_weights = np.outer(weights_2, weights_2).ravel() / (2 * np.pi)

  def integrand(z1):
    tokens = centre + gamma * (z1 * basis[:, 0] + rest @ basis[:, 1:].T)
    f = scipy.special.erf(lam * tokens @ k) * (tokens @ v)
    y = tokens @ t.extras["v_star"]
    density = math.exp(-z1 * z1 / 2) / math.sqrt(2 * math.pi)
    return density * np.array([rest_weights @ f, rest_weights @ (f * y), rest_weights @ f**2])

  return scipy.integrate.quad_vec(integrand, -40, 40, epsabs=1e-15, epsrel=1e-14, limit=2000)


@pytest.mark.parametrize("name", sorted(TASK_OPTIONS))
def test_risk_matches_quadrature(name):
  t = task(name)
  centre = math.sqrt(t.options["m"] / 2) * t.extras["k_star"]
  for k, v, lam in points(t)[:3] + [(points(t)[1][0], points(t)[1][1], 6.0)]:
    signal, signal_error = quadrature_token_moments(t, k, v, lam, t.options["gamma"], centre)
    noise, noise_error = quadrature_token_moments(t, k, v, lam, 1.0, np.zeros_like(k))
    reference, sensitivity = assemble(t, signal, noise[[0, 2]], sensitivity=True)
    # quad_vec's error estimates (<= 1e-12) carried through the assembly, plus the
    # rounding of the closed form. Measured agreement: about 2e-15.
    assert max(signal_error, noise_error) <= 1e-12
    tolerance = 1e-13 + sensitivity * max(signal_error, noise_error)
    assert float(erf_risk.erf_population_risk(t, k, v, lam)) == pytest.approx(reference,
                                                                              abs=tolerance)


@pytest.mark.parametrize("name", sorted(TASK_OPTIONS))
def test_large_lambda_approaches_the_sign_model(name):
  t = task(name)
  for k, v, _ in points(t)[:3]:
    limit = sign_model_risk(t, k, v)
    # erf(λs) differs from sign(s) only on |s| <~ 1/λ, where the token densities are
    # bounded: R(λ) - R(∞) = -C/λ + O(λ⁻²), with C ≈ 1 measured on these tasks.
    for lam in (1e6, 1e12):
      assert abs(float(erf_risk.erf_population_risk(t, k, v, lam)) - limit) <= 10 / lam


# --- The model, the projection and the parameter groups. --------------------


def test_erf_apply_hand_computed_and_masked():
  inputs = jnp.array([[[1.0, 0.0], [0.5, 2.0], [9.0, 9.0]]])
  mask = jnp.array([[True, True, False]])
  params = {"k": jnp.array([1.0, 0.0]), "v": jnp.array([0.0, 1.0])}
  # erf(2·1)·0 + erf(2·0.5)·2; the padded position is ignored.
  expected = 2 * math.erf(1.0)
  chex.assert_trees_all_close(erf_slr.apply(params, inputs, mask, 2.0), jnp.array([expected]),
                              atol=1e-15)


def test_project_to_sphere_and_tangent_gradients():
  params = {"k": jnp.array([3.0, 4.0]), "v": jnp.array([0.0, -2.0])}
  chex.assert_trees_all_close(erf_slr.project_to_sphere(params),
                              {"k": jnp.array([0.6, 0.8]), "v": jnp.array([0.0, -1.0])},
                              atol=1e-16)
  unit_params = erf_slr.project_to_sphere(params)
  grads = {"k": jnp.array([1.0, 1.0]), "v": jnp.array([2.0, 3.0])}
  tangent = erf_slr.tangent_gradients(unit_params, grads)
  # g - ⟨g,x⟩x: (1,1) - 1.4·(0.6,0.8) and (2,3) - (-3)·(0,-1).
  chex.assert_trees_all_close(tangent, {"k": jnp.array([0.16, -0.12]), "v": jnp.array([2.0, 0.0])},
                              atol=1e-15)
  assert set(erf_slr.PARAM_GROUPS) == set(params)
  assert erf_slr.PARAM_GROUPS == {"k": "attention", "v": "output"}


# --- Bad input. -------------------------------------------------------------


def test_bad_input_is_named():
  t = task("fixed")
  k, v, _ = points(t)[0]
  cases = [
      ((t, np.ones(5), v, 1.0), r"^k must be a finite unit vector"),
      ((t, k, 2 * v, 1.0), r"^v must be a finite unit vector"),
      ((t, k[:4], v, 1.0), r"^k must be a unit vector of shape \(5,\)"),
      ((t, k, np.stack([v, v]), 1.0), r"^v must be a unit vector of shape \(5,\)"),
      ((t, np.full(5, np.nan), v, 1.0), r"^k must be a finite unit vector"),
      ((t, k, v, 0.0), r"^lam must be a finite real > 0"),
      ((t, k, v, -1.0), r"^lam must be a finite real > 0"),
      ((t, k, v, math.inf), r"^lam must be a finite real > 0"),
      ((t, k, v, math.nan), r"^lam must be a finite real > 0"),
      ((lj.tasks.get_task("even_pairs"), k, v, 1.0), r"task must be the SLR task.*'even_pairs'"),
      (("slr", k, v, 1.0), r"task must be the SLR task.*'str'"),
  ]
  for args, message in cases:
    with pytest.raises(ValueError, match=message):
      erf_risk.erf_population_risk(*args)
  with pytest.raises(ValueError, match=r"^lam must be a finite real > 0"):
    erf_risk.make_erf_objective(t, -2.0)
  with pytest.raises(ValueError, match=r"task must be the SLR task"):
    erf_risk.make_erf_objective(lj.tasks.get_task("even_pairs"), 1.0)


def test_train_erf_is_projected_gd_through_the_one_loop():
  """train_erf equals a hand-written projected GD loop (Riemannian step, then projection)
  on the exact objective to 1e-12 (the same arithmetic), keeps k and v on the sphere,
  trains only the phase's group, and its recorded risk is erf_population_risk's."""
  t = task("fixed")
  m = t.options["m"]
  rng = np.random.default_rng(5)
  start = {name: jnp.asarray(x / np.linalg.norm(x)) for name, x in
           zip(("k", "v"), rng.standard_normal((2, m)))}
  plan = lj.plans.three_phase(0.2, 0.5, 0.2, 3)
  run = erf_dynamics.train_erf(t, plan, LAM, start)
  objective = erf_risk.make_erf_objective(t, LAM)
  params = start
  for phase in plan.phases:
    for _ in range(phase.steps):
      _, grads = objective(params, 0, 0)
      grads = erf_slr.tangent_gradients(params, grads)
      params = erf_slr.project_to_sphere({
          name: params[name] - phase.eta * grads[name] * phase.trains(erf_slr.PARAM_GROUPS[name])
          for name in params})
  chex.assert_trees_all_close(run.params, params, atol=1e-12)
  np.testing.assert_allclose(np.linalg.norm(np.asarray(run.alpha), axis=-1), 1.0, atol=1e-14)
  np.testing.assert_allclose(np.linalg.norm(np.asarray(run.beta), axis=-1), 1.0, atol=1e-14)
  np.testing.assert_array_equal(np.asarray(run.alpha[1]), np.asarray(start["k"]))  # output phase
  assert float(run.risk[-1]) < float(run.risk[0])
  assert float(run.risk[-1]) == pytest.approx(
      float(erf_risk.erf_population_risk(t, run.params["k"], run.params["v"], LAM)), abs=1e-14)
  assert not bool(run.diverged)
