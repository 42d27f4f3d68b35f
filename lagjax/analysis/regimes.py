"""Exact step-size regimes of the three-phase plan from θ0 = 0 (docs/theory.md §8).

From θ0 = 0 the output step gives β1 = η1 v with v = D^{-1} g(0) (D = diag of the
group sizes), and the attention gradient at α = 0 is exactly a quadratic form in
β with no constant term, ∂R/∂α_j = ½ βᵀ ∂_jH β - ∂_j gᵀ β (docs/theory.md §5), so

    α = η2 (η1 a1 + η1² a2),   a1 = D^{-1} (∂g)ᵀ v,   a2 = -½ D^{-1} vᵀ(∂H)v.

f is unchanged by a common shift of all scores, so only α modulo constants
matters. When a1 and a2 are parallel modulo constants (every tied language of
the occurrence family without CLS: the letters' group against the rest), α is
one coordinate Δ = α_letter - α_other along a fixed direction, with

    Δ = η1 η2 (b + c η1),

and phase 3 at T = ∞ reaches R*(Δ) = min_β R(Δ, β): the final risk depends on
(η1, η2) only through Δ. The success region {R* ≤ ε} is Δ ≥ Δ_ε when R* is
decreasing, i.e. η2 ≥ Δ_ε / (η1 (b + c η1)), and ends at the wall
η1 = b / abs(c) (c < 0) where the attention step reverses sign. Otherwise (CLS,
non-uniform π) α has two invariant coordinates (η1η2, η1²η2), and the boundary
η2_min(η1) comes from a vectorised bisection along log η2; so does every
boundary at finite T, where the phase-3 start β1 = η1 v also matters.

The same holds for every language whose exact route gives the moments (H, g)
(`risk.moments.moments_route`: the Laplace route for the occurrence family, the transfer
route for every regular language, any registered route that provides "moments"): a1 and
a2 are the autodiff of its moments at α = 0, and where the Δ law does not hold (α has two
coordinates, or the success set along Δ is not {Δ >= Δ_ε}) η2_min(η1) is the bisection of
the exact T = ∞ outcome along η2, checked to be a single crossing; where it is not,
Regime.eta2_intervals gives the success intervals (docs/theory.md §8.8).

For the occurrence family everything runs in one compiled function per static structure
(length-law type, #groups, #supports, CLS): the language enters through traced arrays
(group masses, sizes, the length law's parameters), so new d, ε or η3 do not
retrace, and the tied cost does not grow with d. Other languages compile once per
language (their route's moments close over the automaton).

(Longer than the library's ~300 lines: the one-coordinate law, the bisected
boundary, the phase-3 conditions and the KQV attention step share one compiled
analysis, its validation and its return type.)
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import linalg, validation
from lagjax import risk as risk_lib
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.dynamics import output_phase
from lagjax.models import direct, kqv
from lagjax.risk import moments as moments_lib
from lagjax.risk import registry

RTOL = 1e-12            # root-finder stopping width (relative); the claim is 1e-10
LAW_CHECK = 1e-10       # finite T: the law's η2 is verified at η2_law·(1 + LAW_CHECK)
MAX_ITER = 200
DELTA_MAX = 1e6         # Δ_ε is searched in [-DELTA_MAX, DELTA_MAX]
ETA2_RANGE = (1e-3, 1e15)
ETA2_SCAN = 96          # log-η2 points per η1 checked for a single crossing before bisection
FLAT_C = 1e-12          # |c| <= FLAT_C·|b|: c is roundoff (O(1) moments), so no wall b/|c|
ATTENTION_STILL = 1e-12  # |a1|, |a2| below this (roundoff ~1e-17): the steps never move α
BISECTION_CHUNK = 64    # η1 values per compiled bisection call
ROUTE_CHUNK = 8         # the same on a route's moments (a transfer evaluation costs ~1e3 times
                        # a traced Laplace one, so padding a few η1 to 64 would dominate)
MONOTONE_POINTS = 257   # Δ points that bracket Δ_ε and check the success set is {Δ >= Δ_ε}
SWEEP_ROUTE = ("map it with the grid sweep instead: python -m experiments.sweep --config "
               "experiments/configs/sweep.py")


@dataclasses.dataclass(frozen=True)
class _Static:
  """The static structure of a problem: one compiled function per value."""

  grid: moments_lib.Grid | None  # the traced Laplace moments' grid (None: moments_at)
  letter: int          # index of the letters' token group in the stacked scores (-1: the
  other: int           # top of centred a1), and of a token group of non-letters (-1: its bottom)
  # α (G[+1],) -> (H, g) from a route's attention_moments (hashed by identity: one compiled
  # function per language); None for the traced Laplace problem.
  moments_at: Callable | None = None


# The traced description of a tied language (risk.moments.Problem): every number that
# changes with d.
_Problem = moments_lib.Problem


class Regime(NamedTuple):
  """The exact regime of the three-phase plan from θ0 = 0 (docs/theory.md §8).

  Scalars are floats; functions take arrays (broadcast) and are compiled once.

  When coordinates = 2, b, c, delta_eps, eta1_max, min_product, risk_floor, floor_beta and
  eta3_limit are NaN, monotone is False and risk_of_delta is None.

  Attributes:
    coordinates: number of invariant coordinates of α (1: the Δ law holds; 0: the first two
      steps never move attention, and every plan ends at the output-only floor).
    b, c: Δ = η1 η2 (b + c η1) (NaN when coordinates = 2).
    coefficients: (a1, a2), α = η2 (η1 a1 + η1² a2) per group (CLS last).
    delta_eps: smallest Δ with R*(Δ) ≤ ε (root to relative 1e-10; NaN if coordinates = 2;
      inf if no Δ ≤ 1e6 reaches ε).
    eta1_max: the wall b / abs(c) beyond which the attention step reverses sign (inf if c ≥ 0,
      or if abs(c) <= FLAT_C·abs(b): a c of roundoff, where a2 vanishes modulo constants,
      has no wall).
    eta1_stable: 2/λ_max of D^{-1/2} H(0) D^{-1/2}, the output phase's stability limit at
      α = 0 (output GD on β from θ0 = 0 diverges for step sizes beyond it; §8.8).
    min_product: inf of η1 η2 on the T = ∞ boundary, Δ_ε / b (approached as η1 → 0; NaN
      if b ≤ 0).
    risk_floor: R*(0), the output-only floor (docs/theory.md §4).
    floor_beta: per-group β reaching it (where output-only training converges; NaN if
      coordinates = 2).
    eta3_limit: 2/λ_max of D^{-1/2} H D^{-1/2} at Δ = Δ_ε (phase 3 diverges for η3 beyond).
    monotone: whether R* > ε left of Δ_ε and R* ≤ ε right of it on 257 points of
      [-1e6, 1e6] (then success iff Δ ≥ Δ_ε).
    note: what holds and what does not, in words.
    route: the exact route whose moments (H, g) the regime uses ("laplace", "transfer", ...).
    eps, eta3, steps: the inputs.
    delta_of: (η1, η2) -> Δ.
    risk_of_delta: Δ -> R*(Δ) (None when coordinates = 2).
    risk_of: (η1, η2) -> exact final squared risk after T = steps phase-3 steps at η3.
    eta2_min: η1 -> smallest η2 with final risk ≤ ε (inf: none; NaN: bisection invalid);
      at finite T the T = ∞ law verified on the exact R_T, bisection where it fails.
    eta2_intervals: η1 (...) -> list over the flattened η1 of arrays (k, 2): the η2
      intervals of the scanned eta2_range where the final risk is ≤ ε, each end refined
      to 1e-12 in log η2 (an interval open at an end of the scan ends there).
    eta3_max: (η1, η2) -> the η3 stability limit at the learned α.
    steps_needed: (η1, η2) -> phase-3 steps at η3 to come within ε of the T = ∞ risk.

  Example:
    >>> regime = lj.regimes.three_phase_regime(lj.occurrence(4), 1e-3)
    >>> regime.coordinates, regime.monotone, regime.b > 0 > regime.c
    (1, True, True)
    >>> round(regime.eta1_max, 6) == round(regime.b / abs(regime.c), 6)   # the wall (§8.2)
    True
    >>> round(regime.risk_floor, 6)   # §4: ½ - ½ π_a / ((1 - π_a) E[1/n]) at d = 4, p = 1/3
    0.196587
    >>> eta1, eta2 = 4.0, 16.0
    >>> delta = eta1 * eta2 * (regime.b + regime.c * eta1)
    >>> round(float(regime.delta_of(eta1, eta2)) / delta, 6)
    1.0
  """

  coordinates: int
  b: float
  c: float
  coefficients: tuple
  delta_eps: float
  eta1_max: float
  eta1_stable: float
  min_product: float
  risk_floor: float
  floor_beta: np.ndarray
  eta3_limit: float
  monotone: bool
  note: str
  route: str
  eps: float
  eta3: float
  steps: float
  delta_of: Callable
  risk_of_delta: Callable | None
  risk_of: Callable
  eta2_min: Callable
  eta2_intervals: Callable
  eta3_max: Callable
  steps_needed: Callable


# ---------------------------------------------------------------------------
# Pure pieces (traced): moments, first steps, phase 3.
# ---------------------------------------------------------------------------


def _moments(static: _Static, problem: _Problem, alpha):
  if static.moments_at is not None:
    return static.moments_at(alpha)
  return moments_lib.moments(static.grid, problem, alpha)


def _batched(static: _Static, fn: Callable, *args):
  """fn over the leading axis of args: vmapped on the traced Laplace problem, a sequential
  lax.map on a route's moments. The transfer route's nodes already run along a trailing axis,
  and vmapping it again costs 4-9 times more per point on CPU than one point at a time (257
  points of R*: 1.08 s vmapped, 0.12 s mapped, equal to the bit); the results are the same."""
  if static.moments_at is None:
    return jax.vmap(fn)(*args)
  return jax.lax.map(lambda xs: fn(*xs), args)


def _elementwise(static: _Static, fn: Callable, *args):
  """jnp.vectorize of a scalar fn of scalars, with _batched's choice of vmap or lax.map."""
  if static.moments_at is None:
    return jnp.vectorize(fn)(*args)
  args = [jnp.asarray(a, jnp.float64) for a in args]
  shape = jnp.broadcast_shapes(*(a.shape for a in args))
  flat = [jnp.broadcast_to(a, shape).ravel() for a in args]
  return _batched(static, fn, *flat).reshape(shape)


