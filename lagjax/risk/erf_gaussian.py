"""Exact population risk of Marion et al.'s erf model on the SLR task (docs/theory.md §7b).

T(X) = Σ_ℓ erf(λ⟨X_ℓ, k⟩)⟨X_ℓ, v⟩ (lagjax.models.erf_slr), with k (attention group)
and v (output group) unit vectors, on the data of lagjax.tasks.slr:
`erf_population_risk`, its special-function pieces `owens_t` and `erf_moments`, and
`make_erf_objective`, its objective for the one training loop (run by
lagjax.dynamics.erf_train).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation
from lagjax.tasks import base

UNIT_NORM_TOLERANCE = 1e-8  # |‖k‖ - 1|, |‖v‖ - 1| accepted by erf_population_risk

# Owen's T by an N-point Gauss–Legendre rule on its finite integral. For 0 < ω <= 1
# the integrand is analytic and bounded by 1/(1 - y²) on the Bernstein ellipse
# whose x-image has |Im x| <= y < 1, for every h, so the error is at most
# (ω/4π)(64/15) ρ^(-2N) / ((ρ² - 1)(1 - y²)), y = (ρ - 1/ρ)/4; at N = 20 and
# ρ = 4.14 that is 8.8e-26, far below float64 rounding (docs/theory.md §7b).
OWENS_T_NODES = 20
_GL_POINTS, _GL_WEIGHTS = np.polynomial.legendre.leggauss(OWENS_T_NODES)
_TWO_OVER_SQRT_PI = 2.0 / np.sqrt(np.pi)


def owens_t(h, omega):
  """Owen's T(h, ω) = (1/2π) ∫_0^ω exp(-h²(1 + x²)/2) / (1 + x²) dx, for 0 <= ω <= 1.

  A fixed 20-point Gauss–Legendre rule: absolute error <= 1e-25 for every real h
  (docs/theory.md §7b). Jittable and differentiable in h and ω; broadcasts.

  Args:
    h: real h (any shape).
    omega: ω in [0, 1] (broadcast against h).

  Returns:
    T(h, ω), of the broadcast shape.

  Example:
    T(0, ω) = arctan(ω)/(2π), so T(0, 1) = 1/8:

    >>> round(float(lj.risk.erf_gaussian.owens_t(0.0, 1.0)), 12)
    0.125
    >>> round(float(lj.risk.erf_gaussian.owens_t(1.5, 0.0)), 12)
    0.0
  """
  h, omega = jnp.asarray(h)[..., None], jnp.asarray(omega)[..., None]
  x2 = (0.5 * omega * (1.0 + _GL_POINTS)) ** 2
  integrand = jnp.exp(-0.5 * h**2 * (1.0 + x2)) / (1.0 + x2)
  return omega[..., 0] / (4.0 * np.pi) * (integrand @ _GL_WEIGHTS)


def _tilt(a, s2):
  """E[e^{-u²} g(u)] = w E[g(ũ)] for u ~ N(a, s2): returns w and ũ's mean and variance."""
  spread = 1.0 + 2.0 * s2
  return jnp.exp(-a**2 / spread) / jnp.sqrt(spread), a / spread, s2 / spread


def erf_moments(a, s2):
  """Expectations of erf and erf² and their derivatives at u ~ N(a, s2) (docs/theory.md §7b).

  Args:
    a: the mean of u.
    s2: the variance of u, >= 0.

  Returns:
    (E erf(u), E erf'(u), E erf''(u), E erf²(u), E (erf²)'(u), E (erf²)''(u)),
    closed forms except E erf² = 1 - 8 T(√2 a/√(1+2 s2), 1/√(1+4 s2)) (Owen's T).
    Written without differences of large terms, so exact to rounding for any a and s2 >= 0.

  Example:
    At s2 = 0, u = a: erf'(0) = 2/√π, (erf²)''(0) = 2 erf'(0)² = 8/π, the rest 0 at a = 0:

    >>> erf_moments = jax.jit(lj.risk.erf_gaussian.erf_moments)
    >>> [round(float(x), 6) + 0.0 for x in erf_moments(0.0, 0.0)]  # + 0.0: -0.0 prints as 0.0
    [0.0, 1.128379, 0.0, 0.0, 0.0, 2.546479]

    At a = 0, E erf²(u) = (2/π) arcsin(2 s2/(1 + 2 s2)), the classical value:

    >>> q0 = erf_moments(0.0, 1.0)[3]
    >>> round(float(q0), 6), round(float(2 / np.pi * np.arcsin(2 / 3)), 6)
    (0.464559, 0.464559)
  """
  spread = 1.0 + 2.0 * s2
  w, tilted_mean, tilted_var = _tilt(a, s2)
  tilted_w = _tilt(tilted_mean, tilted_var)[0]
  erf_mean = jax.scipy.special.erf(a / jnp.sqrt(spread))
  tilted_erf_mean = jax.scipy.special.erf(tilted_mean / jnp.sqrt(1.0 + 2.0 * tilted_var))
  d1 = _TWO_OVER_SQRT_PI * w
  sq0 = 1.0 - 8.0 * owens_t(np.sqrt(2.0) * a / jnp.sqrt(spread), 1.0 / jnp.sqrt(1.0 + 4.0 * s2))
  sq1 = 2.0 * _TWO_OVER_SQRT_PI * w * tilted_erf_mean
  sq2 = 2.0 * _TWO_OVER_SQRT_PI * w / spread * (
      _TWO_OVER_SQRT_PI * tilted_w - 2.0 * a * tilted_erf_mean)
  return erf_mean, d1, -2.0 * a / spread * d1, sq0, sq1, sq2


