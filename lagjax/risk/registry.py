"""The one registry of routes, and the builder every consumer calls (docs/theory.md section 3).

`ROUTES` holds one instance of each route (`base.RouteSpec`), in the order "auto" tries
them; `register` enters a new one. Every consumer asks it: `resolve_route` and `risk_fn`
for the risk, `first_supporting` for any quantity (the moments of risk/moments.py, the 0-1
error of risk/error.py and the eager conveniences), `names` for the routes that give a
quantity. No other table lists routes.
"""

from __future__ import annotations

import inspect

from lagjax import validation
from lagjax.data import languages, lengths
from lagjax.data import partition as partition_lib
from lagjax.models import direct
from lagjax.risk import automaton_error, base, count, lattice, sampled, threshold, transfer
from lagjax.risk.base import Route, RouteSpec, get_loss
from lagjax.risk.laplace import LaplaceRoute

ROUTES: dict[str, RouteSpec] = {}


def register(route: RouteSpec) -> RouteSpec:
  """Enters `route` in ROUTES, after the routes already there ("auto" tries them in order; §3).

  Args:
    route: an instance of a RouteSpec subclass, with a name not yet registered.

  Returns:
    The route.

  Raises:
    ValueError: for an object that is not a RouteSpec, a name already taken, a quantity
      outside base.QUANTITIES, or a length-law need outside lengths.CAPABILITIES.

  Example:
    A new route is a RouteSpec subclass and one call, `lj.risk.register(MyRoute())`; a name
    is registered once:

    >>> try:
    ...   lj.risk.register(lj.risk.ROUTES["laplace"])
    ... except ValueError as error:
    ...   print(str(error).split(";")[0])
    route 'laplace' is already registered
  """
  if not isinstance(route, RouteSpec):
    raise ValueError(f"a route is an instance of lj.risk.RouteSpec; got {route!r}.")
  if route.name in ROUTES:
    raise ValueError(f"route {route.name!r} is already registered; registered routes: "
                     f"{', '.join(ROUTES)}.")
  unknown = sorted(set(route.provides) - set(base.QUANTITIES))
  if unknown:
    raise ValueError(f"route {route.name!r} provides {unknown}, not among {base.QUANTITIES}.")
  unknown = sorted(set(route.length_needs) - set(lengths.CAPABILITIES))
  if unknown:
    raise ValueError(f"route {route.name!r} needs length-law capabilities {unknown}, not among "
                     f"{sorted(lengths.CAPABILITIES)}.")
  ROUTES[route.name] = route
  return route


def names(quantity: str = "risk", *, exact: bool | None = None) -> tuple[str, ...]:
  """The registered routes that give `quantity`, in registry order (§3).

  Args:
    quantity: one of base.QUANTITIES.
    exact: True for the exact routes only ("auto"'s order), False for the estimates only,
      None for both.

  Returns:
    The routes' names.

  Example:
    >>> lj.risk.names("risk")
    ('laplace', 'lattice', 'transfer', 'count', 'sampled')
    >>> lj.risk.names("error", exact=True), lj.risk.names("moments")
    (('threshold', 'lattice', 'automaton', 'count'), ('laplace', 'transfer', 'count'))
  """
  validation.check_choice("quantity", quantity, base.QUANTITIES)
  return tuple(name for name, route in ROUTES.items()
               if quantity in route.provides and (exact is None or route.exact == exact))


def first_supporting(lang: languages.Language, *, quantity: str = "risk", loss="squared",
                     layout: direct.Layout = direct.PLAIN,
                     partition: partition_lib.Partition | None = None,
                     tol: float = 1e-12) -> tuple[str | None, dict[str, str]]:
  """The first exact route of the registry that gives `quantity` for the request, as "auto"
  takes it, with the reasons of those before it (§3).

  Args:
    lang: the language (§1b).
    quantity: one of base.QUANTITIES.
    loss: the loss of the risk.
    layout: the model's parts, direct.Layout (§2b).
    partition: the token groups of the parameters (the error routes need them).
    tol: the probability mass an exact route may leave out.

  Returns:
    (name, reasons): the route's name, or None where no exact route applies; and each
    refusing route's one-line reason, by name.

  Example:
    >>> lang = lj.occurrence(4)
    >>> lj.risk.first_supporting(lang, loss="logistic")[0]
    'lattice'
    >>> lj.risk.first_supporting(lang, quantity="error",
    ...                          partition=lj.partition.of_language(lang))[0]
    'threshold'
  """
  reasons = {}
  for name in names(quantity, exact=True):
    reason = ROUTES[name].supports(lang, quantity=quantity, loss=loss, layout=layout,
                                   partition=partition, tol=tol)
    if reason is None:
      return name, reasons
    reasons[name] = reason
  return None, reasons


def resolve_route(lang: languages.Language, loss, route: str,
                  layout: direct.Layout = direct.PLAIN) -> str:
  """The route of the risk (docs/theory.md §3): `route` itself if it supports (lang, loss,
  layout), or for "auto" the first exact route of the registry that does.

  Args:
    lang: the language (§1b).
    loss: "squared", "logistic" or a callable (f, y) -> ℓ.
    route: "auto" or a name of `names("risk")`.
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
    chosen, reasons = first_supporting(lang, loss=loss, layout=layout)
    if chosen is None:
      raise ValueError(f"no exact route supports {lang.describe()} with loss {loss!r}: "
                       + "; ".join(reasons.values()) + ". Use route='sampled'.")
    return chosen
  validation.check_choice("route", route, ("auto", *names("risk")))
  reason = ROUTES[route].supports(lang, loss=loss, layout=layout)
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
    route: "auto" (the first exact route that supports lang and loss), or a name of
      `names("risk")`: "laplace", "lattice", "transfer", "sampled", ...
    partition: token groups of tied parameters.
    cls: whether params carry the CLS scalars.
    query, positions: the model's query ("cls" or "last") and position tables ("none" or
      "first_last"), docs/theory.md §2b; only any_layout routes (transfer, sampled) take
      others than the plain "cls", "none".
    key: PRNG key, required by the sampled route.
    **options: passed to the route's build (step, num_points; tol, max_vectors; n_samples).

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
  layout = direct.Layout(bool(cls), query, positions)
  name = resolve_route(lang, loss, route, layout)
  _check_options(name, options)
  return ROUTES[name].build(lang, partition, loss=loss, layout=layout, key=key, **options)


def _check_options(name: str, options) -> None:
  """Refuses, in one line, a build option the chosen route does not take, naming the routes
  that do (e.g. class_weights, which the transfer route alone takes)."""
  def takes(spec, option):
    parameters = inspect.signature(spec.build).parameters
    return option in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())

  for option in options:
    if not takes(ROUTES[name], option):
      takers = [other for other, spec in ROUTES.items() if takes(spec, option)]
      raise ValueError(f"route {name!r} does not take the option {option!r}; routes that do: "
                       f"{takers or 'none'} (pass route= one of them, if it supports the "
                       "language).")


# The built-in routes, in the order "auto" tries them for each quantity: the risk (laplace,
# lattice, transfer, count), the 0-1 error (threshold, lattice, automaton, count), the
# moments (laplace, transfer, count); the sampled route is the estimate behind them all. The
# count route comes after the others, so regular languages keep theirs.
for _route in (LaplaceRoute(), threshold.ThresholdRoute(), lattice.LatticeRoute(),
               transfer.TransferRoute(), automaton_error.AutomatonErrorRoute(),
               count.CountRoute(), sampled.SampledRoute()):
  register(_route)
del _route

__all__ = ["ROUTES", "first_supporting", "names", "register", "resolve_route", "risk_fn"]