def _first_steps(static: _Static, problem: _Problem):
  """(v, a1, a2, H(0)): β1 = η1 v and α = η2 (η1 a1 + η1² a2) from θ0 = 0, with
  ∂R/∂α = Bβ + ½ C[β, β] at α = 0 (output_phase.zero_score_constants)."""
  hessian, target, linear, quadratic = output_phase.zero_score_constants(
      lambda a: _moments(static, problem, a), problem.metric.shape[0])
  v = target / problem.metric
  a1 = -(linear @ v) / problem.metric
  a2 = -0.5 * jnp.einsum("jik,i,k->j", quadratic, v, v) / problem.metric
  return v, a1, a2, hessian


def _scaled_top_eigenvalue(hessian, metric):
  root = jnp.sqrt(metric)
  return linalg.symmetric_eigh(hessian / root[:, None] / root[None, :])[0][-1]


def _final_risk(static: _Static, problem: _Problem, alpha, beta1, eta3, steps):
  """Exact squared risk after `steps` output steps of size η3 from β1 at fixed α."""
  hessian, target = _moments(static, problem, alpha)
  beta = output_phase.output_gd(hessian, target, problem.metric, beta1, eta3, steps)
  return output_phase.quadratic_risk(hessian, target, beta)


def _limit_beta(static: _Static, problem: _Problem, alpha):
  """(argmin_β R(α, β) on the range of H, min value): phase 3 at T = ∞, contracting step."""
  hessian, target = _moments(static, problem, alpha)
  eta = 1.0 / _scaled_top_eigenvalue(hessian, problem.metric)
  beta = output_phase.output_gd(hessian, target, problem.metric, jnp.zeros_like(target), eta,
                               jnp.inf)
  return beta, output_phase.quadratic_risk(hessian, target, beta)


def _limit_risk(static: _Static, problem: _Problem, alpha):
  """R*(α) = min_β R(α, β)."""
  return _limit_beta(static, problem, alpha)[1]


