"""Population risk, its moments and the 0-1 error, by routes that must agree (docs/theory.md §3).

A route is one class (`RouteSpec`, risk/base.py) that declares the language capability,
losses and layouts it supports and the quantities it gives, and builds with one signature;
the one registry `ROUTES` (risk/registry.py) holds them. The built-in routes, one module
each: Laplace (§3a, laplace.py), lattice (§3b, lattice.py), sampled (§3c, sampled.py),
transfer (§3d, transfer.py), count (§3g, count.py: any layout, languages with CountLabels),
and the 0-1 error routes threshold (§3b, threshold.py) and
automaton (§3d, automaton_error.py). Their shared pieces: the quadrature in x = log t
(quadrature.py), the automaton's arrays (automaton.py) and the layout's entry table
(entries.py). coverage.py holds the coverage rule of the quadrature and the one way a
consumer re-sizes its grid. `risk_fn` builds a route once and returns a `Route` whose
`risk(params)` is jittable and differentiable; `population_risk`, `exact_error`, `error_rate` and
`sampled_risk` (evaluate.py) are the eager conveniences; moments.py gives the moments (H, g)
and error.py the 0-1 error of records. erf_gaussian.py is the exact risk of the erf model
on the Gaussian SLR task (§7b).
"""

from __future__ import annotations

from lagjax.risk import (
    automaton,
    automaton_error,
    base,
    count,
    coverage,
    entries,
    erf_gaussian,
    error,
    evaluate,
    laplace,
    lattice,
    moments,
    noise,
    quadrature,
    registry,
    sampled,
    threshold,
    transfer,
)
from lagjax.risk.base import LOSSES, QUANTITIES, Route, RouteSpec
from lagjax.risk.evaluate import (
    RiskResult,
    error_rate,
    exact_error,
    population_risk,
    sampled_risk,
)
from lagjax.risk.noise import GradientNoise, gradient_noise
from lagjax.risk.registry import (
    ROUTES,
    first_supporting,
    names,
    register,
    resolve_route,
    risk_fn,
)

__all__ = ["GradientNoise", "LOSSES", "QUANTITIES", "ROUTES", "RiskResult", "Route", "RouteSpec",
           "automaton", "automaton_error", "base", "count", "coverage", "entries", "erf_gaussian",
           "error", "error_rate", "evaluate", "exact_error", "first_supporting", "gradient_noise",
           "laplace", "lattice", "moments", "names", "noise", "population_risk", "quadrature",
           "register", "registry", "resolve_route", "risk_fn", "sampled", "sampled_risk",
           "threshold", "transfer"]
