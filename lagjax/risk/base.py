"""The route contract: what every route declares (`RouteSpec`) and returns (`Route`).

docs/theory.md section 3. A route is one class: it declares the language capability it
needs, the losses, the layouts and the quantities it gives (QUANTITIES: the risk, the
moments (H, g) of the closed forms, the 0-1 error), and builds with one signature. The
registry (lagjax/risk/registry.py) holds one instance of each, and every consumer asks it.
The losses are lagjax/losses.py.
"""

from __future__ import annotations

import abc
import inspect
from collections.abc import Callable
from typing import ClassVar, NamedTuple

import jax
import jax.numpy as jnp

from lagjax.data import languages, lengths
from lagjax.losses import (  # noqa: F401 (the routes read the losses through this module)
  LOSSES,
  get_loss,
  logistic_loss,
  squared_loss,
  zero_one_error,
)
from lagjax.models import direct


class Route(NamedTuple):
  """A risk route built once for a language, a partition and a loss (docs/theory.md §3).

  Every builder (`risk.risk_fn`, and each route's `build`) returns one; `risk` is what
  training differentiates, `report` what records and tests read.

  Attributes:
    name (str): the route's name in the registry ("laplace", "lattice", "transfer",
      "sampled", "threshold", "automaton", ...).
    risk (Callable): params -> scalar risk R(θ); jittable and differentiable. None for a
      route that gives only the 0-1 error.
    report (Callable): params -> dict of the quantities the route gives ("risk", "error")
      and its diagnostics (certified bounds "risk_bound", "error_bound", standard error,
      quadrature coverage, ...).
    partition (object): the Partition whose token groups index the parameters.

  Example:
    >>> route = lj.risk_fn(lj.occurrence(4))
    >>> route.name, route.partition.num_groups
    ('laplace', 4)
  """

  name: str
  risk: Callable | None
  report: Callable
  partition: object


# What a route may give: the risk R(θ), the moments (H, g) of the attention masses at fixed
# scores (docs/theory.md §5), the 0-1 error P(sign f ≠ y).
QUANTITIES = ("risk", "moments", "error")