def _root(fn, lo, hi, f_lo, f_hi, *, atol=0.0, rtol=RTOL):
  """Safeguarded root of a decreasing fn on [lo, hi] with f_lo > 0 >= f_hi.

  Illinois regula falsi (the retained end's value is halved), with a bisection
  step whenever the previous step shrank the bracket by less than half or the
  secant point leaves the bracket; so the width at least halves every two steps.
  Returns the right end, where fn <= 0.
  """
  def cond(state):
    lo, hi, _, _, _, it = state
    return (hi - lo > atol + rtol * jnp.abs(hi)) & (it < MAX_ITER)

  def body(state):
    lo, hi, f_lo, f_hi, previous, it = state
    width = hi - lo
    secant = hi - f_hi * width / (f_hi - f_lo)
    bisect = (width > 0.5 * previous) | ~(secant > lo) | ~(secant < hi)
    x = jnp.where(bisect, 0.5 * (lo + hi), secant)
    f_x = fn(x)
    right = f_x <= 0
    return (jnp.where(right, lo, x), jnp.where(right, x, hi),
            jnp.where(right, 0.5 * f_lo, f_x), jnp.where(right, f_x, 0.5 * f_hi), width, it + 1)

  as_float = functools.partial(jnp.asarray, dtype=jnp.float64)
  state = (as_float(lo), as_float(hi), as_float(f_lo), as_float(f_hi), as_float(jnp.inf),
           jnp.asarray(0))
  return jax.lax.while_loop(cond, body, state)[1]


# ---------------------------------------------------------------------------
# Compiled entry points (static structure only; every number traced).
# ---------------------------------------------------------------------------


@functools.partial(jax.jit, static_argnums=0)
def _analyse(static: _Static, problem: _Problem, eps):
  """(v, a1, a2) and, along α = Δ·direction (a1 modulo constants, scaled so that Δ is
  α_letter - α_other): Δ_ε, R*(0), its β, the η3 limit at Δ_ε and the monotonicity check.
  One compiled call; the caller uses the Δ part only when a1 ∥ a2 modulo constants.
  Without margin letters (static.letter < 0) Δ runs from the bottom of centred a1 to its top."""
  v, a1, a2, hessian_zero = _first_steps(static, problem)
  centred = a1 - a1.mean()
  letter = jnp.argmax(centred) if static.letter < 0 else static.letter
  other = jnp.argmin(centred) if static.other < 0 else static.other
  span = centred[letter] - centred[other]
  direction = centred / jnp.where(span == 0, 1.0, span)
  def excess(delta):
    # log R* - log ε; a risk at or below zero (roundoff near R* = 0) counts as success.
    risk = _limit_risk(static, problem, delta * direction)
    return jnp.log(jnp.maximum(risk, 1e-300)) - jnp.log(eps)

  floor_beta, floor = _limit_beta(static, problem, jnp.zeros_like(direction))
  # One batched pass over a sinh-spaced Δ grid in [-DELTA_MAX, DELTA_MAX] brackets the root
  # and checks that the success set is {Δ >= Δ_ε}; then the safeguarded root refines it.
  grid = jnp.sinh(jnp.linspace(-1.0, 1.0, MONOTONE_POINTS) * jnp.arcsinh(DELTA_MAX))
  risks = _batched(static, lambda x: _limit_risk(static, problem, x * direction), grid)
  success = risks <= eps
  first = jnp.argmax(success)
  below = jnp.maximum(first - 1, 0)
  log_excess = jnp.log(jnp.maximum(risks, 1e-300)) - jnp.log(eps)
  root = _root(excess, grid[below], grid[first], log_excess[below], log_excess[first])
  delta_eps = jnp.where(floor <= eps, 0.0, jnp.where(success.any(), root, jnp.inf))
  slack = 1e-9 * eps  # risk noise allowed in the check (quadrature and roundoff < 1e-13)
  monotone = jnp.all(jnp.where(grid < delta_eps, risks > eps - slack, risks <= eps + slack))
  hessian, _ = _moments(static, problem, jnp.where(jnp.isfinite(delta_eps), delta_eps, 0.0)
                        * direction)
  return {"v": v, "a1": a1, "a2": a2, "direction": direction, "delta_eps": delta_eps,
          "risk_floor": floor, "floor_beta": floor_beta, "monotone": monotone,
          "eta3_limit": 2.0 / _scaled_top_eigenvalue(hessian, problem.metric),
          "eta1_stable": 2.0 / _scaled_top_eigenvalue(hessian_zero, problem.metric),
          "letter": letter, "other": other}


def _alpha_beta(v, a1, a2, eta1, eta2):
  return eta2 * (eta1 * a1 + eta1**2 * a2), eta1 * v


@functools.partial(jax.jit, static_argnums=0)
def _risk_of(static, problem, v, a1, a2, eta1, eta2, eta3, steps):
  def one(eta1, eta2):
    alpha, beta1 = _alpha_beta(v, a1, a2, eta1, eta2)
    return _final_risk(static, problem, alpha, beta1, eta3, steps)
  return _elementwise(static, one, eta1, eta2)


@functools.partial(jax.jit, static_argnums=0)
def _risk_of_delta(static, problem, direction, delta):
  return _elementwise(static, lambda x: _limit_risk(static, problem, x * direction), delta)


@functools.partial(jax.jit, static_argnums=0)
def _eta3_max(static, problem, v, a1, a2, eta1, eta2):
  def one(eta1, eta2):
    hessian, _ = _moments(static, problem, _alpha_beta(v, a1, a2, eta1, eta2)[0])
    return 2.0 / _scaled_top_eigenvalue(hessian, problem.metric)
  return _elementwise(static, one, eta1, eta2)


