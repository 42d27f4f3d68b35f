"""Certified optima of the population risk (docs/theory.md §3e, on the exact routes of §3).

`optimum` minimises R(θ) from several starts and says what it found:

1. multi-start L-BFGS (optax.lbfgs with its zoom line search): θ0 (zero by default) and
   num_starts - 1 seeded draws θ0 + N(0, start_scale²), one after the other (lax.map) in one
   compiled program per grid size;
2. damped Newton steps on every start with the exact Hessian (jax.hessian of the flattened
   parameters): the step is -Σ_i (v_iᵀ∇R / max(abs(λ_i), μ)) v_i over the eigenpairs of the
   Hessian ("saddle-free" Newton, μ > 0 a floor), so it is a descent direction at every
   point, and a backtracking line search keeps every accepted step on a descent path; each
   start is centred first (its component along the shift directions removed: R unchanged);
3. a certificate at the best start: R(θ*), ‖∇R(θ*)‖, the smallest eigenvalue of the Hessian
   off the softmax's shift directions, and how many starts reached R(θ*) within agree_tol;
4. the rule for an infimum approached at infinity: where the certificate fails (‖∇R‖ above
   gtol, or no positive curvature off the shift directions), the risk is followed along the
   ray θ* + s·d in the scores, d the direction the optimiser's scores were still moving in
   (or the flattest eigenvector's), s = 1, 2, 4, …, 128, with the outputs re-optimised at
   each point; if the scores' spread grows along it and R never rises, the status is
   "infimum_at_infinity" and the limit of R along the ray is extrapolated (Aitken's Δ² on
   the geometric sequence of s), with an error estimate. Where no straight ray stays flat
   but the run itself ran away (the spread grew past SATURATED = 30 nats over the second
   half of the run, where e^-30 is below roundoff, and R did not rise), the status is the
   same, with R(θ*) and the decrease over that half as its error.

The softmax is unchanged when one constant is added to every score a query sees (α and α_cls
under the CLS query; each row α[c, ·], α_cls[c] under the last query): those directions are
exactly flat, so the Hessian's eigenvalues are taken on their orthogonal complement.

Grid coverage (§3a, §3d): every quadrature route reports whether its static grid covers θ.
The objective the optimiser sees is NaN where the grid does not cover (a line search then
shortens its step), and a start that ends within one score window of the grid's edge moves
to the next grid size (the windows, doubled, up to one per score window, which always
covers), so no reported value comes from an uncovered grid. The final value is confirmed by
lj.population_risk, which sizes its grid to θ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.flatten_util import ravel_pytree

from lagjax import validation
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.linalg import symmetric
from lagjax.models import direct
from lagjax.risk import coverage, entries, evaluate, registry

STATUSES = ("minimum", "degenerate", "saddle", "infimum_at_infinity", "not_converged")
# The layouts by name, as the atlas names them (docs/theory.md §2b).
LAYOUTS = {"cls": direct.Layout(), "cls+first_last": direct.Layout(positions="first_last"),
           "last": direct.Layout(query="last"),
           "last+first_last": direct.Layout(query="last", positions="first_last")}
GROUPS = ("attention", "output")
# Risk differences below this are roundoff: the quadrature routes are exact to ~1e-15 (§3a)
# and a sum of O(100) terms of size ≤ 1 loses a few more digits.
NOISE = 1e-13
RAY_POINTS = 8          # s = 1, 2, …, 128 along the ray
# A score gap of 30 nats weighs e^-30 ≈ 9e-14 < NOISE: beyond it the softmax is saturated.
SATURATED = 30.0
MAX_STEP = 10.0         # the longest Newton step, in parameter norm (the line search halves it)
LINE_SEARCH_HALVINGS = 40


@dataclasses.dataclass(frozen=True)
class Optimum:
  """What `optimum` found and how it is certified (docs/theory.md §3e).

  Attributes:
    status (str): "minimum" (‖∇R‖ ≤ gtol and the Hessian positive definite off the shift
      directions: a strict local minimum), "degenerate" (‖∇R‖ ≤ gtol, smallest eigenvalue
      within eig_tol of 0, and R rises along the ray), "saddle" (‖∇R‖ ≤ gtol and a
      negative eigenvalue), "infimum_at_infinity" (R never rises along a ray on which the
      scores grow without bound, `risk` its limit; or the run's scores ran past saturation
      with R not rising, `risk` = R(θ*)), "not_converged".
    risk (float): R(θ*), or for "infimum_at_infinity" the limit of R along the ray.
    risk_error (float): the error of `risk`: NOISE at a finite point, the extrapolation's
      error estimate along a ray (inf where the ray's decrease does not shrink), the
      decrease over the run's second half for a saturated run.
    theta (dict): θ*, per-token parameters (for "infimum_at_infinity", the last point of the
      ray that was evaluated).
    grad_norm (float): ‖∇R(θ*)‖ over the free parameters (tied ones counted once).
    min_eigenvalue (float): the smallest eigenvalue of the Hessian of R at θ* on the
      complement of the shift directions.
    agreeing_starts (int): the starts whose final risk is within agree_tol of the best.
    num_starts (int): the starts run.
    agree_tol (float): the tolerance of agreeing_starts.
    direction (dict | None): the ray's unit direction d (per-token parameters), or None.
    ray_risks (tuple): R(θ* + s·d) at s = 1, 2, 4, … (empty without a ray).
    score_spread (float): the largest spread of the scores one query sees at θ*, in nats.
    grid_covered (bool): whether the grid of the reported value covers θ* (True for
      grid-free routes); a value off its grid would be NaN.
    grid_points (int): the quadrature nodes of that grid (0 for grid-free routes).
    confirmed_risk (float): R at `theta` from lj.population_risk, which sizes its grid to θ
      (equal to `risk` within NOISE at a finite point; the ray's last value at infinity).
    route (str): the risk route.
    layout (direct.Layout): the model's layout.
    source (str): where the starts of a restart that found this came from, in words (the
      atlas's `horizons.restarted`); "" for lj.optimum's own starts.

  Example:
    >>> found = lj.analysis.optimum.Optimum(
    ...     status="minimum", risk=0.25, risk_error=1e-13, theta={}, grad_norm=1e-15,
    ...     min_eigenvalue=0.1, agreeing_starts=3, num_starts=4, agree_tol=1e-9,
    ...     direction=None, ray_risks=(), score_spread=0.0, grid_covered=True,
    ...     grid_points=352, confirmed_risk=0.25, route="laplace",
    ...     layout=lj.models.direct.Layout())
    >>> found  # doctest: +NORMALIZE_WHITESPACE
    Optimum(minimum, risk=0.25 ± 1e-13, grad_norm=1e-15, min_eigenvalue=0.1, starts 3/4
    agree within 1e-09, score spread 0, route='laplace', grid covered)
  """

  status: str
  risk: float
  risk_error: float
  theta: dict
  grad_norm: float
  min_eigenvalue: float
  agreeing_starts: int
  num_starts: int
  agree_tol: float
  direction: dict | None
  ray_risks: tuple
  score_spread: float
  grid_covered: bool
  grid_points: int
  confirmed_risk: float
  route: str
  layout: direct.Layout
  source: str = ""

  def __repr__(self) -> str:
    where = ("approached at infinity" if self.status == "infimum_at_infinity"
             else f"score spread {self.score_spread:.3g}")
    return (f"Optimum({self.status}, risk={self.risk:.12g} ± {self.risk_error:.1g}, "
            f"grad_norm={self.grad_norm:.2g}, min_eigenvalue={self.min_eigenvalue:.3g}, "
            f"starts {self.agreeing_starts}/{self.num_starts} agree within "
            f"{self.agree_tol:g}, {where}, route={self.route!r}, "
            f"grid {'covered' if self.grid_covered else 'NOT covered'})")


def _layout(layout) -> direct.Layout:
  if isinstance(layout, direct.Layout):
    return layout
  if isinstance(layout, str) and layout in LAYOUTS:
    return LAYOUTS[layout]
  raise ValueError(f"layout must be a lj.models.direct.Layout or one of {tuple(LAYOUTS)}; "
                   f"got {layout!r}.")


def _shift_directions(template: dict, layout: direct.Layout) -> list[dict]:
  """The directions in which R is exactly flat: one constant added to every score a query
  sees (α and α_cls under the CLS query, one row α[c, ·], α_cls[c] per last token c)."""
  zero = jax.tree_util.tree_map(jnp.zeros_like, template)
  if layout.query == "cls":
    shift = dict(zero, alpha=jnp.ones_like(template["alpha"]))
    if layout.cls:
      shift["alpha_cls"] = jnp.ones_like(template["alpha_cls"])
    return [shift]
  rows = []
  for c in range(template["alpha"].shape[0]):
    shift = dict(zero, alpha=zero["alpha"].at[c].set(1.0))
    if layout.cls:
      shift["alpha_cls"] = zero["alpha_cls"].at[c].set(1.0)
    rows.append(shift)
  return rows


def score_spread(params) -> jax.Array:
  """The largest spread max - min of the scores one query sees (one row of the entry table,
  docs/theory.md §3d), in nats: what the quadrature grid must cover and what grows without
  bound when the infimum is approached at infinity (§3e).

  Args:
    params: grouped or per-token parameters of any layout (§2b).

  Returns:
    A scalar.

  Example:
    >>> params = dict(lj.init_params(2, query="last"), alpha=jnp.array([[0.0, 3.0], [1.0, 1.0]]))
    >>> float(lj.analysis.optimum.score_spread(params))
    3.0
  """
  scores = entries.entry_table(params)[0]
  return jnp.max(jnp.max(scores, -1) - jnp.min(scores, -1))


class _Problem:
  """The risk as a function of the flat vector of free parameters, on one grid size."""

  def __init__(self, lang, layout, partition, loss, name, theta0_grouped, free_names,
               num_points):
    self.route = registry.ROUTES[name].build(lang, partition, loss=loss, layout=layout,
                                             **coverage.grid_options(name, num_points))
    self.num_points = num_points
    flat, self.unravel = ravel_pytree(theta0_grouped)
    self.base = flat
    names = jax.tree_util.tree_map(lambda value: value, theta0_grouped)
    mask_tree = {key: jnp.full(jnp.shape(value), key in free_names) for key, value in
                 names.items()}
    self.free = np.flatnonzero(np.asarray(ravel_pytree(mask_tree)[0]))

  def params(self, x):
    return self.unravel(self.base.at[self.free].set(x))

  def report(self, x):
    report = self.route.report(self.params(x))
    covered = report.get("grid_covered", True)
    needed = report.get("grid_points_needed", 0.0)
    return report["risk"], covered, needed

  def needed(self, x):
    return self.report(x)[2]

  def objective(self, x):
    # NaN outside the grid's coverage (the routes' rule, §3a): a line search shortens its
    # step there.
    return self.route.risk(self.params(x))


def _grid_sizes(lang, partition, layout, name: str) -> tuple[int, list]:
  """(width, sizes): the route's ladder of grid sizes (risk/coverage.py) from its default up,
  the last holding one window per score window (it covers every θ), and one window's nodes;
  (0, [None]) for a route without a grid."""
  if not registry.ROUTES[name].quadrature:
    return 0, [None]
  windows = coverage.windows(partition.num_groups, layout)
  ladder = coverage.ladder(lang, windows)
  return ladder[0], [size for size in ladder if size >= coverage.default_size(lang, windows)]


def _grouped(field: str, params, d: int, layout: direct.Layout, partition) -> dict:
  """`params` (per-token, of `layout`) checked and grouped by `partition`; a bad point is
  refused in one line naming `field`."""
  try:
    direct.check_params(params, d)
  except ValueError as error:
    raise ValueError(f"{field}: {error}") from None
  if direct.layout(params) != layout:
    raise ValueError(f"{field} must have the layout {layout}; got {direct.layout(params)}.")
  return direct.group_params(partition, jax.tree_util.tree_map(jnp.asarray, params))


def _starts(problem: _Problem, num_starts: int, seed: int, start_scale: float,
            given: Sequence[np.ndarray] = ()) -> np.ndarray:
  """θ0's free values, num_starts - 1 seeded draws θ0 + N(0, start_scale²), then the given
  starts' free values (flat grouped vectors)."""
  template = np.asarray(problem.base)[problem.free]
  draws = np.asarray(_normal_draws(seed, (num_starts - 1, problem.free.size)))
  given = [np.asarray(start)[problem.free][None] for start in given]
  return np.concatenate([template[None], template + start_scale * draws, *given])


# The seeded draws as one program (jax.random's operations, one by one, compile each).
_normal_draws = jax.jit(lambda seed, shape: jax.random.normal(jax.random.key(seed), shape),
                        static_argnums=1)


def _lbfgs_run(problem: _Problem, iterations: int, chunks: int):
  """L-BFGS from one start x0: the final x and, per chunk, (x, R)."""
  objective = problem.objective
  solver = optax.lbfgs()
  value_and_grad = optax.value_and_grad_from_state(objective)
  per_chunk = max(iterations // chunks, 1)

  def run(x0):
    def chunk(carry, _):
      def step(carry, _):
        x, state = carry
        value, grad = value_and_grad(x, state=state)
        updates, state = solver.update(grad, state, x, value=value, grad=grad,
                                       value_fn=objective)
        return (optax.apply_updates(x, updates), state), None

      carry, _ = jax.lax.scan(step, carry, None, per_chunk)
      x = carry[0]
      return carry, (x, objective(x))

    (x, _), trace = jax.lax.scan(chunk, (x0, solver.init(x0)), None, chunks)
    return x, trace

  return run


def _lbfgs_program(problem: _Problem, iterations: int, chunks: int):
  """jit of `_lbfgs_run` over the starts, one after the other.

  Not vmapped: the zoom line search is a while loop, and under vmap every iteration runs
  until the slowest start's search ends (on a three-state census language under the last
  query, 15 trials per iteration against a mean of 4 per start), with the search's
  branches computed as selects. lax.map runs each start's own trials: 13-18× faster
  (docs/decisions/optimum-starts-in-sequence.md); each start's path is the same up to
  roundoff in how XLA vectorizes a batch.
  """
  return jax.jit(lambda starts: jax.lax.map(_lbfgs_run(problem, iterations, chunks), starts))


class _Newton:
  """Batched damped Newton on the exact Hessian, driven from the host (§3e)."""

  def __init__(self, problem: _Problem, shifts: np.ndarray):
    self.problem = problem
    objective = problem.objective
    self.value_and_grad = jax.jit(jax.vmap(jax.value_and_grad(objective)))
    # The projector off the shift directions (orthonormal columns `shifts`, (n, k)).
    n = problem.free.size
    projector = np.eye(n) - shifts @ shifts.T if shifts.size else np.eye(n)
    projector = jnp.asarray(projector)

    def curvature(x):
      hessian = jax.hessian(objective)(x)
      hessian = 0.5 * (hessian + hessian.T)
      # The shift directions are lifted far above the spectrum, so the smallest eigenvalues
      # are those of the complement.
      lift = 1.0 + 2.0 * jnp.max(jnp.abs(hessian)) * n
      values, vectors = symmetric.symmetric_eigh(
          projector @ hessian @ projector + lift * (jnp.eye(n) - projector))
      return values, vectors, jnp.max(jnp.abs(hessian))

    self.curvature = jax.jit(jax.vmap(curvature))
    self.projector = projector

  def direction(self, grad, values, vectors, scale):
    """-Σ (vᵀg / max(|λ|, μ)) v, μ = 1e-10·max(scale, 1): a descent direction always."""
    floor = 1e-10 * np.maximum(scale, 1.0)[:, None]
    coefficients = np.einsum("bij,bi->bj", vectors, grad @ np.asarray(self.projector))
    step = -np.einsum("bij,bj->bi", vectors, coefficients / np.maximum(np.abs(values), floor))
    norm = np.linalg.norm(step, axis=1, keepdims=True)
    return step * np.minimum(1.0, MAX_STEP / np.maximum(norm, 1e-300))

  def run(self, x, steps: int, gtol: float):
    """Up to `steps` Newton iterations on every start; returns (x, R, ∇R, eigenvalues,
    eigenvectors, Hessian scale, x before the last accepted steps).

    Every start is first centred: its component along the shift directions, on which R is
    exactly constant, is removed. L-BFGS can drift far along them (scores of 4.5e9 on
    `first` under the last query), where float64 spaces its numbers 1e-6 apart and a Newton
    step of 1e-7 rounds to no move at all."""
    x = np.asarray(x) @ np.asarray(self.projector)
    value, grad = map(np.asarray, self.value_and_grad(x))
    history = [x.copy()]
    for _ in range(steps):
      values, vectors, scale = map(np.asarray, self.curvature(x))
      active = np.isfinite(value) & (np.linalg.norm(grad, axis=1) > gtol)
      if not active.any():
        break
      step = self.direction(grad, values, vectors, scale)
      slope = np.sum(grad * step, axis=1)
      t = np.ones(x.shape[0])
      accepted = ~active
      new_x, new_value, new_grad = x.copy(), value.copy(), grad.copy()
      for _ in range(LINE_SEARCH_HALVINGS):
        trial = x + t[:, None] * step
        trial_value, trial_grad = map(np.asarray, self.value_and_grad(trial))
        noise = NOISE * np.maximum(1.0, np.abs(value))
        armijo = trial_value <= value + 1e-4 * t * slope
        # Below roundoff the risk cannot show a decrease: a smaller gradient is the test.
        flat = ((np.abs(t * slope) <= noise) & (trial_value <= value + noise)
                & (np.linalg.norm(trial_grad, axis=1) < np.linalg.norm(grad, axis=1)))
        take = ~accepted & np.isfinite(trial_value) & (armijo | flat)
        new_x[take], new_value[take], new_grad[take] = trial[take], trial_value[take], \
            trial_grad[take]
        accepted |= take
        if accepted.all():
          break
        t = np.where(accepted, t, 0.5 * t)
      moved = ~np.all(new_x == x, axis=1)
      x, value, grad = new_x, new_value, new_grad
      history.append(x.copy())
      if not moved.any():
        break
    values, vectors, scale = map(np.asarray, self.curvature(x))
    return x, value, grad, values, vectors, scale, history


def _output_profile(objective, output_mask: np.ndarray, steps: int = 2):
  """x -> (x with its outputs re-optimised, R there): Newton on the outputs alone with the
  exact Hessian of that block, pseudo-inverted (null directions stay put). The squared risk
  is quadratic in the outputs at fixed scores (§4), so the first step is exact; the second
  removes its roundoff."""
  outputs = np.flatnonzero(output_mask)

  def newton(x, _):
    def of_outputs(y):
      return objective(x.at[outputs].set(y))

    y = x[outputs]
    grad, hessian = jax.grad(of_outputs)(y), jax.hessian(of_outputs)(y)
    values, vectors = symmetric.symmetric_eigh(0.5 * (hessian + hessian.T))
    floor = 1e-12 * jnp.maximum(1.0, jnp.max(jnp.abs(values)))
    inverse = jnp.where(jnp.abs(values) > floor, 1.0 / jnp.where(values == 0, 1.0, values), 0.0)
    moved = x.at[outputs].set(y - vectors @ (inverse * (vectors.T @ grad)))
    # A step that does not lower R (roundoff, or a point off the grid) is not taken.
    return jnp.where(objective(moved) <= objective(x), moved, x), None

  def profile(x):
    if outputs.size:
      x, _ = jax.lax.scan(newton, x, None, steps)
    return x, objective(x)

  return profile


def _fit_limit(risks: np.ndarray) -> tuple[float, float]:
  """The limit of a sequence R(θ + s_k d), s_k = 2^k, and its error: Aitken's Δ² on the last
  three terms when the differences shrink geometrically, else the last term and the last
  difference times the number of doublings left undone (a pessimistic bound)."""
  differences = -np.diff(risks)
  last = risks[-1]
  if abs(differences[-1]) <= NOISE * max(1.0, abs(last)):
    return float(last), float(max(NOISE, abs(differences[-1])))
  ratio = differences[-1] / differences[-2] if differences[-2] != 0 else np.inf
  if 0.0 < ratio < 0.9:
    tail = differences[-1] * ratio / (1.0 - ratio)
    return float(last - tail), float(abs(tail) + NOISE)
  return float(last), float(np.inf)


def optimum(lang: languages.Language, layout="cls", *,
            partition: partition_lib.Partition | None = None, theta0=None,
            groups: Sequence[str] = GROUPS, num_starts: int = 16, seed: int = 0,
            start_scale: float = 1.0, iterations: int = 200, newton_steps: int = 30,
            route: str = "auto", loss="squared", gtol: float = 1e-10, eig_tol: float = 1e-8,
            agree_tol: float = 1e-9, num_points: int | None = None,
            starts: Sequence[dict] = ()) -> Optimum:
  """The minimum of the population risk R(θ), certified, or its infimum at infinity
  (docs/theory.md §3e; the routes of §3).

  Multi-start L-BFGS, then damped Newton steps with the exact Hessian on every start; the
  best start is certified by ‖∇R‖ and the Hessian's smallest eigenvalue off the softmax's
  shift directions. Where that fails because the optimiser was still moving outwards, R is
  followed along the ray θ* + s·d (s = 1, 2, …, 128) and, if it never rises while the scores
  grow, its limit is extrapolated: "infimum_at_infinity" (see the module docstring). Every
  value comes from a grid that covers θ (the grid grows where a start reaches its edge) and
  is confirmed by lj.population_risk. One compiled L-BFGS program per grid size.

  Args:
    lang: the language (§1b); an exact risk route must support it (§3).
    layout: a lj.models.direct.Layout (§2b), or one of "cls", "cls+first_last", "last",
      "last+first_last".
    partition: token groups of tied parameters (§3b); None for one group per token.
    theta0: per-token parameters of the layout: the first start and the values of the groups
      that are not optimised; None for θ0 = 0.
    groups: the parameter groups optimised, "attention" and/or "output" (§5): ("output",)
      gives the output-only optimum at θ0's α, a quadratic problem (§4).
    num_starts: starts (θ0, then num_starts - 1 seeded draws), at least 1.
    seed: the seed of the draws.
    start_scale: the draws' standard deviation around θ0.
    iterations: L-BFGS iterations per start (in 8 chunks, whose ends feed the ray's direction).
    newton_steps: the most Newton iterations per start.
    route: "auto" or the name of an exact risk route.
    loss: the loss of the risk.
    gtol: the gradient norm a certified point must reach.
    eig_tol: eigenvalues within eig_tol·max(1, max|H|) of 0 count as zero.
    agree_tol: starts within agree_tol·max(1, R) of the best risk agree with it.
    num_points: None to start on the route's default grid and re-size it (risk/coverage.py),
      or a fixed number of quadrature nodes (a point the grid does not cover is NaN, §3a).
    starts: further starts after θ0 and the draws, per-token parameters of the layout (the
      groups not optimised are taken from θ0): e.g. the point a run reached, or the optimum
      of a contained layout widened to this one (lj.models.direct.widen). The certificate
      counts them among the starts.

  Returns:
    An Optimum: status, risk (± risk_error), θ*, ‖∇R‖, the smallest eigenvalue, the starts
    that agree, the ray (direction, R along it) and the grid's coverage.

  Raises:
    ValueError: in one line naming the field: num_starts, iterations, newton_steps, seed or
      num_points below their minimum, start_scale, gtol, eig_tol or agree_tol not > 0, an
      unknown layout, groups or route, theta0 or a start of another layout or shape, or a
      language that no exact route supports.

  Example:
    The output-only optimum at α = 0 is the quadratic problem of §4; at θ0 = 0 the route is
    the Laplace route and the Hessian is H = E[W Wᵀ]:

    >>> found = lj.optimum(lj.occurrence(3), groups=("output",), num_starts=2, iterations=16)
    >>> found.status, found.route, found.agreeing_starts, found.grad_norm <= 1e-10
    ('minimum', 'laplace', 2, True)
    >>> found.min_eigenvalue > 0
    True
  """
  validation.require_float64("lj.optimum")
  languages.check_language(lang, "lj.optimum")
  layout = _layout(layout)
  num_starts = validation.check_int("num_starts", num_starts, 1)
  seed = validation.check_int("seed", seed, 0)
  iterations = validation.check_int("iterations", iterations, 1)
  newton_steps = validation.check_int("newton_steps", newton_steps, 0)
  start_scale = validation.check_real("start_scale", start_scale, minimum=0.0, strict=True)
  for field, value in (("gtol", gtol), ("eig_tol", eig_tol), ("agree_tol", agree_tol)):
    validation.check_real(field, value, minimum=0.0, strict=True)
  groups = tuple(groups) if isinstance(groups, (tuple, list)) else (groups,)
  if not groups or any(group not in GROUPS for group in groups):
    raise ValueError(f"groups must be a non-empty subset of {GROUPS}; got {groups!r}.")
  exact = registry.names("risk", exact=True)
  validation.check_choice("route", route, ("auto", *exact))
  try:
    name = registry.resolve_route(lang, loss, route, layout)
  except ValueError as error:
    raise ValueError(f"lang: lj.optimum needs an exact risk route; {error}") from None
  partition = partition or partition_lib.singletons(lang.d)
  if theta0 is None:
    theta0 = direct.zero_params(lang.d, layout)
  grouped0 = _grouped("theta0", theta0, lang.d, layout, partition)
  given = [ravel_pytree(_grouped(f"starts[{i}]", start, lang.d, layout, partition))[0]
           for i, start in enumerate(starts)]
  free_names = [key for key in grouped0 if direct.PARAM_GROUPS[key] in groups]

  width, sizes = _grid_sizes(lang, partition, layout, name)
  if num_points is not None and sizes != [None]:    # the user fixed the grid: no re-size
    sizes = [validation.check_int("num_points", num_points, 1)]

  def build(num_points):
    return _Problem(lang, layout, partition, loss, name, grouped0, free_names, num_points)

  problem = build(sizes[0])
  x = _starts(problem, num_starts, seed, start_scale, given)

  # L-BFGS, moving to the next grid size while a start ends within a window of the edge.
  chunks = min(8, iterations)
  while True:
    new_x, (trace_x, _) = _lbfgs_program(problem, iterations, chunks)(jnp.asarray(x))
    new_x, trace_x = np.asarray(new_x), np.asarray(trace_x)
    # A start whose point was not covered from the outset (NaN from the first step) keeps
    # its point, to run again on a larger grid.
    finite = np.all(np.isfinite(new_x), axis=1)
    x, trace_x = np.where(finite[:, None], new_x, x), np.where(finite[:, None, None], trace_x,
                                                               x[:, None])
    if problem.num_points is None or problem.num_points == sizes[-1]:
      break
    needed = float(np.max(jax.jit(jax.vmap(problem.needed))(jnp.asarray(x))))
    if needed + width <= problem.num_points:
      break
    # A start ended within a window of the grid's edge: the next size that leaves it one.
    windows = coverage.windows(partition.num_groups, layout)
    problem = build(coverage.size_covering(lang, needed + width, windows) or sizes[-1])

  shifts = _orthonormal_shifts(problem, layout, grouped0)
  newton = _Newton(problem, shifts)
  x, value, grad, eigenvalues, eigenvectors, scale, history = newton.run(x, newton_steps, gtol)
  value = np.where(np.isfinite(value), value, np.inf)
  best = int(np.argmin(value))
  best_risk = float(value[best])
  agreeing = int(np.sum(value <= best_risk + agree_tol * max(1.0, abs(best_risk))))
  grad_norm = float(np.linalg.norm(grad[best]))
  min_eigenvalue = float(eigenvalues[best][0])
  zero_band = eig_tol * max(1.0, float(scale[best]))
  x_best = x[best]

  # The ray moves the scores only: the direction the optimiser's scores were still moving in
  # (second half of L-BFGS and Newton), else the flattest eigenvector's scores; off the
  # shift directions, unit norm. At each point of the ray the outputs are re-optimised
  # (`_output_profile`): R is the profile min over the outputs at those scores.
  attention = np.asarray(ravel_pytree({key: jnp.full(jnp.shape(value), direct.PARAM_GROUPS[
      key] == "attention") for key, value in grouped0.items()})[0])[problem.free]
  candidates = []
  for vector in (x_best - trace_x[best, (chunks - 1) // 2], eigenvectors[best][:, 0],
                 -eigenvectors[best][:, 0]):
    vector = np.asarray(newton.projector) @ np.where(attention, vector, 0.0)
    if np.linalg.norm(vector) > 1e-8:
      candidates.append(vector / np.linalg.norm(vector))

  certified = grad_norm <= gtol and min_eigenvalue > zero_band
  direction, ray_risks, status, ray_problem = None, (), None, problem
  risk, risk_error, x_report = best_risk, NOISE, x_best
  if not certified:
    # The largest grid: it covers every θ (§3a).
    ray_problem = problem if problem.num_points == sizes[-1] else build(sizes[-1])
    ray_risk = jax.jit(jax.vmap(_output_profile(ray_problem.objective, ~attention)))
    spread_of = jax.jit(jax.vmap(lambda z: score_spread(ray_problem.params(z))))
    steps = 2.0 ** np.arange(RAY_POINTS)
    start_spread = float(spread_of(x_best[None])[0])
    for candidate in candidates:
      points, risks = map(np.asarray, ray_risk(
          jnp.asarray(x_best[None] + steps[:, None] * candidate[None])))
      spreads = np.asarray(spread_of(jnp.asarray(points)))
      noise = NOISE * max(1.0, abs(best_risk))
      never_rises = (np.all(np.isfinite(risks)) and risks[0] <= best_risk + noise
                     and np.all(np.diff(risks) <= noise))
      # The scores grow without bound along the ray: the spread rises linearly in s.
      growing = spreads[-1] - spreads[-2] > 1e-3 * (steps[-1] - steps[-2]) and (
          spreads[-1] > start_spread + 1.0)
      if never_rises and growing:
        direction, ray_risks = candidate, tuple(float(r) for r in risks)
        risk, risk_error = _fit_limit(np.concatenate([[best_risk], risks]))
        x_report, status = points[-1], "infimum_at_infinity"
        break
    # The optimiser's own path: where no ray from θ* stays flat (θ* sits where the softmax
    # is saturated, and a straight ray soon unsaturates some other gap), the run itself
    # shows the runaway: no certificate, the spread grown past SATURATED over the second
    # half of the run and still growing, the risk not higher. Its error: the decrease over
    # that half, which bounds what is left when the decrease shrinks geometrically.
    middle = trace_x[best, (chunks - 1) // 2]
    mid_spread = float(spread_of(middle[None])[0])
    mid_risk = float(jax.jit(ray_problem.objective)(jnp.asarray(middle)))
    if (status is None and start_spread > SATURATED
        and start_spread >= mid_spread + 1.0 and best_risk <= mid_risk + NOISE):
      status, risk_error = "infimum_at_infinity", max(NOISE, mid_risk - best_risk)
  if status is None:
    if certified:
      status = "minimum"
    elif grad_norm <= gtol:
      status = "saddle" if min_eigenvalue < -zero_band else "degenerate"
    else:
      status = "not_converged"

  final_problem = ray_problem if status == "infimum_at_infinity" else problem
  covered = bool(jax.jit(final_problem.report)(jnp.asarray(x_report))[1])
  theta = direct.expand_params(partition, problem.params(jnp.asarray(x_report)))
  # The value again on a grid sized to θ (lj.population_risk), independent of the ladder.
  confirmed = evaluate.population_risk(lang, theta, loss=loss, route=name).value
  return Optimum(
      status=status, risk=risk, risk_error=risk_error,
      theta={key: np.asarray(value) for key, value in theta.items()},
      grad_norm=grad_norm, min_eigenvalue=min_eigenvalue, agreeing_starts=agreeing,
      num_starts=num_starts + len(given), agree_tol=agree_tol,
      direction=None if direction is None else {
          key: np.asarray(value) for key, value in direct.expand_params(
              partition, problem.unravel(jnp.zeros_like(problem.base).at[problem.free].set(
                  jnp.asarray(direction)))).items()},
      ray_risks=ray_risks, score_spread=float(score_spread(theta)), grid_covered=covered,
      grid_points=int(final_problem.num_points or 0), confirmed_risk=float(confirmed),
      route=name, layout=layout)


def _orthonormal_shifts(problem: _Problem, layout: direct.Layout, grouped0) -> np.ndarray:
  """The shift directions restricted to the free parameters, orthonormal columns (n, k)."""
  columns = []
  for shift in _shift_directions(grouped0, layout):
    flat = np.asarray(ravel_pytree(shift)[0])[problem.free]
    if np.any(flat):
      columns.append(flat / np.linalg.norm(flat))
  return np.stack(columns, axis=1) if columns else np.zeros((problem.free.size, 0))


__all__ = ["GROUPS", "LAYOUTS", "Optimum", "STATUSES", "optimum", "score_spread"]
