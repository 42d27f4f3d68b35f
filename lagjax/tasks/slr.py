"""Single-location regression (Marion et al. 2024; docs/theory.md section 7).

Tokens X_ℓ ∈ R^m, ℓ = 1 … n: X_ℓ ~ N(0, I_m) except one position J, uniform on
{1, …, n}, with X_J ~ N(√(m/2) k*, γ² I_m). The target is y = ⟨X_J, v*⟩ + ξ,
ξ ~ N(0, σ²). k* ⊥ v* are unit vectors fixed per task by `seed`, so
⟨X_J, v*⟩ ~ N(0, γ²) carries no trace of the mean √(m/2) k*. The loss is
squared, ℓ = ½(f - y)², and the metric is its mean (the empirical risk; the
noise alone costs σ²/2).

Marion et al.'s erf model T(X) = Σ_ℓ erf(λ⟨X_ℓ,k⟩)⟨X_ℓ,v⟩ (lagjax.models.erf_slr)
has an exact population risk on this data (docs/theory.md §7b):
`erf_population_risk`, the objective `make_erf_objective` of the one training
loop, and `train_erf`, exact projected GD with any plan. (The exact risk is a
function of this task's data law, so it lives beside the sampler; that is why
this module is longer than 300 lines.)
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import models, validation
from lagjax.data import lengths as lengths_lib
from lagjax.dynamics import plans, runner
from lagjax.models import erf_slr
from lagjax.tasks import base

DEFAULT_LENGTH = lengths_lib.Fixed(10)


def orthonormal_directions(m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
  """Unit vectors k* ⊥ v* in R^m from Gaussian draws and one Gram-Schmidt step."""
  k_draw, v_draw = np.random.default_rng(seed).standard_normal((2, m))
  k_star = k_draw / np.linalg.norm(k_draw)
  v_star = v_draw - (v_draw @ k_star) * k_star
  return k_star, v_star / np.linalg.norm(v_star)


def slr_task(*, m: int = 50, length=None, max_len=None, gamma: float = 1.0,
             noise_std: float = 0.1, seed: int = 0) -> base.Task:
  """Single-location regression in width m.

  Args:
    m: token width, >= 2 (k* ⊥ v* needs two dimensions).
    length: length law; None for Fixed(10). J is uniform on the drawn length.
    max_len: static padded length; None for the smallest N with P(n > N) <= 1e-3
      (10 for the default).
    gamma: γ > 0, the spread of X_J around √(m/2) k*.
    noise_std: σ >= 0, the target noise.
    seed: integer >= 0 that fixes k* and v*.

  Returns:
    A regression Task with feature inputs (B, max_len, m); Batch.info["location"]
    holds J (0-based).
  """
  m = base.check_int("m", m, 2)
  length = DEFAULT_LENGTH if length is None else base.check_length(length)
  max_len = base.check_max_len(max_len, length)
  gamma = base.check_positive("gamma", gamma)
  noise_std = base.check_positive("noise_std", noise_std, allow_zero=True)
  seed = base.check_int("seed", seed, 0)
  k_star, v_star = orthonormal_directions(m, seed)
  k_star.flags.writeable = False
  v_star.flags.writeable = False
  sample_lengths = base.truncated_length_sampler(length, max_len)
  signal_mean = jnp.asarray(np.sqrt(m / 2.0) * k_star)

  def sample(key, batch_size: int) -> base.Batch:
    length_key, location_key, token_key, signal_key, noise_key = jax.random.split(key, 5)
    lengths = sample_lengths(length_key, (batch_size,))
    location = jnp.minimum(
        jnp.floor(jax.random.uniform(location_key, (batch_size,)) * lengths).astype(lengths.dtype),
        lengths - 1)
    noise_tokens = jax.random.normal(token_key, (batch_size, max_len, m))
    signal = signal_mean + gamma * jax.random.normal(signal_key, (batch_size, m))
    at_location = jnp.arange(max_len)[None, :] == location[:, None]
    mask = base.length_mask(lengths, max_len)
    features = jnp.where(at_location[..., None], signal[:, None, :], noise_tokens)
    features = features * mask[..., None]
    targets = signal @ v_star + noise_std * jax.random.normal(noise_key, (batch_size,))
    return base.Batch(features, mask, targets, lengths, {"location": location})

  def risk(outputs, batch: base.Batch):
    base.check_outputs(outputs, batch.targets.shape, "one prediction f per sequence")
    return jnp.mean(0.5 * (outputs - batch.targets) ** 2)

  return base.make_task(
      name="slr", kind="regression", input_kind="features", input_dim=m, n_outputs=1,
      max_len=max_len, length=length, metric_name="risk",
      options={"m": m, "length": length, "max_len": max_len, "gamma": gamma,
               "noise_std": noise_std, "seed": seed},
      extras={"k_star": k_star, "v_star": v_star},
      sample=sample, loss=risk, metric=lambda outputs, batch: {"risk": risk(outputs, batch)})


# ---------------------------------------------------------------------------
# Marion et al.'s erf model and its exact population risk (docs/theory.md §7b).
#
# T(X) = Σ_ℓ erf(λ⟨X_ℓ, k⟩)⟨X_ℓ, v⟩ with k (attention group) and v (output
# group) unit vectors, trained by projected GD on the sphere.
# ---------------------------------------------------------------------------

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

  Returns:
    (E erf(u), E erf'(u), E erf''(u), E erf²(u), E (erf²)'(u), E (erf²)''(u)),
    closed forms except E erf² = 1 - 8 T(√2 a/√(1+2 s2), 1/√(1+4 s2)) (Owen's T).
    Written without differences of large terms, so exact to rounding for any a and s2 >= 0.
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
  """
  validation.require_float64("lj.tasks.slr.erf_population_risk")
  task = _check_slr_task(task, "erf_population_risk")
  m = task.options["m"]
  return _erf_risk_fn(task)(_check_direction("k", k, m), _check_direction("v", v, m),
                            _check_lam(lam))