@functools.partial(jax.jit, static_argnums=0)
def _steps_needed(static, problem, v, a1, a2, eta1, eta2, eta3, eps):
  """Smallest integer T with R_T - R_∞ <= ε: doubling, then integer bisection (R_T - R_∞ is
  a sum of λ (1 - η3 λ)^{2T} z² terms, non-increasing in T when phase 3 is stable)."""
  def one(eta1, eta2):
    alpha, beta1 = _alpha_beta(v, a1, a2, eta1, eta2)
    hessian, target = _moments(static, problem, alpha)
    stable = eta3 * _scaled_top_eigenvalue(hessian, problem.metric) < 2.0
    limit = output_phase.quadratic_risk(hessian, target, output_phase.output_gd(
        hessian, target, problem.metric, beta1, eta3, jnp.inf))

    def above(t):
      beta = output_phase.output_gd(hessian, target, problem.metric, beta1, eta3, t)
      return output_phase.quadratic_risk(hessian, target, beta) - limit > eps

    hi = jax.lax.while_loop(lambda t: above(t) & (t < 2.0**62), lambda t: 2.0 * t,
                            jnp.asarray(1.0))
    lo = jnp.where(hi > 1.0, 0.5 * hi, 0.0)
    lo = jnp.where(above(0.0), lo, -1.0)
    _, hi = jax.lax.while_loop(
        lambda s: s[1] - s[0] > 1.0,
        lambda s: jax.lax.cond(above(jnp.floor(0.5 * (s[0] + s[1]))),
                               lambda: (jnp.floor(0.5 * (s[0] + s[1])), s[1]),
                               lambda: (s[0], jnp.floor(0.5 * (s[0] + s[1])))), (lo, hi))
    return jnp.where(stable & ~above(hi), jnp.maximum(hi, 0.0), jnp.inf)
  return _elementwise(static, one, eta1, eta2)


def _positive_eta1(eta2_min: Callable) -> Callable:
  """eta2_min that refuses, in one line, concrete η1 that are not finite and > 0 (traced η1,
  as under jit, pass unchecked)."""
  def checked(eta1):
    if not isinstance(eta1, jax.core.Tracer):
      values = np.asarray(eta1, np.float64)
      bad = values[~(np.isfinite(values) & (values > 0))]
      if bad.size:
        raise ValueError(f"eta2_min takes step sizes eta1 that are finite and > 0; got "
                         f"{bad[:3].tolist()}.")
    return eta2_min(eta1)

  return checked


@functools.partial(jax.jit, static_argnums=0)
def _eta2_min_bisection(static, problem, v, a1, a2, eta1, eta3, steps, eps, log_range):
  """Per η1: scan log η2 on ETA2_SCAN points, require one crossing of ε, bisect in log η2.

  Returns (η2_min, valid): inf when no scanned η2 succeeds, NaN (valid False) when the
  success set along η2 is not one interval [η2_min, ...) on the scan.
  """
  xs = jnp.linspace(log_range[0], log_range[1], ETA2_SCAN)

  def excess(eta1, x):
    alpha, beta1 = _alpha_beta(v, a1, a2, eta1, jnp.exp(x))
    risk = _final_risk(static, problem, alpha, beta1, eta3, steps)
    return jnp.where(jnp.isfinite(risk), jnp.log(jnp.maximum(risk, 1e-300)) - jnp.log(eps),
                     jnp.inf)

  def one(eta1):
    values = _batched(static, lambda x: excess(eta1, x), xs)
    success = values <= 0
    first = jnp.argmax(success)
    valid = jnp.all(jnp.where(jnp.arange(ETA2_SCAN) >= first, success, True)) | ~success.any()
    lo_index = jnp.maximum(first - 1, 0)
    root = _root(lambda x: excess(eta1, x), xs[lo_index], xs[first], values[lo_index],
                 values[first], atol=RTOL, rtol=0.0)
    value = jnp.where(first == 0, jnp.exp(xs[0]), jnp.exp(root))
    value = jnp.where(success.any(), value, jnp.inf)
    return jnp.where(valid, value, jnp.nan), valid
  return _batched(static, one, jnp.ravel(eta1))


def _excess_of(static, problem, v, a1, a2, eta3, steps, eps):
  """(η1, log η2) -> log R_T - log ε of the plan's exact outcome (inf where it diverges)."""
  def excess(eta1, x):
    alpha, beta1 = _alpha_beta(v, a1, a2, eta1, jnp.exp(x))
    risk = _final_risk(static, problem, alpha, beta1, eta3, steps)
    return jnp.where(jnp.isfinite(risk), jnp.log(jnp.maximum(risk, 1e-300)) - jnp.log(eps),
                     jnp.inf)
  return excess


@functools.partial(jax.jit, static_argnums=0)
def _eta2_scan(static, problem, v, a1, a2, eta1, eta3, steps, eps, log_range):
  """log R_T - log ε on the ETA2_SCAN log-η2 points of log_range, per η1: (N, ETA2_SCAN)."""
  xs = jnp.linspace(log_range[0], log_range[1], ETA2_SCAN)
  excess = _excess_of(static, problem, v, a1, a2, eta3, steps, eps)
  return _batched(static, lambda e: _batched(static, lambda x: excess(e, x), xs),
                  jnp.ravel(eta1))


@functools.partial(jax.jit, static_argnums=0)
def _eta2_refine(static, problem, v, a1, a2, eta1, lo, hi, f_lo, f_hi, eta3, steps, eps):
  """The crossing of ε in each bracket [lo, hi] of log η2 (one per η1, vectors), refined to
  RTOL; f_lo, f_hi are the excess at the ends (opposite signs). Returns η2."""
  excess = _excess_of(static, problem, v, a1, a2, eta3, steps, eps)

  def one(eta1, lo, hi, f_lo, f_hi):
    # A failing-to-succeeding bracket is a root of excess, a succeeding-to-failing one of
    # -excess (the root-finder wants a decreasing function).
    sign = jnp.where(f_lo > 0, 1.0, -1.0)
    return jnp.exp(_root(lambda x: sign * excess(eta1, x), lo, hi, sign * f_lo, sign * f_hi,
                         atol=RTOL, rtol=0.0))
  return _batched(static, one, eta1, lo, hi, f_lo, f_hi)


def _intervals(success: np.ndarray, roots: np.ndarray, low: float, high: float) -> np.ndarray:
  """The success intervals (k, 2) along η2 of one η1 from the scan's mask and its refined
  crossings in order; an interval open at an end of the scan is reported with that end."""
  edges = ([low] if success[0] else []) + [float(r) for r in roots]
  if success[-1]:
    edges.append(high)
  return np.asarray(edges, np.float64).reshape(-1, 2)


# ---------------------------------------------------------------------------
# The public builder.
# ---------------------------------------------------------------------------


def _problem(lang: languages.Language, cls: bool, tied: bool = True):
  """Token groups of `partition.of_language` (or singletons) in NumPy (O(d), no per-token
  objects), as the risk layer's traced moment problem."""
  index = partition_lib.token_group_ids(lang) if tied else np.arange(lang.d)
  grid, problem = moments_lib.problem(lang, index, cls)
  letters = lang.margin_letters()
  letter = int(index[letters[0]])
  other = int(index[next(s for s in range(lang.d) if s not in letters)])
  return _Static(grid, letter, other), problem