class RouteSpec(abc.ABC):
  """The contract of a route (docs/theory.md §3): what it supports and how it is built.

  A route is one subclass that declares, as class attributes, what it needs and gives, and
  implements `build`; routes that give the moments also `attention_moments`. An instance
  entered in the registry (`lj.risk.register`) is all a new route takes: "auto", the eager
  conveniences, the moments, the closed forms and the error records find it there.

  Attributes:
    name (str): the registry name.
    capability (type): the language capability it needs (languages.PresenceLabels,
      AutomatonLabels, ...); None for any language.
    capability_use (str): what the capability gives the route, named in the refusal.
    length_needs (tuple): what it asks of the language's length law, as keys of
      lengths.CAPABILITIES ("required": mean, log_pmf, sample, tail; "pgf" for the Laplace
      route, "matrix_pgf_derivatives" for the transfer route), checked by `supports` and
      `check_length_law` with lengths.check_law.
    losses (tuple): the losses it is exact for; None for any loss.
    any_layout (bool): whether it also computes the last-token query and the position
      tables (§2b); else only the plain model (CLS query, no position tables).
    provides (frozenset): the QUANTITIES it gives.
    exact (bool): exact (with a certified or quadrature bound) rather than a Monte Carlo
      estimate; only exact routes are taken by "auto".
    quadrature (bool): it integrates in x = log t on the merged windows of
      risk/quadrature.py, so the eager conveniences size its grid to θ (num_points), it
      gives NaN where its grid does not cover θ, and consumers re-size the grid along
      risk/coverage.py's ladder.

  Example:
    >>> spec = lj.risk.ROUTES["laplace"]
    >>> spec.exact, spec.any_layout, sorted(spec.provides)
    (True, False, ['moments', 'risk'])
    >>> spec.supports(lj.occurrence(4), loss="logistic")
    "route 'laplace' is exact for loss 'squared' only; got loss 'logistic'"
  """

  name: ClassVar[str]
  capability: ClassVar[type | None] = None
  capability_use: ClassVar[str] = ""
  length_needs: ClassVar[tuple[str, ...]] = ("required",)
  losses: ClassVar[tuple[str, ...] | None] = None
  any_layout: ClassVar[bool] = False
  provides: ClassVar[frozenset] = frozenset({"risk"})
  exact: ClassVar[bool] = True
  quadrature: ClassVar[bool] = False

  def supports(self, lang, *, quantity: str = "risk", loss="squared",
               layout: direct.Layout = direct.PLAIN, partition=None,
               tol: float = 1e-12) -> str | None:
    """None if the route gives `quantity` for (lang, loss, layout[, partition, tol]), else one
    line saying what is missing (§1b, §3): the quantity, the layout, the loss, the language
    capability, the length law's methods (length_needs), then the route's own limits, in
    that order.

    Args:
      lang: the language.
      quantity: one of QUANTITIES.
      loss: the loss of the risk.
      layout: the model's parts, direct.Layout (§2b).
      partition: the token groups of the parameters (the error routes' limits read them);
        None means one group per token.
      tol: the probability mass an exact route may leave out.

    Returns:
      None, or one line saying what is missing.

    Example:
      >>> pairs = lj.data.regular_builtins.even_pairs()
      >>> print(lj.risk.ROUTES["transfer"].supports(pairs))
      None
      >>> print(lj.risk.ROUTES["transfer"].supports(lj.occurrence(4)))
      occurrence(d=4, letters=(0,)) does not declare AutomatonLabels (a DFA that decides the label)
    """
    if quantity not in self.provides:
      gives = " and ".join(sorted(self.provides))
      return f"route {self.name!r} gives the {gives}, not the {quantity}"
    if not (layout.plain or self.any_layout):
      return (f"route {self.name!r} computes the plain model (CLS query, no position tables); "
              f"got query {layout.query!r}, positions {layout.positions!r}")
    if self.losses is not None and loss not in self.losses:
      exact_for = " or ".join(repr(each) for each in self.losses)
      return f"route {self.name!r} is exact for loss {exact_for} only; got loss {loss!r}"
    if self.capability is not None:
      reason = languages.missing(lang, self.capability, self.capability_use)
      if reason is not None:
        return reason
    reason = self.length_law_reason(lang)
    if reason is not None:
      return reason
    return self.limits(lang, quantity=quantity, loss=loss, layout=layout, partition=partition,
                       tol=tol)

  def length_law_reason(self, lang) -> str | None:
    """None if the language's length law has the methods of `length_needs`, else one line
    naming the missing methods, the capability and this route (lengths.check_law; §1).

    Args:
      lang: the language; its `length` is the law.

    Returns:
      None, or one line.

    Example:
      >>> class Law:  # a user's law with only the required members
      ...   mean = 4.0
      ...   def log_pmf(self, n): return jnp.log(0.25) + (n - 1) * jnp.log(0.75)
      ...   def sample(self, key, shape): return jax.random.geometric(key, 0.25, shape)
      ...   def tail(self, n_max): return 0.75 ** n_max
      ...   def __repr__(self): return "Law()"
      >>> reason = lj.risk.ROUTES["laplace"].length_law_reason(lj.occurrence(4, length=Law()))
      >>> first, second = reason.split("; ")
      >>> print(first)
      route 'laplace' needs a pgf length law (with pgf, pgf_d1, pgf_d2)
      >>> print(second)
      got Law(), which lacks pgf, pgf_d1, pgf_d2
      >>> print(lj.risk.ROUTES["lattice"].length_law_reason(lj.occurrence(4, length=Law())))
      None
    """
    law = lang.length
    # Looked up without calling: a law traced inside a compiled build (a pytree with tracer
    # leaves) may have properties, such as its mean, that cannot be evaluated there.
    if all(_has_member(law, member) for need in self.length_needs
           for member in lengths.CAPABILITIES.get(need, ("",))):
      return None
    try:
      lengths.check_law(law, f"route {self.name!r}", self.length_needs)
    except ValueError as error:
      return str(error).removesuffix(".")
    return None

  def check_length_law(self, lang) -> None:
    """Raises the one line of `length_law_reason` where the law lacks a method this route
    calls, so that `build` refuses it before tracing (§1).

    Args:
      lang: the language; its `length` is the law.

    Raises:
      ValueError: naming the missing methods and this route.

    Example:
      >>> lj.risk.ROUTES["transfer"].check_length_law(lj.data.regular_builtins.even_pairs())
    """
    reason = self.length_law_reason(lang)
    if reason is not None:
      raise ValueError(f"{reason}.")

  def limits(self, lang, *, quantity: str, loss, layout: direct.Layout, partition,
             tol: float) -> str | None:
    """The route's own limits beyond its declarations (a table or an enumeration that must
    fit), as one line; None where it fits. Called by `supports` with the same arguments
    (partition None means one group per token, as in build)."""
    del lang, quantity, loss, layout, partition, tol
    return None

  @abc.abstractmethod
  def build(self, lang, partition=None, *, loss="squared",
            layout: direct.Layout = direct.PLAIN, key=None, **options) -> Route:
    """Builds the route once for (lang, partition, loss, layout): the one build signature.

    Args:
      lang: the language (§1b).
      partition: token groups of tied parameters; None means one group per token.
      loss: "squared", "logistic" or a callable (f, y) -> ℓ.
      layout: the model's parts, direct.Layout (§2b).
      key: PRNG key (the sampled route's sample).
      **options: the route's own options (quadrature step and nodes, tol, n_samples, ...).

    Returns:
      A Route.
    """

  def attention_moments(self, lang, partition=None, *, cls: bool = False, **options):
    """params -> (H, g) = (E[W Wᵀ], E[y W]) of the token-group attention masses (§5), for the
    routes that give the "moments"."""
    raise NotImplementedError(f"route {self.name!r} does not give the moments (H, g)")