def make_erf_objective(task: base.Task, lam):
  """The exact-population objective of the erf model for a plan runner.

  Args:
    task: the SLR task.
    lam: λ > 0, finite (fixed during training).

  Returns:
    objective(params, step, phase) -> (risk, grads) for params {"k": (m,), "v": (m,)}
    (groups: models.erf_slr.GROUPS); risk is erf_population_risk's E[(T - y)²] and grads
    its Euclidean gradient (exact off the sphere too, so projected GD is exact).
    step and phase are ignored: the route is deterministic.
  """
  validation.require_float64("lj.tasks.slr.make_erf_objective")
  task = _check_slr_task(task, "make_erf_objective")
  lam = base.check_positive("lam", lam)
  risk = _erf_risk_fn(task)
  value_and_grad = jax.jit(jax.value_and_grad(lambda params: risk(params["k"], params["v"], lam)))

  def objective(params, step, phase):
    del step, phase
    return value_and_grad(params)

  return objective


class ErfRun(NamedTuple):
  """Exact projected GD of the erf model: records at `steps` (each (R, ...))."""

  params: dict            # final {"k", "v"}
  steps: jax.Array
  risk: jax.Array         # E[(T - y)²], exact
  k: jax.Array            # (R, m)
  v: jax.Array            # (R, m)
  k_overlap: jax.Array    # ⟨k, k*⟩
  v_overlap: jax.Array    # ⟨v, v*⟩
  diverged: jax.Array
  diverged_step: jax.Array


def train_erf(task: base.Task, plan, lam, params0, *, record_every: int = 1,
              riemannian: bool = True, max_risk: float = 1e8) -> ErfRun:
  """Runs `plan` on the erf model with exact population gradients (docs/theory.md §7b).

  Projected GD on the sphere through the one training loop (lagjax.dynamics.runner): each step
  moves along the Riemannian gradient g - ⟨g, x⟩x (Marion et al.; riemannian=False: the
  Euclidean gradient) and projects back onto the unit sphere.

  Args:
    task: the SLR task.
    plan: a lj.plans.Plan (groups: k attention, v output).
    lam: λ > 0.
    params0: {"k": (m,), "v": (m,)} unit vectors.
    record_every: record every this many steps (and at the end).
    riemannian: step along the tangent (default) or the Euclidean gradient.
    max_risk: a risk above this marks the run diverged.
  """
  if not isinstance(plan, plans.Plan):
    raise ValueError(f"plan must be a lj.plans.Plan; got {type(plan).__name__}.")
  validation.check_int("record_every", record_every, 1)
  m = _check_slr_task(task, "train_erf").options["m"]
  params0 = {name: _check_direction(name, params0[name], m) for name in ("k", "v")}
  objective = make_erf_objective(task, lam)
  risk = _erf_risk_fn(task)  # records need the value only, not its gradient
  k_star, v_star = (jnp.asarray(task.extras[name]) for name in ("k_star", "v_star"))

  def step_objective(params, step, phase):
    value, grads = objective(params, step, phase)
    return value, erf_slr.tangent_gradients(params, grads) if riemannian else grads

  def record(params):
    return {"risk": risk(params["k"], params["v"], lam), "k": params["k"], "v": params["v"],
            "k_overlap": params["k"] @ k_star, "v_overlap": params["v"] @ v_star}

  loop = runner.make_runner(plan.slots(), functools.partial(models.group_labels,
                                                            erf_slr.GROUPS),
                            lambda key: step_objective, record,
                            num_steps=plan.total_steps, record_every=record_every,
                            max_value=max_risk, constrain=erf_slr.project_to_sphere)
  trace = jax.jit(loop)(params0, jax.random.key(0), plan.data())
  records = trace.records
  return ErfRun(trace.params, records["steps"], records["risk"], records["k"], records["v"],
                records["k_overlap"], records["v_overlap"], trace.diverged, trace.diverged_step)