@functools.lru_cache(maxsize=32)
def _route_static(lang: languages.Language, route: str, cls: bool, tied: bool) -> _Static:
  """The static part of the route path: `route`'s attention_moments on lang's token groups as
  α (G[+1],) -> (H, g). Cached per hashable language, so one compiled function serves every
  call on the same language."""
  partition = partition_lib.of_language(lang) if tied else partition_lib.singletons(lang.d)
  groups = partition.num_groups
  moments_of = registry.ROUTES[route].attention_moments(lang, partition, cls=cls)

  def moments_at(alpha):
    params = {"alpha": alpha[:groups], "beta": jnp.zeros(groups, alpha.dtype)}
    if cls:
      params.update(alpha_cls=alpha[groups], beta_cls=jnp.zeros((), alpha.dtype))
    return moments_of(params)

  letters = lang.margin_letters()
  index = partition_lib.token_group_ids(lang) if tied else np.arange(lang.d)
  others = [s for s in range(lang.d) if s not in letters]
  if letters and others:
    return _Static(None, int(index[letters[0]]), int(index[others[0]]), moments_at)
  return _Static(None, -1, -1, moments_at)


def _route_problem(lang: languages.Language, route: str, cls: bool, tied: bool = True):
  """(static, problem) of the route path: the problem carries only the metric (token-group
  sizes, 1 for CLS), the moments come from the route."""
  try:
    static = _route_static(lang, route, cls, tied)
  except TypeError:  # an unhashable user language: built afresh (one compile per call)
    static = _route_static.__wrapped__(lang, route, cls, tied)
  sizes = (partition_lib.of_language(lang).sizes if tied else np.ones(lang.d))
  metric = np.concatenate([np.asarray(sizes, np.float64), [1.0] if cls else []])
  return static, _Problem(None, None, None, jnp.asarray(metric))


def exact_route(lang, route: str = "auto", *, cls: bool = False) -> str:
  """The exact route whose moments (H, g) the regimes use for `lang`, or one ValueError line
  naming the field (docs/theory.md §8.8).

  "auto" takes the registry's first exact route that provides the moments for the layout
  (risk.registry.first_supporting with quantity "moments": the Laplace route for the
  occurrence family, the transfer route for regular languages).

  Args:
    lang: an lj.Language.
    route: "auto" or a registered exact route that provides "moments".
    cls: whether the model has a CLS token.

  Returns:
    The route's name.

  Raises:
    ValueError: for an object that is not an lj.Language, a route that is not an exact
      moments route, or a language no exact route gives the moments of (each route's
      reason in the line).

  Example:
    >>> lj.regimes.exact_route(lj.occurrence(4)), lj.regimes.exact_route(
    ...     lj.data.regular_builtins.tomita(4))
    ('laplace', 'transfer')
    >>> lj.regimes.exact_route(lj.occurrence(4), "transfer")
    Traceback (most recent call last):
    ...
    ValueError: lang: route 'transfer' gives no exact moments for occurrence(d=4, ...
  """
  if not isinstance(lang, languages.Language):
    raise ValueError(f"lang must be an lj.Language with an exact moments route (the regimes' "
                     f"reach); got {type(lang).__name__}: {SWEEP_ROUTE}, or lj.train.")
  exact = registry.names("moments", exact=True)
  validation.check_choice("route", route, ("auto", *exact))
  layout = direct.Layout(cls=bool(cls))
  if route == "auto":
    chosen, reasons = registry.first_supporting(lang, quantity="moments", layout=layout)
    if chosen is None:
      raise ValueError(f"lang: {lang.describe()} has no exact route for the moments (H, g) "
                       f"that the regimes need: " + "; ".join(reasons.values())
                       + f". {SWEEP_ROUTE}, or train it with lj.train.")
    return chosen
  reason = registry.ROUTES[route].supports(lang, quantity="moments", layout=layout)
  if reason is not None:
    raise ValueError(f"lang: route {route!r} gives no exact moments for {lang.describe()}: "
                     f"{reason}.")
  return route


def check_language(lang, spec: str | None = None) -> languages.Language:
  """`lang` if the occurrence family's regime laws cover it, else one plain ValueError line
  (docs/theory.md §8).

  The laws in d (limit_risk, the scaling tables of experiments.regimes) come from the traced
  attention moments of a language whose label depends only on which letters occur (the
  occurrence family: occurrence, any_of, all_of; the languages with PresenceLabels). A
  language decided by an automaton (parity, even pairs, a JSON file) has no such law; the
  line names it and says what to do instead: map its step sizes with the grid sweep, or
  train it with lj.train. (three_phase_regime itself covers every language with an exact
  moments route, exact_route: §8.8.)

  Args:
    lang: the language to check.
    spec: the language's spec string (lj.languages.from_spec), shown in the sweep command
      the error suggests; None shows a placeholder.

  Returns:
    lang, unchanged.

  Raises:
    ValueError: for a language outside the regimes' reach, or an object that is not an
      lj.Language.

  Example:
    >>> lj.regimes.check_language(lj.occurrence(4)).describe()
    'occurrence(d=4, letters=(0,))'
    >>> import textwrap
    >>> try:
    ...   lj.regimes.check_language(lj.data.regular_builtins.parity())
    ... except ValueError as error:
    ...   print(textwrap.fill(str(error), 90))
    lj.regimes covers only languages whose label depends only on which letters occur
    (occurrence, any_of, all_of); parity(d=2, states=2) is not one, so it has no regime law
    yet: map it with the grid sweep instead: python -m experiments.sweep --config
    experiments/configs/sweep.py --config.language=<its spec>, or train it with lj.train.
  """
  if not isinstance(lang, languages.Language):
    raise ValueError(f"lj.regimes needs an occurrence-family lj.Language (the closed form's "
                     f"reach); got {type(lang).__name__}: {SWEEP_ROUTE}, or lj.train.")
  if not isinstance(lang, languages.PresenceLabels):
    raise ValueError(f"lj.regimes covers only languages whose label depends only on which "
                     f"letters occur (occurrence, any_of, all_of); {lang.describe()} is not one, "
                     f"so it has no regime law yet: {SWEEP_ROUTE} --config.language="
                     f"{spec or '<its spec>'}, "
                     f"or train it with lj.train.")
  return lang