def _has_member(obj, name: str) -> bool:
  """Whether obj has the attribute `name`, found without evaluating it (a property stays
  unevaluated)."""
  try:
    inspect.getattr_static(obj, name)
  except AttributeError:
    return hasattr(obj, name)  # a member provided by __getattr__
  return True


def squared_risk(mean_yf, mean_f2):
  """R = ½ (E f² - 2 E[y f] + 1) for labels ±1 (docs/theory.md §3a): the quadrature routes'
  risk from their two moments.

  Args:
    mean_yf: E[y f].
    mean_f2: E f².

  Returns:
    The squared-loss risk, of the inputs' type (a float or a scalar array).

  Example:
    >>> lj.risk.base.squared_risk(0.0, 0.0)  # f ≡ 0 (θ = 0): ½ E y² = ½
    0.5
    >>> lj.risk.base.squared_risk(1.0, 1.0)  # f = y on every string
    0.0
  """
  return 0.5 * (mean_f2 - 2.0 * mean_yf + 1.0)


def loss_bound(loss, max_abs_beta):
  """sup ℓ(f, y) over ``|f| <= max|β|`` and y = ±1, the factor of the certified tail bound
  of docs/theory.md §3b.

  Since f is a convex combination of the β's, no string's loss exceeds it: ½(max|β| + 1)²
  for the squared loss, log(1 + e^{max|β|}) for the logistic one.

  Args:
    loss: "squared", "logistic", one of their functions, or a callable (f, y) -> ℓ
      (then valid for losses monotone in y·f).
    max_abs_beta: max|β| over the values, β_cls included.

  Returns:
    The bound sup ℓ, a scalar.

  Example:
    >>> lj.risk.base.loss_bound("squared", 1.0)  # ½ (1 + 1)²
    2.0
    >>> round(float(lj.risk.base.loss_bound("logistic", 1.0)), 6)  # log(1 + e)
    1.313262
  """
  if loss is squared_loss or loss == "squared":
    return 0.5 * (max_abs_beta + 1.0) ** 2
  if loss is logistic_loss or loss == "logistic":
    return jax.nn.softplus(max_abs_beta)
  # A user loss: evaluate at the extremes, valid for losses monotone in y·f.
  return jnp.maximum(loss(-max_abs_beta, 1.0), loss(max_abs_beta, -1.0))
