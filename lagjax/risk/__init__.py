"""Population risk by four routes that must agree (docs/theory.md section 3).

`risk_fn` builds a route once (the expensive setup) and returns a `Route`
whose `risk(params)` is jittable and differentiable. The routes are Laplace (§3a),
lattice (§3b), sampled (§3c) and transfer (§3d), in the registry `ROUTES`.
`population_risk`, `exact_error`, `error_rate` and `sampled_risk` are eager
conveniences that tie concrete parameters into their coarsest groups, size the
route and evaluate it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import numpy as np

from lagjax import validation
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import (
    automaton_error,
    base,
    erf_slr,
    error,
    laplace,
    lattice,
    moments,
    sampled,
    transfer,
)
from lagjax.risk.base import LOSSES, Route, get_loss


class RouteSpec(NamedTuple):
  """A route of the registry `ROUTES`: what it supports and how it is built (§3).

  Every route computes the risk of the direct (α, β) model of docs/theory.md §2, with or
  without CLS; any_layout routes also that of its last-token query and position tables
  (§2b), reading which from the params.

  Attributes:
    supports (Callable): (lang, loss) -> None, or one line saying what the language or
      loss lacks (§1b).
    build (Callable): (lang, partition, loss, cls, key, options) -> Route.
    exact (bool): whether the route is exact (with a certified or quadrature bound) rather
      than a Monte Carlo estimate; only exact routes are taken by route="auto".
    any_layout (bool): whether the route also computes the last-token query and the
      position tables (§2b).

  Example:
    >>> spec = lj.risk.ROUTES["laplace"]
    >>> spec.exact, spec.any_layout
    (True, False)
    >>> spec.supports(lj.occurrence(4), "logistic")
    "route 'laplace' is exact for loss 'squared' only; got loss 'logistic'"
  """

  supports: Callable
  build: Callable
  exact: bool
  any_layout: bool = False


def _build_sampled(lang, partition, loss, cls, key, options):
  del cls
  if key is None:
    raise ValueError("route 'sampled' needs a PRNG key: risk_fn(..., key=jax.random.key(0)).")
  return sampled.build(key, lang, partition, loss=loss, **options)


ROUTES = {
    "laplace": RouteSpec(laplace.supports, lambda lang, partition, loss, cls, key, options:
                         laplace.build(lang, partition, cls=cls, **options), exact=True),
    "lattice": RouteSpec(lattice.supports, lambda lang, partition, loss, cls, key, options:
                         lattice.build(lang, partition, loss=loss, **options), exact=True),
    "transfer": RouteSpec(transfer.supports, lambda lang, partition, loss, cls, key, options:
                          transfer.build(lang, partition, cls=cls, **options), exact=True,
                          any_layout=True),
    "sampled": RouteSpec(sampled.supports, _build_sampled, exact=False, any_layout=True),
}
# "auto" takes the first exact route, in this order, that supports the language and loss.
AUTO_ORDER = ("laplace", "lattice", "transfer")
# Routes that integrate in x = log t on the Laplace route's merged windows (§3a, §3d).
QUADRATURE_ROUTES = ("laplace", "transfer")


def _supports(name: str, lang, loss, layout: direct.Layout) -> str | None:
  spec = ROUTES[name]
  if not (layout.plain or spec.any_layout):
    return (f"route {name!r} computes the plain model (CLS query, no position tables); got "
            f"query {layout.query!r}, positions {layout.positions!r}")
  return spec.supports(lang, loss)


def resolve_route(lang: languages.Language, loss, route: str,
                  layout: direct.Layout = direct.PLAIN) -> str:
  """The route to use (docs/theory.md §3): `route` itself if it supports (lang, loss, layout),
  or for "auto" the first exact route of AUTO_ORDER that does.

  Args:
    lang: the language (§1b).
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    route: "auto" or a name of ROUTES.
    layout: the model's parts, direct.Layout (§2b); routes that are not any_layout
      compute only the plain model.

  Returns:
    The route's name.

  Raises:
    ValueError: in one line naming the route, the language (its describe()) and what is
      missing; for "auto", the reason of every exact route, and a pointer to
      route='sampled'.

  Example:
    >>> lj.risk.resolve_route(lj.occurrence(4), "squared", "auto")
    'laplace'
    >>> lj.risk.resolve_route(lj.occurrence(4), "logistic", "auto")
    'lattice'
    >>> lj.risk.resolve_route(lj.data.regular_builtins.even_pairs(), "squared", "auto")
    'transfer'
  """
  languages.check_language(lang, "a risk route")
  get_loss(loss)
  if route == "auto":
    reasons = {name: _supports(name, lang, loss, layout) for name in AUTO_ORDER}
    chosen = next((name for name, reason in reasons.items() if reason is None), None)
    if chosen is None:
      raise ValueError(f"no exact route supports {lang.describe()} with loss {loss!r}: "
                       + "; ".join(reasons.values()) + ". Use route='sampled'.")
    return chosen
  validation.check_choice("route", route, ("auto", *ROUTES))
  reason = _supports(route, lang, loss, layout)
  if reason is not None:
    raise ValueError(f"route {route!r} does not support {lang.describe()}: {reason}.")
  return route


def risk_fn(lang: languages.Language, *, loss="squared", route: str = "auto",
            partition: partition_lib.Partition | None = None, cls: bool = False,
            query: str = "cls", positions: str = "none", key=None, **options) -> Route:
  """Builds a risk route on parameters tied on token groups `partition` (None: one per token).

  The route is the one `resolve_route` picks (docs/theory.md §3); building it is the
  expensive setup, its `risk(params)` is then jittable and differentiable.

  Args:
    lang: the language (§1b).
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    route: "auto" (the first exact route that supports lang and loss), "laplace",
      "lattice", "transfer" or "sampled".
    partition: token groups of tied parameters.
    cls: whether params carry the CLS scalars (laplace needs to know; the others read params).
    query, positions: the model's query ("cls" or "last") and position tables ("none" or
      "first_last"), docs/theory.md §2b; only the transfer and sampled routes take others
      than the plain "cls", "none".
    key: PRNG key, required by the sampled route.
    **options: passed to the route's builder (step, num_points; tol, max_vectors; n_samples).

  Returns:
    A Route (`risk.base.Route`) whose risk takes "alpha" and "beta" of shape (G,) on the
    G token groups of `partition`, plus the CLS scalars and the tables of the layout.

  Example:
    At θ = 0, f ≡ 0, so R = ½ and the output gradient is (-1/d, 1/(d(d-1)), …) (§4):

    >>> route = lj.risk_fn(lj.occurrence(4))
    >>> risk, grads = jax.jit(jax.value_and_grad(route.risk))(lj.init_params(4))
    >>> route.name, round(float(risk), 6)
    ('laplace', 0.5)
    >>> np.round(np.asarray(grads["beta"]), 6).tolist()
    [-0.25, 0.083333, 0.083333, 0.083333]
  """
  validation.require_float64("lj.risk_fn")
  validation.check_choice("query", query, direct.QUERIES)
  validation.check_choice("positions", positions, direct.POSITIONS)
  name = resolve_route(lang, loss, route, direct.Layout(bool(cls), query, positions))
  return ROUTES[name].build(lang, partition, loss, cls, key, options)


@dataclasses.dataclass(frozen=True)
class RiskResult:
  """A risk (or 0-1 error) value with the route that computed it and its diagnostics (§3).

  `float(result)` is the value; the repr lists the diagnostics.

  Attributes:
    value (float): the risk R(θ) or the 0-1 error.
    route (str): the route that computed it ("laplace", "lattice", "transfer", "sampled",
      or for the error "threshold", "automaton").
    details (dict): the route's diagnostics: grid coverage (quadrature routes), the
      certified bound ("risk_bound", "error_bound"), the standard error ("stderr").

  Example:
    >>> result = lj.risk.RiskResult(0.5, "threshold", {"error_bound": 7e-13})
    >>> float(result), result.route
    (0.5, 'threshold')
    >>> result
    RiskResult(0.5, route='threshold', error_bound=7e-13)
  """

  value: float
  route: str
  details: dict

  def __float__(self) -> float:
    return self.value

  def __repr__(self) -> str:
    extra = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                      for k, v in self.details.items())
    return f"RiskResult({self.value!r}, route={self.route!r}, {extra})"


@functools.lru_cache(maxsize=64)
def _cached_report(lang, partition, loss, route, layout, options):
  return jax.jit(risk_fn(lang, loss=loss, route=route, partition=partition, **layout._asdict(),
                         **dict(options)).report)


@functools.lru_cache(maxsize=16)
def _cached_threshold(lang, partition, tol):
  return jax.jit(error.build(lang, partition, tol=tol))


@functools.lru_cache(maxsize=16)
def _cached_automaton_error(lang, partition, tol, layout):
  return jax.jit(automaton_error.build(lang, partition, tol=tol, layout=layout))


def _grouped(lang, theta):
  direct.check_params(theta, lang.d)
  partition = partition_lib.of_params(lang, theta)
  return partition, direct.group_params(partition, theta)


def _result(report: dict, name: str, theta) -> RiskResult:
  """The RiskResult of a report; a risk that is not finite in float64 although θ is says
  so in details["overflow"], naming the parameter with the largest magnitude."""
  value = report.pop("risk")
  if not math.isfinite(value):
    key, size = max(((k, float(np.max(np.abs(np.asarray(v))))) for k, v in theta.items()),
                    key=lambda item: item[1])
    report["overflow"] = (f"the risk overflows float64: {key} reaches |value| {size:.3g}; "
                          "values of order 1e150 square to inf")
  return RiskResult(value, name, report)


def _as_floats(report: dict) -> dict:
  return {k: (bool(v) if np.asarray(v).dtype == bool else float(v)) for k, v in report.items()}


def population_risk(lang: languages.Language, theta, *, loss="squared", route: str = "auto",
                    tol: float = 1e-12, key=None, n_samples: int = 10**5) -> RiskResult:
  """Population risk R(θ) = E ℓ(f_θ(w), y(w)) at concrete θ (per-token params).

  θ is tied into its coarsest token groups first, so the cost depends on the number
  of distinct (α, β) values, not on d. "auto" takes the first exact route that
  supports the language and loss: the Laplace route (squared loss, presence labels)
  with a grid sized to θ's score clusters, rounded up to a power of two so that at
  most 1 + log2(G) grid sizes (compilations) serve every θ on G token groups, else
  the lattice route, whose certified truncation bound is in `details["risk_bound"]`,
  else the transfer route (squared loss, automaton labels), sized like the Laplace
  route.
  route="sampled" estimates R on n_samples strings drawn with `key` (default key 0)
  and gives the standard error in `details["stderr"]` (docs/theory.md §3, §3c).

  Args:
    lang: the language (§1b).
    theta: concrete per-token params {"alpha": (d,), "beta": (d,)}, with the CLS scalars
      or position tables of any layout (§2b).
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    route: "auto", "laplace", "lattice", "transfer" or "sampled".
    tol: the probability mass the lattice route may leave out.
    key: PRNG key of the sampled route.
    n_samples: strings drawn by the sampled route.

  Returns:
    A RiskResult with the risk, the route, and the route's diagnostics in details.

  Example:
    At θ = 0, f ≡ 0, so R = ½ E y² = ½:

    >>> result = lj.population_risk(lj.occurrence(4), lj.init_params(4))
    >>> round(result.value, 6), result.route, result.details["grid_covered"]
    (0.5, 'laplace', True)
  """
  validation.require_float64("lj.population_risk")
  languages.check_language(lang, "lj.population_risk")
  partition, grouped = _grouped(lang, theta)
  layout = direct.layout(theta)
  name = resolve_route(lang, loss, route, layout)
  if name == "sampled":
    key = jax.random.key(0) if key is None else key
    report = _as_floats(sampled.build(key, lang, partition, loss=loss,
                                      n_samples=n_samples).report(grouped))
    return _result(report, name, theta)
  if name in QUADRATURE_ROUTES:
    width = laplace.window_width(lang)
    needed = (laplace.points_needed(lang, grouped) if name == "laplace"
              else transfer.points_needed(lang, grouped))
    clusters = math.ceil(needed / width)
    windows = transfer.num_windows(partition.num_groups, layout)
    clusters = min(1 << (clusters - 1).bit_length(), windows)
    options = (("num_points", width * clusters),)
  else:
    options = (("tol", tol),)
  report = _as_floats(_cached_report(lang, partition, loss, name, layout, options)(grouped))
  return _result(report, name, theta)


def exact_error(lang: languages.Language, theta, *, tol: float = 1e-12) -> RiskResult | None:
  """0-1 error P(sign f ≠ y) by an exact route, or None where none is feasible.

  The route is error.choose's: "threshold" (y = +1 iff a token of L occurs, θ tied
  on the two token groups, O(N)), else "lattice" (enumeration), else "automaton" (a DP
  for regular languages on at most 3 token groups), each with the certified tail bound
  in details["error_bound"] (docs/theory.md §3b, §3d). Compiled once per (language,
  partition, tol).

  Args:
    lang: the language (§1b).
    theta: concrete per-token params, of any layout (§2b).
    tol: the probability mass the route may leave out (its certified bound).

  Returns:
    A RiskResult with the error and details["error_bound"], or None.

  Example:
    With β = (1, 0, 0, 0) and α = 0, f = c_a/n: positive on every string with an a,
    and 0, an error (sign 0 counts as one), on every other; so the error is P(y = -1) = ½.

    >>> theta = {"alpha": jnp.zeros(4), "beta": jnp.array([1.0, 0.0, 0.0, 0.0])}
    >>> result = lj.risk.exact_error(lj.occurrence(4), theta)
    >>> round(result.value, 6), result.route, result.details["error_bound"] < 1e-12
    (0.5, 'threshold', True)
  """
  validation.require_float64("lj.risk.exact_error")
  languages.check_language(lang, "lj.risk.exact_error")
  return _exact_error(lang, *_grouped(lang, theta), tol)


def _exact_error(lang, partition, grouped, tol) -> RiskResult | None:
  """exact_error on θ already tied into `partition` (grouped params)."""
  layout = direct.layout(grouped)
  name = error.choose(lang, partition, tol, layout)
  if name == "threshold":
    value, bound = _cached_threshold(lang, partition, tol)(grouped)
    return RiskResult(float(value), name, {"error_bound": float(bound)})
  if name == "lattice":
    report = _as_floats(_cached_report(lang, partition, "squared", name, layout,
                                       (("tol", tol),))(grouped))
    return RiskResult(report["error"], name, {"error_bound": report["error_bound"]})
  if name == "automaton":
    value, bound = _cached_automaton_error(lang, partition, tol, layout)(grouped)
    return RiskResult(float(value), name, {"error_bound": float(bound)})
  return None


def error_rate(lang: languages.Language, theta, *, key=None, n_samples: int = 10**5,
               tol: float = 1e-12) -> RiskResult:
  """0-1 error P(sign f ≠ y): exact where feasible (`exact_error`), else sampled (§3b, §3c).

  The result's `route` says which; a sampled value carries its standard error.

  Args:
    lang: the language (§1b).
    theta: concrete per-token params, of any layout (§2b).
    key: PRNG key of the sample (default key 0), where no exact route is feasible.
    n_samples: strings in that sample.
    tol: the probability mass an exact route may leave out.

  Returns:
    A RiskResult with the error, its route, and details["error_bound"] (exact) or
    details["stderr"] and details["n_samples"] (sampled).

  Example:
    At θ = 0, f ≡ 0 and sign 0 counts as an error, so every string is one:

    >>> result = lj.error_rate(lj.occurrence(4), lj.init_params(4))
    >>> round(result.value, 6), result.route
    (1.0, 'threshold')
  """
  validation.require_float64("lj.error_rate")
  languages.check_language(lang, "lj.error_rate")
  partition, grouped = _grouped(lang, theta)  # once, for the exact and the sampled route
  exact = _exact_error(lang, partition, grouped, tol)
  if exact is not None:
    return exact
  key = jax.random.key(0) if key is None else key
  report = _as_floats(sampled.build(key, lang, partition, n_samples=n_samples).report(grouped))
  return RiskResult(report["error"], "sampled", {"stderr": report["error_stderr"],
                                                 "n_samples": report["n_samples"]})


def sampled_risk(key, lang: languages.Language, theta, *, n_samples: int = 10**5,
                 loss="squared") -> tuple[float, float]:
  """Monte Carlo estimate of R(θ) on n_samples fresh strings (docs/theory.md §3c).

  R̂ = (1/N) Σ_j ℓ_j, with standard error √((mean(ℓ²) - R̂²)/(N - 1)).

  Args:
    key: PRNG key of the sample.
    lang: the language (§1b).
    theta: concrete per-token params, of any layout (§2b).
    n_samples: N, the strings drawn.
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.

  Returns:
    (mean, standard error), two floats.

  Example:
    At θ = 0 every string's loss is ½(0 - y)² = ½, so the estimate is exact:

    >>> lang = lj.occurrence(4, length=lj.fixed(3))
    >>> lj.sampled_risk(jax.random.key(0), lang, lj.init_params(4), n_samples=100)
    (0.5, 0.0)
  """
  validation.require_float64("lj.sampled_risk")
  languages.check_language(lang, "lj.sampled_risk")
  get_loss(loss)
  partition, grouped = _grouped(lang, theta)
  report = sampled.build(key, lang, partition, loss=loss, n_samples=n_samples).report(grouped)
  return float(report["risk"]), float(report["stderr"])


__all__ = ["AUTO_ORDER", "LOSSES", "ROUTES", "RiskResult", "Route", "RouteSpec",
           "automaton_error", "base", "erf_slr", "error_rate", "exact_error", "laplace",
           "lattice", "moments", "population_risk", "resolve_route", "risk_fn", "sampled",
           "sampled_risk", "transfer"]
