"""Saddles on a run's plateaus and the time to leave them (docs/theory.md §10c).

At a plateau θ of a run the exact Hessian ∇²R(θ) is formed densely (the dense path of
lagjax/dynamics/sharpness.py: autodiff, then Jacobi rotations, never batched LAPACK) and,
optionally, θ is first moved onto the critical point it approximates by Newton steps on
∇R = 0 (the flat shift directions of the softmax, abs(λ) ≤ cutoff, left out). A most negative
eigenvalue λ < −tol makes the plateau a saddle; its eigenvector is the unstable direction.

Near the saddle the flow dθ/dt = −∇R(θ) moves a perturbation δ along that direction as
δ(t) ≈ δ(0)·e^(abs(λ) t), so a run started at θ0 = ε·u (u a fixed unit vector) leaves the
plateau, R dropping below a level, after

    t_esc(ε) ≈ a + ln(1/ε) / abs(λ),

a the time to reach the plateau and to grow from the plateau's neighbourhood to the level.
`escape_times` measures t_esc by lj.flow at several ε; `fit_escape_law` fits a and the
slope by least squares on (ln(1/ε), t_esc) and compares the slope with 1/abs(λ). From θ0 = 0
exactly a run whose unstable direction leaves an invariant set (e.g. the reversal symmetry
first ↔ last of a reversal-closed language) stays on the saddle; in float64 roundoff seeds
it, and the escape time measures the roundoff, not the dynamics. `excitability` tells the two
kinds apart from the states the run from θ0 = 0 visits: whether the gradient along the run
(or the span of its states) has a component along the unstable direction above roundoff.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from lagjax import validation
from lagjax.data import languages
from lagjax.dynamics import flow as flow_lib
from lagjax.dynamics import plans, sharpness
from lagjax.linalg import symmetric_eigh

# Eigenvalues within this of 0 are the softmax's flat shift directions (exactly 0 in exact
# arithmetic, ~1e-13 in float64 on the transfer route): Newton does not step along them.
FLAT_CUTOFF = 1e-9

# The excitability check (docs/theory.md §10c). One float64 evaluation of the gradient of an
# O(1) risk errs by ~1e-15 absolute (§ Numerics: the squared risk's error is absolute); 1e-14
# bounds the seed roundoff can plant along any direction, with a margin of 10.
ROUNDOFF_SEED = 1e-14
# A component along the unstable direction above this (relative to the gradient, or of the
# unit direction on the span of the states) is excitation; at most this, with the roundoff
# envelope below 1e-2 of it, is none. Exact arithmetic gives 0 across an invariant set and an
# O(0.1-1) alignment when the flow excites the direction; Tomita 4 measures 1e-16 to 1e-13 on
# its decisive records (tests/analysis/test_saddles.py).
EXCITATION_THRESHOLD = 1e-6


@dataclasses.dataclass(frozen=True)
class Saddle:
  """The Hessian's verdict at a point (docs/theory.md §10c).

  Attributes:
    theta: the point examined (per-token parameters): the critical point Newton found from
      the given θ, or θ itself without refinement.
    risk: R(theta).
    grad_norm: ‖∇R(theta)‖.
    eigenvalues: the Hessian's eigenvalues at theta, ascending, (P,) numpy.
    min_eigenvalue: the most negative (smallest) eigenvalue λ.
    direction: its unit eigenvector, as parameters (the unstable direction when a saddle).
    is_saddle: λ < −tol.
    tol: the threshold.
    displacement: ‖theta − θ_given‖, how far Newton moved (0 without refinement).

  Example:
    >>> risk = lambda p: (p[0] ** 2 - 1.0) ** 2 + p[1] ** 2   # a saddle at 0, minima at (±1, 0)
    >>> found = lj.analysis.saddles.saddle(risk, jnp.array([0.1, 0.05]))
    >>> found   # doctest: +ELLIPSIS
    Saddle(R = 1, λ_min = -4, |∇R| = ..., a saddle; Newton moved 0.11)
    >>> found.grad_norm < 1e-15, float(jnp.abs(found.theta).max()) < 1e-15
    (True, True)
  """

  theta: object
  risk: float
  grad_norm: float
  eigenvalues: np.ndarray
  min_eigenvalue: float
  direction: object
  is_saddle: bool
  tol: float
  displacement: float

  def __repr__(self) -> str:
    kind = "a saddle" if self.is_saddle else "not a saddle"
    return (f"Saddle(R = {self.risk:.12g}, λ_min = {self.min_eigenvalue:.6g}, "
            f"|∇R| = {self.grad_norm:.2g}, {kind}; Newton moved {self.displacement:.2g})")


def _programs(risk: Callable):
  """The jitted spectrum, value-and-gradient and batched gradient of one risk, built once per
  risk callable (the atlas checks many plateaus of one layout's risk: one compilation per
  parameter structure, not one per call); an unhashable callable builds them anew."""
  try:
    return _cached_programs(risk)
  except TypeError:
    return _build_programs(risk)


def _build_programs(risk: Callable):
  spectrum = jax.jit(lambda p: symmetric_eigh(sharpness.dense_hessian(risk, p)))
  value_and_grad = jax.jit(jax.value_and_grad(risk))
  batched_grad = jax.jit(jax.vmap(jax.grad(risk)))
  return spectrum, value_and_grad, batched_grad


_cached_programs = functools.lru_cache(maxsize=64)(_build_programs)


def hessian_spectrum(risk: Callable, params):
  """Eigenvalues (ascending) and unit eigenvectors (columns) of ∇²R(θ) over
  `ravel_pytree(params)`: sharpness.dense_hessian, then Jacobi rotations (§5d, §10c).

  Args:
    risk: params -> scalar R (e.g. lj.risk_fn(lang, ...).risk).
    params: the point θ (any pytree).

  Returns:
    (eigenvalues (P,), eigenvectors (P, P)) as numpy arrays.

  Example:
    >>> risk = lambda p: p[0] ** 2 - 3.0 * p[1] ** 2
    >>> values, _ = lj.analysis.saddles.hessian_spectrum(risk, jnp.zeros(2))
    >>> values.tolist()
    [-6.0, 2.0]
  """
  values, vectors = _programs(risk)[0](params)
  return np.asarray(values), np.asarray(vectors)


def critical_point(risk: Callable, params, *, steps: int = 20, gtol: float = 1e-13,
                   cutoff: float = FLAT_CUTOFF):
  """The critical point near θ by Newton steps on ∇R = 0 (docs/theory.md §10c): the step
  −Σ_i (v_iᵀ∇R / λ_i) v_i over the Hessian's eigenpairs with abs(λ_i) > cutoff. Unlike a
  minimiser it converges to saddles too (quadratically, from a plateau's point).

  Args:
    risk: params -> scalar R.
    params: the starting point θ (a plateau's point).
    steps: the most Newton steps, at least 1.
    gtol: stop once ‖∇R‖ ≤ gtol.
    cutoff: eigenvalues of modulus ≤ cutoff are flat directions, not stepped along.

  Returns:
    The critical point, a pytree like params.

  Example:
    >>> risk = lambda p: (p[0] ** 2 - 1.0) ** 2 + p[1] ** 2
    >>> lj.analysis.saddles.critical_point(risk, jnp.array([0.9, 0.1])).round(12).tolist()
    [1.0, 0.0]
  """
  steps = validation.check_int("steps", steps, 1)
  flat, unravel = ravel_pytree(params)
  spectrum, value_and_grad, _ = _programs(risk)
  x = flat
  for _ in range(steps):
    grad = ravel_pytree(value_and_grad(unravel(x))[1])[0]
    if float(jnp.linalg.norm(grad)) <= gtol:
      break
    values, vectors = spectrum(unravel(x))
    keep = jnp.abs(values) > cutoff
    coefficients = jnp.where(keep, (vectors.T @ grad) / jnp.where(keep, values, 1.0), 0.0)
    x = x - vectors @ coefficients
  return unravel(x)


def saddle(risk: Callable, params, *, tol: float = 1e-8, refine: bool = True,
           steps: int = 20) -> Saddle:
  """Whether θ (a plateau's point) is a saddle of R: the exact Hessian's spectrum at the
  critical point Newton finds from θ (or at θ itself, refine=False), a saddle iff its most
  negative eigenvalue λ < −tol (docs/theory.md §10c).

  Args:
    risk: params -> scalar R (e.g. lj.risk_fn(lang, positions="first_last").risk).
    params: the point θ, per-token parameters as lj.flow returns them.
    tol: the threshold on λ, > 0.
    refine: move θ onto the nearby critical point first (`critical_point`).
    steps: the most Newton steps of the refinement.

  Returns:
    A Saddle.

  Example:
    >>> risk = lambda p: (p[0] ** 2 - 1.0) ** 2 + p[1] ** 2
    >>> found = lj.analysis.saddles.saddle(risk, jnp.array([0.9, 0.1]))   # the minimum (1, 0)
    >>> found.is_saddle, found.eigenvalues.round(12).tolist()
    (False, [2.0, 8.0])
  """
  tol = validation.check_real("tol", tol, minimum=0.0, strict=True)
  point = critical_point(risk, params, steps=steps) if refine else params
  values, vectors = hessian_spectrum(risk, point)
  flat, unravel = ravel_pytree(point)
  value, grad = _programs(risk)[1](point)
  grad = ravel_pytree(grad)[0]
  displacement = float(jnp.linalg.norm(flat - ravel_pytree(params)[0]))
  return Saddle(point, float(value), float(jnp.linalg.norm(grad)), values, float(values[0]),
                unravel(jnp.asarray(vectors[:, 0])), bool(values[0] < -tol), tol, displacement)


def unit_direction(template, seed: int = 0):
  """A fixed seeded unit vector u in the parameters' space: numpy's default_rng(seed)
  normal draws over `ravel_pytree(template)`, normalised (docs/theory.md §10c).

  Args:
    template: parameters of the layout (e.g. lj.init_params(2, positions="first_last")).
    seed: the seed, ≥ 0.

  Returns:
    u, a pytree like template with ‖u‖ = 1.

  Example:
    >>> u = lj.analysis.saddles.unit_direction(lj.init_params(2), seed=0)
    >>> round(sum(float(jnp.sum(leaf ** 2)) for leaf in jax.tree.leaves(u)), 12)   # ‖u‖²
    1.0
  """
  seed = validation.check_int("seed", seed, 0)
  flat, unravel = ravel_pytree(template)
  draw = np.random.default_rng(seed).standard_normal(flat.shape[0])
  return unravel(jnp.asarray(draw / np.linalg.norm(draw)))


def escape_times(lang: languages.Language, template, epsilons: Sequence[float], *,
                 level: float, t1: float, seed: int = 0, plan=None, origin=None,
                 **flow_options) -> np.ndarray:
  """The time R first falls to `level` under lj.flow from θ0 = origin + ε·u, at each ε, with
  u = unit_direction(template, seed) and origin 0 by default (docs/theory.md §10c). Every run
  shares one compilation (tied=False, the same shapes): per-token parameters, whose flow is −∇R.

  From origin = the saddle θ* the runs skip the approach to the plateau (a cheaper measure of
  the same slope 1/abs(λ)); then ε·abs(⟨u, v⟩) must stand well above the solver's tolerance
  rtol·‖θ*‖ + atol. Below it the adaptive solver can take one long first step that an
  L-stable method (Rodas5P) damps the unstable mode through (its stability function → 0 as
  h·abs(λ) grows): the run then stays at the saddle and the time is NaN.

  Args:
    lang: the language.
    template: parameters of the layout (lj.init_params(d, ...)); only its shapes are read.
    epsilons: the perturbation sizes ε ≥ 0 (0 is θ0 = 0, where only roundoff leaves an
      invariant set).
    level: the risk level that marks the escape (> 0), below the plateau.
    t1: the longest time a run flows.
    seed: the seed of u.
    plan: the plan (default lj.plans.joint(1.0, t1), the flow dθ/dt = −∇R).
    origin: the point perturbed (per-token parameters like template); None is θ = 0.
    **flow_options: passed to lj.flow (rtol, atol, num_records, route, ...).

  Returns:
    (len(epsilons),) escape times, NaN where R stayed above level until t1.

  Example:
    >>> lang = lj.occurrence(3)   # no saddle: from any small θ0 R falls below 0.3 by t ≈ 3
    >>> times = lj.analysis.saddles.escape_times(lang, lj.init_params(3), [1e-6, 0.0],
    ...                                          level=0.3, t1=20.0, num_records=8)
    >>> bool(abs(times[0] - times[1]) < 1e-4)
    True
  """
  level = validation.check_real("level", level, minimum=0.0, strict=True)
  t1 = validation.check_real("t1", t1, minimum=0.0, strict=True)
  sizes = [validation.check_real("epsilons entries", e, minimum=0.0) for e in epsilons]
  direction = unit_direction(template, seed)
  plan = plans.joint(1.0, t1) if plan is None else plan
  options = {"tied": False, **flow_options}
  times = []
  origin = jax.tree_util.tree_map(jnp.zeros_like, direction) if origin is None else origin
  for size in sizes:
    theta0 = jax.tree_util.tree_map(lambda o, u, s=size: o + s * u, origin, direction)
    run = flow_lib.flow(lang, plan, theta0, t1=t1, epsilon=level, **options)
    times.append(float(run.summary["tau_eps"]))
  return np.array(times)


@dataclasses.dataclass(frozen=True)
class EscapeLaw:
  """t_esc ≈ a + slope·ln(1/ε) fitted by least squares (docs/theory.md §10c).

  Attributes:
    intercept: a.
    slope: the fitted slope; 1/abs(λ) in theory.
    slope_ratio: slope·abs(λ) (NaN without λ): 1 when the law holds.
    max_residual: the largest abs(t_esc − fit) over the points.
    num_points: how many (ε, t_esc) pairs.

  Example:
    >>> law = lj.analysis.saddles.fit_escape_law([1e-4, 1e-8, 1e-12], [600.0, 1100.0, 1600.0])
    >>> round(law.slope, 3), round(law.intercept, 1)
    (54.287, 100.0)
  """

  intercept: float
  slope: float
  slope_ratio: float
  max_residual: float
  num_points: int


def fit_escape_law(epsilons: Sequence[float], times: Sequence[float],
                   eigenvalue: float | None = None) -> EscapeLaw:
  """Fits t_esc = a + slope·ln(1/ε) to measured escape times by least squares and compares
  the slope with 1/abs(λ) (docs/theory.md §10c).

  Args:
    epsilons: the perturbation sizes, ≥ 3 distinct values in (0, 1).
    times: the escape time at each (finite).
    eigenvalue: the saddle's most negative eigenvalue λ < 0, or None.

  Returns:
    An EscapeLaw; slope_ratio = slope·abs(λ).

  Raises:
    ValueError: one line naming the field, for fewer than 3 distinct ε in (0, 1), lengths that
      differ, a non-finite time (a run that never escaped), or λ ≥ 0.

  Example:
    >>> # the escape law of a linear saddle with λ = -0.02: t = 10 + ln(1/ε)/0.02
    >>> eps = np.array([1e-4, 1e-6, 1e-8])
    >>> law = lj.analysis.saddles.fit_escape_law(eps, 10 + np.log(1 / eps) / 0.02, -0.02)
    >>> round(law.slope, 9), round(law.slope_ratio, 9), round(law.intercept, 9)
    (50.0, 1.0, 10.0)
  """
  epsilons = np.asarray(epsilons, np.float64)
  times = np.asarray(times, np.float64)
  if epsilons.ndim != 1 or times.shape != epsilons.shape:
    raise ValueError(f"epsilons and times must be 1-D of one length; got shapes "
                     f"{epsilons.shape} and {times.shape}.")
  if not (np.all((epsilons > 0) & (epsilons < 1)) and np.unique(epsilons).size >= 3):
    raise ValueError(f"epsilons must hold at least 3 distinct values in (0, 1); got "
                     f"{epsilons.tolist()}.")
  if not np.all(np.isfinite(times)):
    raise ValueError(f"times must be finite (a NaN is a run that never escaped); got "
                     f"{times.tolist()}.")
  ratio = np.nan
  if eigenvalue is not None:
    eigenvalue = validation.check_real("eigenvalue", eigenvalue, maximum=0.0, strict_max=True)
  logs = np.log(1.0 / epsilons)
  design = np.stack([np.ones_like(logs), logs], axis=1)
  (intercept, slope), *_ = np.linalg.lstsq(design, times, rcond=None)
  if eigenvalue is not None:
    ratio = float(slope * abs(eigenvalue))
  residual = float(np.max(np.abs(design @ np.array([intercept, slope]) - times)))
  return EscapeLaw(float(intercept), float(slope), ratio, residual, int(epsilons.size))


@dataclasses.dataclass(frozen=True)
class Excitability:
  """Whether the run from θ0 = 0 excites a saddle's unstable direction v (docs/theory.md
  §10c), with the numbers behind the verdict.

  A record of the run is decisive when the roundoff envelope there, ROUNDOFF_SEED·
  e^(abs(λ) t)/‖∇R(θ(t))‖ (the largest seed roundoff can plant along v, grown at the saddle's
  rate from t = 0, relative to the gradient), is at most 1e-2·threshold: there roundoff
  cannot fake an alignment above the threshold.

  Attributes:
    excited: the flow excites v: on a decisive record, abs(⟨v, ∇R⟩)/‖∇R‖ or the component of
      v on the span of the decisive states exceeds the threshold.
    kind: "excited by the flow", "across an invariant set (roundoff only)", or "undecided
      (no decisive record)".
    alignment: the largest abs(⟨v, ∇R(θ(t))⟩)/‖∇R(θ(t))‖ over the decisive records.
    span_component: ‖P v‖, P the orthogonal projector on the span of the decisive states
      (singular directions above threshold times the largest singular value).
    threshold: the threshold (EXCITATION_THRESHOLD by default).
    decisive_until: the last decisive record's time (NaN if none).
    num_decisive: how many records were decisive.
    times: the record times (R,).
    alignments: abs(⟨v, ∇R⟩)/‖∇R‖ at every record (R,).
    envelopes: the roundoff envelope at every record (R,).
    eigenvalue: the saddle's λ.
    from_zero: the verdict from θ0 = 0 exactly.
    from_noise: the verdict from θ0 = ε·noise as ε → 0.

  Example:
    >>> risk = lambda p: 0.5 * (p[0] - 1.0) ** 2 + 0.25 * (p[1] ** 2 - 1.0) ** 2
    >>> found = lj.analysis.saddles.saddle(risk, jnp.array([0.9, 0.0]))  # (1, 0), λ = -1
    >>> times = np.linspace(0.0, 2.0, 5)   # the flow from 0: x = 1 - e^(-t), y = 0
    >>> states = jnp.stack([1.0 - jnp.exp(-times), jnp.zeros(5)], axis=1)
    >>> check = lj.analysis.saddles.excitability(risk, found, times, states)
    >>> check.kind, check.alignment, check.from_zero
    ('across an invariant set (roundoff only)', 0.0, 'stays at the saddle')
  """

  excited: bool
  kind: str
  alignment: float
  span_component: float
  threshold: float
  decisive_until: float
  num_decisive: int
  times: np.ndarray
  alignments: np.ndarray
  envelopes: np.ndarray
  eigenvalue: float
  from_zero: str
  from_noise: str

  def __repr__(self) -> str:
    return (f"Excitability({self.kind}: alignment {self.alignment:.2g}, span component "
            f"{self.span_component:.2g}, threshold {self.threshold:g}, {self.num_decisive} "
            f"decisive records to t = {self.decisive_until:.4g})")


def _check_saddle(found: Saddle) -> None:
  if not found.is_saddle:
    raise ValueError(f"found must be a saddle (λ_min < -tol); got λ_min = "
                     f"{found.min_eigenvalue:.6g} with tol {found.tol:g}.")


def excitability(risk: Callable, found: Saddle, times, states, *,
                 threshold: float = EXCITATION_THRESHOLD) -> Excitability:
  """Says whether the run from θ0 = 0 that met the saddle `found` can excite its unstable
  direction v, or whether v lies across an invariant set of that run (a symmetry's fixed
  subspace, say) that only roundoff breaks (docs/theory.md §10c).

  In exact arithmetic a set the flow cannot leave (e.g. the reversal-symmetric parameters of a
  reversal-closed language, first table = last table) holds the gradient along the run, so
  ⟨v, ∇R(θ(t))⟩ = 0 and v is orthogonal to every state. Otherwise some time has
  ⟨v, ∇R⟩ ≠ 0. Both are read on the decisive records (class Excitability), where roundoff
  is too small to fake either.

  The verdicts: excited, "leaves the saddle without help" from θ0 = 0, and a perturbation
  adds nothing as ε → 0; across an invariant set, "stays at the saddle" from θ0 = 0 exactly
  (float64 leaves through roundoff, at a time roundoff sets), and from θ0 = ε·noise it learns
  after about ln(1/ε)/abs(λ).

  Args:
    risk: params -> scalar R, the risk the run descends (as for `saddle`).
    found: the saddle (a Saddle with is_saddle), e.g. saddle(risk, plateau_point).
    times: (R,) the record times of the run from θ0 = 0, increasing, ≥ 0.
    states: the run's θ at those times: a pytree like found.theta with a leading axis R
      (e.g. jax.vmap of lj.flow's dense path, or stacked GD iterates).
    threshold: the excitation threshold, in (0, 1).

  Returns:
    An Excitability.

  Raises:
    ValueError: one line naming the field, for a point that is not a saddle, times not
      increasing or not matching the states, or a threshold outside (0, 1).

  Example:
    >>> risk = lambda p: 0.5 * (p[0] - 1.0) ** 2 + 0.25 * (p[1] ** 2 - 1.0) ** 2 + 0.1 * p[0] * p[1]
    >>> found = lj.analysis.saddles.saddle(risk, jnp.array([1.0, 0.1]))   # y ↔ -y broken
    >>> states = jnp.array([[0.0, 0.0], [0.5, -0.02], [0.8, -0.1]])  # a run turning away
    >>> check = lj.analysis.saddles.excitability(risk, found, [0.0, 1.0, 2.0], states)
    >>> check.excited, check.from_zero
    (True, 'leaves the saddle without help')
  """
  _check_saddle(found)
  threshold = validation.check_real("threshold", threshold, minimum=0.0, strict=True,
                                    maximum=1.0, strict_max=True)
  times = np.asarray(times, np.float64)
  flat_states = jax.vmap(lambda state: ravel_pytree(state)[0])(states)
  if times.ndim != 1 or flat_states.shape[0] != times.shape[0] or times.size == 0:
    raise ValueError(f"times must be 1-D with one entry per state; got shape {times.shape} "
                     f"for {flat_states.shape[0]} states.")
  if not (np.all(np.isfinite(times)) and times[0] >= 0 and np.all(np.diff(times) > 0)):
    raise ValueError("times must be finite, ≥ 0 and strictly increasing.")
  direction = np.asarray(ravel_pytree(found.direction)[0])
  gradients = _programs(risk)[2](states)
  gradients = np.asarray(jax.vmap(lambda grad: ravel_pytree(grad)[0])(gradients))
  norms = np.linalg.norm(gradients, axis=1)
  rate = abs(found.min_eigenvalue)
  with np.errstate(divide="ignore", invalid="ignore"):
    alignments = np.where(norms > 0, np.abs(gradients @ direction) / norms, 0.0)
    envelopes = np.where(norms > 0, ROUNDOFF_SEED * np.exp(rate * times) / norms, np.inf)
  decisive = envelopes <= 1e-2 * threshold
  count = int(decisive.sum())
  if count == 0:
    return Excitability(False, "undecided (no decisive record)", np.nan, np.nan, threshold,
                        np.nan, 0, times, alignments, envelopes, found.min_eigenvalue,
                        "undecided", "undecided")
  alignment = float(alignments[decisive].max())
  visited = np.asarray(flat_states)[decisive]
  left, singular, right = np.linalg.svd(visited, full_matrices=False)
  basis = right[singular > threshold * singular[0]] if singular[0] > 0 else right[:0]
  span_component = float(np.linalg.norm(basis @ direction))
  excited = alignment > threshold or span_component > threshold
  if excited:
    kind, from_zero = "excited by the flow", "leaves the saddle without help"
    from_noise = "as from θ0 = 0 (the perturbation adds nothing as ε → 0)"
  else:
    kind, from_zero = "across an invariant set (roundoff only)", "stays at the saddle"
    from_noise = f"learns after about ln(1/ε)/abs(λ) = {1.0 / rate:.4g}·ln(1/ε)"
  return Excitability(excited, kind, alignment, span_component, threshold,
                      float(times[decisive][-1]), count, times, alignments, envelopes,
                      found.min_eigenvalue, from_zero, from_noise)


def flow_excitability(lang: languages.Language, risk: Callable, found: Saddle, theta0=None, *,
                      t1: float, plan=None, num_states: int = 32,
                      threshold: float = EXCITATION_THRESHOLD,
                      **flow_options) -> Excitability:
  """`excitability` on the states lj.flow visits from θ0 (default 0) up to t1: the dense
  path sampled at 0 and num_states geometric times from min(1, t1/num_states) to t1
  (docs/theory.md §10c).

  Args:
    lang: the language.
    risk: per-token params -> R on the layout (lj.risk_fn(lang, ...).risk).
    found: the saddle the run meets (`saddle`).
    theta0: per-token θ0 of the layout (zeros; None for the plain layout's zeros).
    t1: the run's horizon: up to the plateau (records past the decisive time are not read).
    plan: the plan (default lj.plans.joint(1.0, t1)).
    num_states: how many states after θ0, ≥ 2.
    threshold: passed to `excitability`.
    **flow_options: passed to lj.flow (rtol, tied, route, ...).

  Returns:
    An Excitability.

  Raises:
    ValueError: one line naming the field, for a point that is not a saddle (checked before
      the run), t1 ≤ 0 or num_states < 2.

  Example:
    >>> # Tomita 4 with position tables: tests/analysis/test_saddles.py (a minute); here the
    >>> # check refuses a minimum before it runs anything.
    >>> found = lj.analysis.saddles.saddle(lambda p: jnp.sum(p ** 2), jnp.ones(2))
    >>> lj.analysis.saddles.flow_excitability(lj.occurrence(3), None, found, t1=10.0)
    Traceback (most recent call last):
    ...
    ValueError: found must be a saddle (λ_min < -tol); got λ_min = 2 with tol 1e-08.
  """
  _check_saddle(found)
  t1 = validation.check_real("t1", t1, minimum=0.0, strict=True)
  num_states = validation.check_int("num_states", num_states, 2)
  plan = plans.joint(1.0, t1) if plan is None else plan
  _, path = flow_lib.flow(lang, plan, theta0, t1=t1, dense=True, **flow_options)
  times = np.concatenate([[0.0], np.geomspace(min(1.0, t1 / num_states), t1, num_states)])
  states = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves),
                                  *[path(float(t)) for t in times])
  return excitability(risk, found, times, states, threshold=threshold)


__all__ = ["EXCITATION_THRESHOLD", "FLAT_CUTOFF", "ROUNDOFF_SEED", "EscapeLaw", "Excitability",
           "Saddle", "critical_point", "escape_times", "excitability", "fit_escape_law",
           "flow_excitability", "hessian_spectrum", "saddle", "unit_direction"]