def _check_inputs(lang, eps, eta3, steps, loss, cls, route):
  cls = validation.check_bool("cls", cls)
  route = exact_route(lang, route, cls=cls)
  if loss != "squared":
    raise ValueError(f"lj.regimes needs loss='squared' (output phases are least squares in "
                     f"closed form only then); got loss={loss!r}: {SWEEP_ROUTE}.")
  # R(θ0 = 0) = ½ on every language (f ≡ 0): ε must lie in (0, R(θ0)).
  eps = validation.check_risk_threshold("eps (ε)", eps)
  eta3 = validation.check_positive("eta3 (η3)", eta3)
  if not (isinstance(steps, float) and math.isinf(steps) and steps > 0):
    steps = validation.check_int("steps (T, or math.inf)", steps, 1, integral_floats=True)
  return eps, eta3, float(steps), cls, route


def three_phase_regime(lang: languages.Language, eps: float, *, eta3: float = 1.0,
                steps: int | float = math.inf, loss: str = "squared",
                cls: bool = False, eta2_range: tuple[float, float] = ETA2_RANGE,
                route: str = "auto") -> Regime:
  """The exact regime of three_phase(η1, η2, η3, T) from θ0 = 0 (docs/theory.md §8).

  Any language with an exact route for the moments (H, g) is in reach: the occurrence
  family (Laplace route), every regular language (transfer route, e.g. a user's lj.regular
  automaton), any registered route that provides "moments" (§8.8).

  Args:
    lang: a language with an exact moments route (any π and length law the route takes).
    eps: success threshold ε on the final squared risk, 0 < ε < R(θ0 = 0) = ½.
    eta3: phase-3 step size.
    steps: phase-3 length T (math.inf: the minimizer at the learned α).
    loss: must be "squared" (the closed form's reach).
    cls: whether the model has a CLS token (then α has two invariant coordinates).
    eta2_range: the η2 interval scanned by the bisection route.
    route: "auto" or an exact route of lj.risk.names("moments"). "auto" takes the first
      that applies (exact_route) and, for the occurrence family, its traced form (one
      compiled function for every d); a named route builds that route's attention_moments
      for this language (one compiled function per language).

  Returns:
    A Regime. Its functions reuse compiled code across languages of the same
    structure, so new d, ε, η3 or T do not retrace.

  Raises:
    ValueError: in one line naming the field: lang (no exact moments route), route, eps
      (outside (0, ½)), eta3, steps, loss, cls, eta2_range.

  Example:
    >>> regime = lj.regimes.three_phase_regime(lj.occurrence(4), 1e-3)
    >>> eta2 = np.asarray(regime.eta2_min(np.array([4.0, 30.0])))  # 30 > η1_max ≈ 20.4
    >>> round(float(eta2[0]), 6), float(eta2[1])
    (32.658974, inf)
    >>> # On the boundary Δ = Δ_ε, and phase 3 at T = ∞ ends at risk ε exactly.
    >>> round(float(regime.delta_of(4.0, eta2[0])) / regime.delta_eps, 6)
    1.0
    >>> round(float(regime.risk_of(4.0, eta2[0])), 6)
    0.001
    >>> regime.route, round(regime.eta1_stable, 6)   # 2/λ_max(D^{-1/2} H(0) D^{-1/2})
    ('laplace', 8.0)

    A regular language (e.g. lj.data.regular_builtins.tomita(4)) takes the transfer route
    (exact_route); its regime compiles once per language, about a minute on two cores.
  """
  validation.require_float64("lj.regimes.three_phase_regime")
  eps, eta3, steps, cls, chosen = _check_inputs(lang, eps, eta3, steps, loss, cls, route)
  low, high = (validation.check_positive(f"eta2_range[{i}]", x) for i, x in enumerate(eta2_range))
  if not low < high:
    raise ValueError(f"eta2_range must be increasing (low, high); got {eta2_range!r}.")
  if route == "auto" and chosen == "laplace" and isinstance(lang, languages.PresenceLabels):
    static, problem = _problem(lang, cls)   # traced: one compiled function for every d
  else:
    static, problem = _route_problem(lang, chosen, cls)
  analysis = jax.device_get(_analyse(static, problem, eps))
  v, a1, a2, direction = (analysis.pop(k) for k in ("v", "a1", "a2", "direction"))
  floor_beta = analysis.pop("floor_beta")
  letter, other = int(analysis.pop("letter")), int(analysis.pop("other"))
  analysis = {k: float(x) for k, x in analysis.items()}
  a1_host, a2_host = np.asarray(a1), np.asarray(a2)
  centred = [a - a.mean() for a in (a1_host, a2_host)]
  norms = [float(np.linalg.norm(a)) for a in centred]
  cross = float(np.linalg.norm(np.outer(*centred) - np.outer(*centred).T)) if min(norms) else 0.0
  one_coordinate = cross <= 1e-9 * norms[0] * norms[1]
  b = float(a1_host[letter] - a1_host[other])
  c = float(a2_host[letter] - a2_host[other])
  steps_arg = np.float64(steps)
  risk_of = functools.partial(_risk_of, static, problem, v, a1, a2, eta3=eta3, steps=steps_arg)
  eta3_max = functools.partial(_eta3_max, static, problem, v, a1, a2)
  steps_needed = functools.partial(_steps_needed, static, problem, v, a1, a2, eta3=eta3, eps=eps)
  log_range = np.log([low, high])

  chunk = BISECTION_CHUNK if static.moments_at is None else ROUTE_CHUNK

  def chunks(eta1, compiled):
    eta1 = np.asarray(eta1, np.float64)
    flat = np.concatenate([eta1.ravel(), np.ones(-eta1.size % chunk)])
    parts = [jax.device_get(compiled(flat[i:i + chunk]))
             for i in range(0, flat.size, chunk)]  # one compiled shape
    return eta1, [np.concatenate(p)[:eta1.size] for p in zip(*parts)]

  def eta2_min_bisection(eta1):
    eta1, (values, _) = chunks(eta1, lambda x: _eta2_min_bisection(
        static, problem, v, a1, a2, x, eta3, steps_arg, eps, log_range))
    return jnp.asarray(values.reshape(eta1.shape))

  def eta2_intervals(eta1):
    # Scan every η1, then refine only the brackets where the outcome changes (a vmapped
    # root over every scan gap would cost ETA2_SCAN times more), a chunk at a time.
    eta1, (values,) = chunks(eta1, lambda x: (_eta2_scan(
        static, problem, v, a1, a2, x, eta3, steps_arg, eps, log_range),))
    xs = np.linspace(log_range[0], log_range[1], ETA2_SCAN)
    success = values <= 0
    rows, gaps = np.nonzero(success[:, 1:] != success[:, :-1])
    roots = np.empty(rows.size)
    for i in range(0, rows.size, chunk):
      part = slice(i, i + chunk)
      pad = chunk - rows[part].size
      r, g = (np.concatenate([a[part], np.repeat(a[part][:1], pad)]) for a in (rows, gaps))
      out = _eta2_refine(static, problem, v, a1, a2, eta1.ravel()[r], xs[g], xs[g + 1],
                         values[r, g], values[r, g + 1], eta3, steps_arg, eps)
      roots[part] = np.asarray(out)[:chunk - pad]
    return [_intervals(success[n], roots[rows == n], low, high) for n in range(eta1.size)]

  common = {"coefficients": (a1, a2), "eps": eps, "eta3": eta3, "steps": steps,
            "risk_of": risk_of, "eta3_max": eta3_max, "steps_needed": steps_needed,
            "route": chosen, "eta1_stable": analysis["eta1_stable"],
            "eta2_intervals": _positive_eta1(eta2_intervals)}
  bisection_note = (f"η2_min(η1) by bisection of the exact outcome along log η2 on "
                    f"[{low:g}, {high:g}], checked to be a single crossing on {ETA2_SCAN} "
                    f"points (NaN where it is not: eta2_intervals gives the intervals).")
  if max(norms) <= ATTENTION_STILL:
    # The first two steps never move attention (a1 = a2 = 0 up to roundoff): every plan
    # ends at the output-only floor R*(0), and b, c, Δ_ε would be built from roundoff.
    nan = math.nan
    floor = analysis["risk_floor"]
    learned = floor <= eps
    return Regime(
        coordinates=0, b=nan, c=nan, delta_eps=nan, eta1_max=nan, min_product=nan,
        risk_floor=floor, floor_beta=floor_beta, eta3_limit=analysis["eta3_limit"],
        monotone=False,
        note=(f"the first two steps never move attention (|a1|, |a2| <= {ATTENTION_STILL:g}): "
              f"every (η1, η2) ends at the output-only floor R*(0) = {floor:.6g}, "
              + ("below" if learned else "above") + f" ε = {eps:g}."),
        delta_of=lambda eta1, eta2: jnp.zeros_like(jnp.asarray(eta1 * eta2, jnp.float64)),
        risk_of_delta=None,
        eta2_min=_positive_eta1(lambda eta1: jnp.full(jnp.shape(eta1),
                                                      0.0 if learned else math.inf)),
        **common)
  if not one_coordinate or b == 0.0:
    nan = math.nan
    return Regime(
        coordinates=2, b=nan, c=nan, delta_eps=nan, eta1_max=nan, min_product=nan,
        risk_floor=nan, floor_beta=np.full(a1_host.shape, nan), eta3_limit=nan, monotone=False,
        note=("α has two invariant coordinates (η1η2, η1²η2): no single Δ law; "
              + bisection_note),
        delta_of=lambda eta1, eta2: jnp.stack([eta1 * eta2, eta1**2 * eta2]),
        risk_of_delta=None, eta2_min=_positive_eta1(eta2_min_bisection), **common)
  delta_eps = analysis["delta_eps"]
  # A c of roundoff (|c| <= FLAT_C·|b|, e.g. -1e-18 against b = 0.025) is no wall at 1e16.
  eta1_max = b / abs(c) if c < -FLAT_C * abs(b) else math.inf

  def delta_of(eta1, eta2):
    eta1 = jnp.asarray(eta1, jnp.float64)
    return eta1 * eta2 * (b + c * eta1)

  def eta2_min_law(eta1):
    slope = jnp.asarray(eta1, jnp.float64) * (b + c * jnp.asarray(eta1, jnp.float64))
    # Beyond the wall (slope < 0) every η2 > 0 gives Δ < 0 <= Δ_ε, hence R* > ε.
    return jnp.where(slope > 0, delta_eps / jnp.where(slope > 0, slope, 1.0),
                     jnp.where((slope == 0) & (delta_eps == 0), 0.0, jnp.inf))

  monotone = bool(analysis["monotone"]) and math.isfinite(delta_eps)
  if math.isinf(delta_eps):
    note = (f"one invariant Δ = η1η2(b + cη1), but R*(Δ) stays above ε = {eps:g} for every "
            f"Δ <= {DELTA_MAX:g}: no three-phase plan from zero reaches ε on this language.")
  elif monotone:
    note = ("one invariant Δ = α_letter - α_other = η1η2(b + cη1); success iff Δ >= Δ_ε "
            f"(the success set along Δ checked on {MONOTONE_POINTS} points); "
            + (f"attention step reverses sign beyond η1 = {eta1_max:.6g}." if
               math.isfinite(eta1_max) else "the attention step never reverses sign "
               "(c >= 0, or c is roundoff): no wall."))
  else:
    note = ("one invariant Δ = η1η2(b + cη1), but the success set along Δ is not "
            "{Δ >= Δ_ε} (R* is not monotone): " + bisection_note)
  if math.isfinite(steps):
    note += (f" At finite T = {steps:g}, phase 3's start β1 = η1 v matters too: η2_min is "
             "the T = ∞ law verified on the exact R_T, bisected where phase 3 is too short.")
  def eta2_min_verified(eta1):
    # Finite T: R_T >= R*(Δ) (R* minimises over β at the same α), so η2_min^T >= η2_law;
    # where R_T <= ε at η2_law·(1 + LAW_CHECK) the boundary is that point to LAW_CHECK
    # relative (docs/theory.md §8.5), else it is bisected. An infinite law stays infinite.
    eta1 = np.asarray(eta1, np.float64)
    law = np.asarray(eta2_min_law(eta1))
    probe = law * (1.0 + LAW_CHECK)
    verified = np.isinf(law) | (np.asarray(risk_of(eta1, probe)) <= eps)
    result = np.where(np.isinf(law), law, probe)
    if not verified.all():
      result[~verified] = np.asarray(eta2_min_bisection(eta1[~verified]))
    return jnp.asarray(result)

  if not monotone:
    eta2_min = eta2_min_bisection
  else:
    eta2_min = eta2_min_law if math.isinf(steps) else eta2_min_verified
  return Regime(
      coordinates=1, b=b, c=c, delta_eps=delta_eps, eta1_max=eta1_max,
      min_product=delta_eps / b if b > 0 else math.nan, risk_floor=analysis["risk_floor"],
      floor_beta=floor_beta, eta3_limit=analysis["eta3_limit"], monotone=monotone, note=note,
      delta_of=delta_of, risk_of_delta=functools.partial(_risk_of_delta, static, problem,
                                                         direction),
      eta2_min=_positive_eta1(eta2_min), **common)