def _token_moments(lam, gamma, centre, gram):
  """E f, E f y₀, E f² for one token X = μ + γZ, f = erf(λ⟨X,k⟩)⟨X,v⟩, y₀ = ⟨X,v*⟩.

  Args:
    lam: λ.
    gamma: the token's spread γ.
    centre: (⟨μ,k⟩, ⟨μ,v⟩, ⟨μ,v*⟩).
    gram: (‖k‖², ‖v‖², ⟨k,v⟩, ⟨k,v*⟩, ⟨v,v*⟩). Stein's lemma in Z makes each
      moment exact for any k, v, not only unit ones (docs/theory.md §7b).
  """
  centre_k, centre_v, centre_y = centre
  kk, vv, kv, k_star_v, v_star_v = gram
  slope = lam * gamma  # ∂u/∂⟨Z,k⟩ direction factor: u = λ⟨μ,k⟩ + λγ⟨Z,k⟩
  e0, e1, e2, q0, q1, q2 = erf_moments(lam * centre_k, slope**2 * kk)
  mean = centre_v * e0 + gamma * slope * kv * e1
  cross = (centre_v * centre_y * e0 + gamma * slope * (centre_v * k_star_v + centre_y * kv) * e1
           + gamma**2 * (v_star_v * e0 + kv * k_star_v * slope**2 * e2))
  second = ((centre_v**2 + gamma**2 * vv) * q0 + 2.0 * centre_v * gamma * slope * kv * q1
            + (gamma * kv * slope) ** 2 * q2)
  return mean, cross, second


def _length_moments(task: base.Task) -> tuple[float, float]:
  """E[n-1] and E[(n-1)(n-2)] under the task's length law conditioned on n <= max_len."""
  n = np.arange(1, task.max_len + 1, dtype=np.float64)
  pmf = base.truncated_pmf(task.length, task.max_len)
  return float(pmf @ (n - 1.0)), float(pmf @ ((n - 1.0) * (n - 2.0)))


@functools.lru_cache(maxsize=16)
def _erf_risk_fn(task: base.Task):
  """(k, v, λ) -> E[(T - y)²] on the task's data, exact for any k, v in R^m (docs/theory.md §7b).

  Built and jitted once per task (tasks hash by identity).
  """
  k_star = jnp.asarray(task.extras["k_star"])
  v_star = jnp.asarray(task.extras["v_star"])
  mu = np.sqrt(task.options["m"] / 2.0) * k_star
  gamma, noise_var = task.options["gamma"], task.options["noise_std"] ** 2
  others, other_pairs = _length_moments(task)

  def risk(k, v, lam):
    gram = (k @ k, v @ v, k @ v, k @ v_star, v @ v_star)
    target_mean = mu @ v_star  # 0: k* ⊥ v*
    signal_mean, signal_cross, signal_second = _token_moments(
        lam, gamma, (mu @ k, mu @ v, target_mean), gram)
    noise_mean, _, noise_second = _token_moments(lam, 1.0, (0.0, 0.0, 0.0), gram)
    target_second = target_mean**2 + gamma**2 * (v_star @ v_star)
    signal_error = signal_second - 2.0 * signal_cross + target_second
    return (signal_error + noise_var
            + others * (2.0 * noise_mean * (signal_mean - target_mean) + noise_second)
            + other_pairs * noise_mean**2)

  return jax.jit(risk)


