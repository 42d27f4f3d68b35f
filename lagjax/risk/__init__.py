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

import jax
import numpy as np

from lagjax import validation
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import base, erf_slr, error, laplace, lattice, sampled
from lagjax.risk.base import LOSSES, Route, get_loss

ROUTES = {"laplace": laplace.build, "lattice": lattice.build, "sampled": sampled.build}


def resolve_route(loss, route: str) -> str:
  """Checks loss and route names; "auto" is laplace for squared loss, lattice otherwise."""
  get_loss(loss)
  if route == "auto":
    return "laplace" if loss == "squared" else "lattice"
  if route not in ROUTES:
    raise ValueError(f"unknown route {route!r}; known routes: {['auto', *sorted(ROUTES)]}.")
  if route == "laplace" and loss != "squared":
    raise ValueError(f"route 'laplace' is exact for loss 'squared' only; got loss {loss!r}. "
                     "Use route='lattice' or route='sampled' for other losses.")
  return route


def _check_language(lang) -> None:
  if not isinstance(lang, languages.Language):
    raise ValueError(f"lang must be a Language (lj.occurrence, lj.any_of, lj.all_of); got "
                     f"{type(lang).__name__}.")


def risk_fn(lang: languages.Language, *, loss="squared", route: str = "auto",
            partition: partition_lib.Partition | None = None, cls: bool = False, key=None,
            **options) -> Route:
  """Builds a risk route on parameters grouped by `partition` (None: one group per token).

  Args:
    lang: the language.
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    route: "auto", "laplace", "lattice" or "sampled".
    partition: groups of tied tokens.
    cls: whether params carry the CLS scalars (laplace needs to know; the others read params).
    key: PRNG key, required by the sampled route.
    **options: passed to the route's builder (step, num_points; tol, max_vectors; n_samples).
  """
  validation.require_float64("lj.risk_fn")
  _check_language(lang)
  name = resolve_route(loss, route)
  if name == "laplace":
    return laplace.build(lang, partition, cls=cls, **options)
  if name == "lattice":
    return lattice.build(lang, partition, loss=loss, **options)
  if key is None:
    raise ValueError("route 'sampled' needs a PRNG key: risk_fn(..., key=jax.random.key(0)).")
  return sampled.build(key, lang, partition, loss=loss, **options)


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
def _cached_report(lang, partition, loss, route, cls, options):
  return jax.jit(risk_fn(lang, loss=loss, route=route, partition=partition, cls=cls,
                         **dict(options)).report)


@functools.lru_cache(maxsize=16)
def _cached_threshold(lang, partition, tol):
  return jax.jit(error.build(lang, partition, tol=tol))


def _grouped(lang, theta):
  direct.check_params(theta, lang.d)
  partition = partition_lib.of_params(lang, theta)
  grouped = dict(theta, alpha=partition.group(np.asarray(theta["alpha"])),
                 beta=partition.group(np.asarray(theta["beta"])))
  return partition, grouped


def _as_floats(report: dict) -> dict:
  return {k: (bool(v) if np.asarray(v).dtype == bool else float(v)) for k, v in report.items()}


def population_risk(lang: languages.Language, theta, *, loss="squared", route: str = "auto",
                    tol: float = 1e-12) -> RiskResult:
  """Exact population risk R(θ) = E ℓ(f_θ(w), y(w)) at concrete θ (per-token params).

  θ is tied into its coarsest groups first, so the cost depends on the number of
  distinct (α, β) values, not on d. Squared loss uses the Laplace route with a
  grid sized to θ's score clusters, rounded up to a power of two so that at most
  1 + log2(G) grid sizes (compilations) serve every θ on G groups; other losses
  use the lattice route, whose certified truncation bound is in `details["risk_bound"]`.
  """
  validation.require_float64("lj.population_risk")
  _check_language(lang)
  name = resolve_route(loss, route)
  if name == "sampled":
    raise ValueError("population_risk is exact; use lj.sampled_risk for the sampled route.")
  partition, grouped = _grouped(lang, theta)
  cls = direct.has_cls(theta)
  if name == "laplace":
    width = laplace.window_width(lang)
    clusters = math.ceil(laplace.points_needed(lang, grouped) / width)
    clusters = min(1 << (clusters - 1).bit_length(), partition.num_groups + int(cls))
    options = (("num_points", width * clusters),)
  else:
    options = (("tol", tol),)
  report = _as_floats(_cached_report(lang, partition, loss, name, cls, options)(grouped))
  return RiskResult(report.pop("risk"), name, report)


def exact_error(lang: languages.Language, theta, *, tol: float = 1e-12) -> RiskResult | None:
  """0-1 error P(sign f ≠ y) by an exact route, or None where none is feasible.

  Routes: "threshold" (θ tied in the two groups of occurrence/any_of, O(N)), then
  "lattice" (enumeration), both with the certified tail bound in
  details["error_bound"]. Compiled once per (language, partition, tol).
  """
  validation.require_float64("lj.risk.exact_error")
  _check_language(lang)
  return _exact_error(lang, *_grouped(lang, theta), tol)


def _exact_error(lang, partition, grouped, tol) -> RiskResult | None:
  """exact_error on θ already tied into `partition` (grouped params)."""
  if error.supports(lang, partition) and lattice.lengths_lib.truncation_length(
      lang.length, tol) <= error.MAX_TABLE_LENGTH:
    value, bound = _cached_threshold(lang, partition, tol)(grouped)
    return RiskResult(float(value), "threshold", {"error_bound": float(bound)})
  size = lattice.num_count_vectors(partition.num_groups,
                                   lattice.lengths_lib.truncation_length(lang.length, tol))
  if size <= lattice.MAX_VECTORS:
    report = _as_floats(_cached_report(lang, partition, "squared", "lattice",
                                       direct.has_cls(grouped), (("tol", tol),))(grouped))
    return RiskResult(report["error"], "lattice", {"error_bound": report["error_bound"]})
  return None


def error_rate(lang: languages.Language, theta, *, key=None, n_samples: int = 10**5,
               tol: float = 1e-12) -> RiskResult:
  """0-1 error P(sign f ≠ y): exact where feasible (`exact_error`), else sampled.

  The result's `route` says which; a sampled value carries its standard error.
  """
  validation.require_float64("lj.error_rate")
  _check_language(lang)
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
  _check_language(lang)
  get_loss(loss)
  partition, grouped = _grouped(lang, theta)
  report = sampled.build(key, lang, partition, loss=loss, n_samples=n_samples).report(grouped)
  return float(report["risk"]), float(report["stderr"])


__all__ = ["LOSSES", "ROUTES", "Route", "RiskResult", "base", "erf_slr", "error_rate",
           "exact_error", "laplace", "lattice", "population_risk", "resolve_route", "risk_fn",
           "sampled", "sampled_risk"]
