"""The eager conveniences: the risk and the 0-1 error at concrete θ (docs/theory.md section 3).

`population_risk`, `exact_error`, `error_rate` and `sampled_risk` tie concrete parameters into
their coarsest token groups, ask the registry (risk/registry.py) for the route, size it and
evaluate it, and return a `RiskResult` that names the risk route and the error route
separately.
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
from lagjax.risk import coverage, registry
from lagjax.risk.base import get_loss


@dataclasses.dataclass(frozen=True)
class RiskResult:
  """A risk or a 0-1 error value, the route that computed it and its diagnostics (§3).

  `float(result)` is the value; the repr lists the route and the diagnostics. A risk names
  its route in `risk_route`, a 0-1 error in `error_route`; the other is None.

  Attributes:
    value (float): the risk R(θ) or the 0-1 error.
    risk_route (str): the route of a risk ("laplace", "lattice", "transfer", "sampled", ...),
      or None for an error.
    error_route (str): the route of a 0-1 error ("threshold", "lattice", "automaton",
      "sampled", ...), or None for a risk.
    details (dict): the route's diagnostics: grid coverage (quadrature routes), the
      certified bound ("risk_bound", "error_bound"), the standard error ("stderr").

  Example:
    >>> result = lj.risk.RiskResult(0.5, error_route="threshold",
    ...                             details={"error_bound": 7e-13})
    >>> float(result), result.error_route, result.risk_route
    (0.5, 'threshold', None)
    >>> result
    RiskResult(0.5, error_route='threshold', error_bound=7e-13)
  """

  value: float
  _: dataclasses.KW_ONLY
  risk_route: str | None = None
  error_route: str | None = None
  details: dict = dataclasses.field(default_factory=dict)

  def __float__(self) -> float:
    return self.value

  def __repr__(self) -> str:
    routes = [f"{field}={getattr(self, field)!r}" for field in ("risk_route", "error_route")
              if getattr(self, field) is not None]
    extra = [f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
             for k, v in self.details.items()]
    return f"RiskResult({', '.join([repr(self.value), *routes, *extra])})"


@functools.lru_cache(maxsize=64)
def _cached_report(lang, partition, loss, route, layout, options):
  """The jitted report of `route` (a registered RouteSpec, keyed by identity, so a route
  registered anew is built anew), built once per (language, partition, loss, route, layout,
  options): one compilation serves every θ of that shape."""
  return jax.jit(route.build(lang, partition, loss=loss, layout=layout, **dict(options)).report)


def _grouped(lang, theta):
  direct.check_params(theta, lang.d)
  partition = partition_lib.of_params(lang, theta)
  return partition, direct.group_params(partition, theta)


def _result(report: dict, name: str, theta) -> RiskResult:
  """The RiskResult of a report; a risk that is not finite in float64 although θ is says
  so in details["overflow"], naming the parameter with the largest magnitude."""
  value = report.pop("risk")
  if not report.get("grid_covered", True):
    # population_risk sizes the grid to θ, so only scores beyond any exact grid get here.
    report["grid"] = coverage.describe(report["grid_points_needed"])
  elif not math.isfinite(value):
    key, size = max(((k, float(np.max(np.abs(np.asarray(v))))) for k, v in theta.items()),
                    key=lambda item: item[1])
    report["overflow"] = (f"the risk overflows float64: {key} reaches |value| {size:.3g}; "
                          "values of order 1e150 square to inf")
  return RiskResult(value, risk_route=name, details=report)


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
    A RiskResult with the risk, its risk_route, and the route's diagnostics in details;
    NaN, with details["grid"] saying why, where θ's scores spread beyond any exact
    quadrature grid (risk/coverage.py).

  Example:
    At θ = 0, f ≡ 0, so R = ½ E y² = ½:

    >>> result = lj.population_risk(lj.occurrence(4), lj.init_params(4))
    >>> round(result.value, 6), result.risk_route, result.details["grid_covered"]
    (0.5, 'laplace', True)
  """
  validation.require_float64("lj.population_risk")
  languages.check_language(lang, "lj.population_risk")
  partition, grouped = _grouped(lang, theta)
  layout = direct.layout(theta)
  name = registry.resolve_route(lang, loss, route, layout)
  spec = registry.ROUTES[name]
  if not spec.exact:  # an estimate on a fresh sample: not cached, as every key differs
    key = jax.random.key(0) if key is None else key
    report = _as_floats(spec.build(lang, partition, loss=loss, layout=layout, key=key,
                                   n_samples=n_samples).report(grouped))
    return _result(report, name, theta)
  if spec.quadrature:
    # The grid holds the windows θ's score clusters need, rounded up to a power of two
    # (coverage.ladder: at most 1 + log2(windows) grid sizes, hence compilations, serve
    # every θ). Scores beyond any exact grid get the largest, and a NaN risk.
    windows = coverage.windows(partition.num_groups, layout)
    size = coverage.size_covering(lang, coverage.needed(lang, grouped), windows)
    options = (("num_points", size or coverage.ladder(lang, windows)[-1]),)
  else:
    options = (("tol", tol),)
  report = _as_floats(_cached_report(lang, partition, loss, spec, layout, options)(grouped))
  return _result(report, name, theta)