@functools.partial(jax.jit, static_argnums=0)
def _limit_risk_many(static, problem, alpha):
  return jax.vmap(lambda a: _limit_risk(static, problem, a))(alpha)


def limit_risk(lang: languages.Language) -> Callable:
  """R*(α) = min_β R(α, β) for per-token scores α (..., d): phase 3 at T = ∞ from any α.

  The least-squares minimum of the squared risk at fixed scores (docs/theory.md §8.2),
  from the moments (H, g) of the Laplace route (§3a) on untied tokens.

  Args:
    lang: an occurrence-family language.

  Returns:
    fn(alpha (..., d)) -> R* (...), compiled once per language structure.

  Example:
    >>> limit = lj.regimes.limit_risk(lj.occurrence(4))
    >>> # α = 0: the output-only floor of §4; attention on the letter: R* → 0
    >>> scores = jnp.array([[0.0, 0.0, 0.0, 0.0], [20.0, 0.0, 0.0, 0.0]])
    >>> np.round(np.asarray(limit(scores)), 6).tolist()
    [0.196587, 0.0]
  """
  validation.require_float64("lj.regimes.limit_risk")
  check_language(lang)
  static, problem = _problem(lang, False, tied=False)

  def fn(alpha):
    alpha = jnp.asarray(alpha, jnp.float64)
    return _limit_risk_many(static, problem, alpha.reshape(-1, lang.d)).reshape(alpha.shape[:-1])

  return fn