def _check_slr_task(task, what: str) -> base.Task:
  if not isinstance(task, base.Task) or task.name != "slr":
    name = task.name if isinstance(task, base.Task) else type(task).__name__
    raise ValueError(f"{what}: task must be the SLR task from lj.tasks.get_task('slr', ...); "
                     f"got {name!r}.")
  return task


def _check_direction(name: str, value, m: int):
  """A vector of shape (m,); when concrete, finite and of unit norm."""
  if np.shape(value) != (m,):
    raise ValueError(f"{name} must be a unit vector of shape ({m},) (the task's width m); "
                     f"got shape {np.shape(value)}.")
  if isinstance(value, jax.core.Tracer):
    return value
  try:
    array = np.asarray(value, dtype=np.float64)
  except (TypeError, ValueError):
    raise ValueError(f"{name} must be a real unit vector of shape ({m},).") from None
  norm = float(np.linalg.norm(array)) if np.all(np.isfinite(array)) else math.nan
  if not abs(norm - 1.0) <= UNIT_NORM_TOLERANCE:
    raise ValueError(f"{name} must be a finite unit vector (|‖{name}‖ - 1| <= "
                     f"{UNIT_NORM_TOLERANCE:g}); got norm {norm!r}.")
  return jnp.asarray(array)


def _check_lam(lam):
  if isinstance(lam, jax.core.Tracer):
    if np.shape(lam) != ():
      raise ValueError(f"lam must be a scalar λ > 0; got shape {np.shape(lam)}.")
    return lam
  return base.check_positive("lam", lam)


def erf_population_risk(task: base.Task, k, v, lam) -> jax.Array:
  """Exact E[(T(X) - y)²] of T(X) = Σ_ℓ erf(λ⟨X_ℓ,k⟩)⟨X_ℓ,v⟩ on the SLR task's data.

  The mean squared error (no ½; the noise σ² included), averaged over the
  task's length law conditioned on n <= max_len, as task.sample draws it
  (docs/theory.md §7b). Jittable and differentiable in k, v and λ.

  Args:
    task: the SLR task, lj.tasks.get_task("slr", ...).
    k: attention direction, a unit vector (m,).
    v: output direction, a unit vector (m,).
    lam: λ > 0, finite.

  Returns:
    The scalar risk. Values (unit norm, λ > 0) are checked on concrete inputs;
    under jit or grad only shapes are.

  Example:
    As λ → 0, T → 0 and R → γ² + σ² = 1 + 0.01 (the task's defaults):

    >>> task = lj.tasks.get_task("slr", m=4)
    >>> k = v = jnp.array([1.0, 0.0, 0.0, 0.0])
    >>> round(float(lj.risk.erf_gaussian.erf_population_risk(task, k, v, 1e-9)), 6)
    1.01
  """
  validation.require_float64("lj.risk.erf_gaussian.erf_population_risk")
  task = _check_slr_task(task, "erf_population_risk")
  m = task.options["m"]
  return _erf_risk_fn(task)(_check_direction("k", k, m), _check_direction("v", v, m),
                            _check_lam(lam))


def make_erf_objective(task: base.Task, lam):
  """The exact-population objective of the erf model for a plan runner (docs/theory.md §7b).

  Args:
    task: the SLR task.
    lam: λ > 0, finite (fixed during training).

  Returns:
    objective(params, step, phase) -> (risk, grads) for params {"k" (m,), "v" (m,)}
    (groups: models.erf_slr.PARAM_GROUPS); risk is erf_population_risk's E[(T - y)²] and grads
    its Euclidean gradient (exact off the sphere too, so projected GD is exact).
    step and phase are ignored: the route is deterministic.

  Example:
    At k = 0 (off the sphere), T ≡ 0 and R = γ² + σ² = 1.01 (the task's defaults; §7b):

    >>> task = lj.tasks.get_task("slr", m=4)
    >>> objective = lj.risk.erf_gaussian.make_erf_objective(task, lam=1.0)
    >>> risk, grads = objective({"k": jnp.zeros(4), "v": jnp.array([1.0, 0.0, 0.0, 0.0])},
    ...                         0, 0)
    >>> round(float(risk), 6), grads["k"].shape
    (1.01, (4,))
  """
  validation.require_float64("lj.risk.erf_gaussian.make_erf_objective")
  task = _check_slr_task(task, "make_erf_objective")
  lam = base.check_positive("lam", lam)
  risk = _erf_risk_fn(task)
  value_and_grad = jax.jit(jax.value_and_grad(lambda params: risk(params["k"], params["v"], lam)))

  def objective(params, step, phase):
    del step, phase
    return value_and_grad(params)

  return objective