def exact_error(lang: languages.Language, theta, *, tol: float = 1e-12) -> RiskResult | None:
  """0-1 error P(sign f ≠ y) by an exact route, or None where none is feasible.

  The route is the registry's first exact route for the error (error.choose):
  "threshold" (y = +1 iff a token of L occurs, θ tied on the two token groups, O(N)), else
  "lattice" (enumeration), else "automaton" (a DP for regular languages on at most 3 token
  groups), each with the certified tail bound in details["error_bound"] (docs/theory.md
  §3b, §3d). Compiled once per (language, partition, tol).

  Args:
    lang: the language (§1b).
    theta: concrete per-token params, of any layout (§2b).
    tol: the probability mass the route may leave out (its certified bound).

  Returns:
    A RiskResult with the error, its error_route and details["error_bound"], or None.

  Example:
    With β = (1, 0, 0, 0) and α = 0, f = c_a/n: positive on every string with an a,
    and 0, an error (sign 0 counts as one), on every other; so the error is P(y = -1) = ½.

    >>> theta = {"alpha": jnp.zeros(4), "beta": jnp.array([1.0, 0.0, 0.0, 0.0])}
    >>> result = lj.risk.exact_error(lj.occurrence(4), theta)
    >>> round(result.value, 6), result.error_route, result.details["error_bound"] < 1e-12
    (0.5, 'threshold', True)
  """
  validation.require_float64("lj.risk.exact_error")
  languages.check_language(lang, "lj.risk.exact_error")
  return _exact_error(lang, *_grouped(lang, theta), tol)


def _exact_error(lang, partition, grouped, tol) -> RiskResult | None:
  """exact_error on θ already tied into `partition` (grouped params)."""
  layout = direct.layout(grouped)
  name, _ = registry.first_supporting(lang, quantity="error", layout=layout,
                                      partition=partition, tol=tol)
  if name is None:
    return None
  report = _as_floats(_cached_report(lang, partition, "squared", registry.ROUTES[name], layout,
                                     (("tol", tol),))(grouped))
  return RiskResult(report["error"], error_route=name,
                    details={"error_bound": report["error_bound"]})


def error_rate(lang: languages.Language, theta, *, key=None, n_samples: int = 10**5,
               tol: float = 1e-12) -> RiskResult:
  """0-1 error P(sign f ≠ y): exact where feasible (`exact_error`), else sampled (§3b, §3c).

  The result's `error_route` says which; a sampled value carries its standard error.

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
    >>> round(result.value, 6), result.error_route
    (1.0, 'threshold')
  """
  validation.require_float64("lj.error_rate")
  languages.check_language(lang, "lj.error_rate")
  partition, grouped = _grouped(lang, theta)  # once, for the exact and the sampled route
  exact = _exact_error(lang, partition, grouped, tol)
  if exact is not None:
    return exact
  key = jax.random.key(0) if key is None else key
  report = _as_floats(registry.ROUTES["sampled"].build(lang, partition, key=key,
                                                       n_samples=n_samples).report(grouped))
  return RiskResult(report["error"], error_route="sampled",
                    details={"stderr": report["error_stderr"], "n_samples": report["n_samples"]})


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
  report = registry.ROUTES["sampled"].build(lang, partition, loss=loss, key=key,
                                            n_samples=n_samples).report(grouped)
  return float(report["risk"]), float(report["stderr"])


__all__ = ["RiskResult", "error_rate", "exact_error", "population_risk", "sampled_risk"]
