"""Population risk by three routes that must agree (docs/theory.md section 3).

`risk_fn` builds a route once (the expensive setup) and returns a `Route`
whose `risk(params)` is jittable and differentiable. `population_risk`,
`error_rate` and `sampled_risk` are eager conveniences that tie concrete
parameters into their coarsest groups, size the route and evaluate it.
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
  """A route of the registry: what it supports and how it is built.

  supports(lang, loss) -> None, or one line saying what the language or loss lacks;
  build(lang, partition, loss, cls, key, options) -> Route. Every route computes
  the risk of the direct (α, β) model of docs/theory.md §2, with or without CLS;
  any_layout routes also that of its last-token query and position tables (§2b),
  reading which from the params.
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
  """The route to use: `route` itself if it supports (lang, loss, layout), or for "auto" the
  first exact route of AUTO_ORDER that does; otherwise one line naming what is missing."""
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

  Args:
    lang: the language.
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
  """
  validation.require_float64("lj.risk_fn")
  validation.check_choice("query", query, direct.QUERIES)
  validation.check_choice("positions", positions, direct.POSITIONS)
  name = resolve_route(lang, loss, route, direct.Layout(bool(cls), query, positions))
  return ROUTES[name].build(lang, partition, loss, cls, key, options)


@dataclasses.dataclass(frozen=True)
class RiskResult:
  """A risk (or 0-1 error) value with the route that computed it and its diagnostics."""

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
  and gives the standard error in `details["stderr"]`.
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
  in details["error_bound"]. Compiled once per (language,
  partition, tol).
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
  """0-1 error P(sign f ≠ y): exact where feasible (`exact_error`), else sampled.

  The result's `route` says which; a sampled value carries its standard error.
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
  """Monte Carlo estimate of R(θ) on n_samples fresh strings: (mean, standard error)."""
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