def kqv_attention_step(lang: languages.Language, fixed: dict) -> Callable:
  """The KQV three-phase plan's first two steps, exactly (docs/theory.md §8.7).

  Builds fn(params, η1) -> (α0, α1, α2), each (d,): after one output step of size
  η1 on (W_V, w_o) from `params` and one attention step of size η2 on (W_Q, W_K),
  the scores are α0 + η2 α1 + η2² α2 exactly, since α is bilinear in (W_Q, W_K):
  with G_Q, G_K the attention gradient, α1 = -α(G_Q, W_K) - α(W_Q, G_K) and
  α2 = α(G_Q, G_K). jit- and vmap-able.

  Args:
    lang: the language (its Laplace route gives the risk).
    fixed: the KQV model's fixed (untrained) arrays, as models.kqv.init_kqv returns them.

  Returns:
    fn(params, eta1) -> (α0, α1, α2), with params the KQV weights.

  Example:
    >>> lang = lj.occurrence(4)
    >>> params, fixed = lj.models.kqv.init_kqv(jax.random.key(3), lang.d, scale=0.3)
    >>> step = jax.jit(lj.regimes.kqv_attention_step(lang, fixed))
    >>> alpha0, alpha1, alpha2 = step(params, 4.0)
    >>> alpha0.shape, alpha1.shape, alpha2.shape
    ((4,), (4,), (4,))
    >>> # W_Q, W_K are untouched by the output step: α0 is the initial scores.
    >>> initial = lj.models.kqv.kqv_to_direct(params, fixed)["alpha"]
    >>> bool(jnp.allclose(alpha0, initial, rtol=1e-12, atol=0.0))
    True
  """
  validation.require_float64("lj.regimes.kqv_attention_step")
  risk = risk_lib.risk_fn(lang, route="laplace").risk
  attention = ("W_Q", "W_K")

  def scores(params, w_q, w_k):
    return kqv.kqv_to_direct(dict(params, W_Q=w_q, W_K=w_k), fixed)["alpha"]

  def fn(params, eta1):
    grads = jax.grad(lambda p: risk(kqv.kqv_to_direct(p, fixed)))(params)
    params = {k: v if k in attention else v - eta1 * grads[k] for k, v in params.items()}
    grads = jax.grad(lambda p: risk(kqv.kqv_to_direct(p, fixed)))(params)
    w_q, w_k, g_q, g_k = params["W_Q"], params["W_K"], grads["W_Q"], grads["W_K"]
    return (scores(params, w_q, w_k), -scores(params, g_q, w_k) - scores(params, w_q, g_k),
            scores(params, g_q, g_k))

  return fn


REGIMES = {"three_phase": three_phase_regime}


def of_plan(plan: str, lang: languages.Language, eps: float, **options) -> Regime:
  """The exact regime of a named plan (docs/theory.md §8); plans outside its reach name the sweep.

  Args:
    plan: a plan name of REGIMES (only "three_phase" has an exact regime).
    lang: a language with an exact moments route (exact_route).
    eps: the success threshold ε on the final squared risk.
    **options: passed to the plan's builder (three_phase_regime: eta3, steps, cls, ...).

  Returns:
    The plan's Regime.

  Raises:
    ValueError: for a plan without an exact regime, naming the sweep's command.

  Example:
    >>> lj.regimes.of_plan("three_phase", lj.occurrence(4), 1e-3).coordinates
    1
    >>> lj.regimes.of_plan("joint", lj.occurrence(4), 1e-3)
    Traceback (most recent call last):
    ...
    ValueError: plan 'joint' has no exact regime ... --config.plans='("joint",)'.
  """
  if plan not in REGIMES:
    raise ValueError(f"plan {plan!r} has no exact regime (plans with one: {sorted(REGIMES)}; "
                     f"joint phases and schedules are outside the closed form): {SWEEP_ROUTE} "
                     f"--config.plans='(\"{plan}\",)'.")
  return REGIMES[plan](lang, eps, **options)


__all__ = ["REGIMES", "Regime", "check_language", "exact_route", "kqv_attention_step",
           "limit_risk", "of_plan", "three_phase_regime"]
