"""The route contract and its one registry (lagjax/risk/base.py, lagjax/risk/registry.py,
docs/theory.md §3).

A route defined and registered in this file alone is taken by route="auto" for the language
it supports, serves the risk, the 0-1 error and the moments through the same consumers as
the built-in routes, and is refused in one line for a language it does not support. Every
consumer reads the routes' declarations (the auto order, the quadrature flag, the moments)
from the registry, so changing a declaration changes what they do.
"""

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.risk import base


class FirstTokenLabels:
  """A toy capability: the label is decided by the first token alone, at rate first_rate."""

  def first_rate(self) -> float:
    raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class FirstToken(lj.languages.Language, FirstTokenLabels):
  """y = +1 iff the string starts with `letter` (order-dependent: no built-in exact route)."""

  d: int
  letter: int
  pi: tuple
  length: object

  def label_tokens(self, tokens, mask):
    del mask
    return jnp.where(jnp.asarray(tokens)[..., 0] == self.letter, 1.0, -1.0)

  def positive_rate(self) -> float:
    return self.pi[self.letter]

  def first_rate(self) -> float:
    return self.pi[self.letter]

  def describe(self) -> str:
    return f"toy_first_token(d={self.d}, letter={self.letter})"


def toy_language(d: int = 4) -> FirstToken:
  return FirstToken(d, 1, (1.0 / d,) * d, lj.geometric(0.25))


class ConstantOutputRoute(base.RouteSpec):
  """Exact for the constant model f ≡ b (β ≡ b, any α): R = ½[(b-1)² P(+) + (b+1)² P(-)],
  error P(sign b ≠ y), and H = 1, g = E y for the one mass W ≡ 1 on FirstTokenLabels."""

  name = "toy_constant"
  capability = FirstTokenLabels
  capability_use = "the rate of its first token"
  losses = ("squared",)
  provides = frozenset({"risk", "error", "moments"})

  def __init__(self):
    self.built_with = []

  def build(self, lang, partition=None, *, loss="squared", layout=lj.models.direct.PLAIN,
            key=None, **options):
    self.built_with.append(options)
    partition = partition or lj.partition.singletons(lang.d)
    rate = lang.first_rate()

    def report(params):
      b = jnp.mean(params["beta"])
      risk = 0.5 * ((b - 1.0) ** 2 * rate + (b + 1.0) ** 2 * (1.0 - rate))
      error = jnp.where(b > 0, 1.0 - rate, jnp.where(b < 0, rate, 1.0))
      return {"risk": risk, "error": error, "error_bound": 0.0}

    return base.Route(self.name, lambda params: report(params)["risk"], report, partition)

  def attention_moments(self, lang, partition=None, *, cls=False, **options):
    del partition, cls, options
    return lambda params: (jnp.ones((1, 1)), jnp.full(1, 2.0 * lang.first_rate() - 1.0))


@pytest.fixture
def toy_route():
  route = lj.risk.register(ConstantOutputRoute())
  try:
    yield route
  finally:
    del lj.risk.ROUTES[route.name]


def test_a_route_registered_here_is_taken_by_auto_and_refused_elsewhere(toy_route):
  """route="auto" takes the toy route for the toy language (no built-in exact route supports
  it) and its risk and 0-1 error are the toy's closed forms (the same float64 expression,
  so equal to 1e-12); the moments come from it too. Another language is refused in one line
  naming the missing capability; "auto" there still takes the built-in route.
  Fails if "auto" or the eager conveniences keep their own list of routes."""
  lang = toy_language()
  b, rate = 0.3, 0.25
  theta = {"alpha": np.zeros(4), "beta": np.full(4, b)}
  assert lj.risk.resolve_route(lang, "squared", "auto") == "toy_constant"
  result = lj.population_risk(lang, theta)
  expected = 0.5 * ((b - 1.0) ** 2 * rate + (b + 1.0) ** 2 * (1.0 - rate))
  assert result.risk_route == "toy_constant" and result.error_route is None
  assert abs(result.value - expected) <= 1e-12
  error = lj.error_rate(lang, theta)
  assert error.error_route == "toy_constant" and abs(error.value - (1.0 - rate)) <= 1e-12
  assert lj.risk.moments.moments_route(lang) == "toy_constant"
  assert lj.risk_fn(lang).name == "toy_constant"

  occurrence = lj.occurrence(4)
  with pytest.raises(ValueError, match=r"^route 'toy_constant' does not support occurrence\(d=4, "
                     r"letters=\(0,\)\): occurrence\(d=4, letters=\(0,\)\) does not declare "
                     r"FirstTokenLabels \(the rate of its first token\)\.$") as refused:
    lj.population_risk(occurrence, lj.init_params(4), route="toy_constant")
  assert "\n" not in str(refused.value)
  assert lj.population_risk(occurrence, lj.init_params(4)).risk_route == "laplace"
  with pytest.raises(ValueError, match=r"^no exact route supports toy_first_token.*route "
                                       r"'toy_constant' is exact for loss 'squared' only; got "
                                       r"loss 'logistic'\. Use route='sampled'\.$"):
    lj.population_risk(lang, theta, loss="logistic")


def test_without_its_registration_the_toy_language_has_no_exact_route():
  """The same language with the toy route not registered: "auto" refuses it in one line and
  no exact error route applies, so the toy test above fails if registration does nothing."""
  lang = toy_language()
  assert "toy_constant" not in lj.risk.ROUTES
  with pytest.raises(ValueError, match=r"^no exact route supports toy_first_token[^\n]*$"):
    lj.risk.resolve_route(lang, "squared", "auto")
  assert lj.risk.exact_error(lang, {"alpha": np.zeros(4), "beta": np.ones(4)}) is None


def test_the_registry_is_the_only_table(toy_route, monkeypatch):
  """Auto order, quadrature sizing and moments support are read from the routes'
  declarations: the old tables are gone, and changing a declaration changes the consumers.
  - the quadrature flag: population_risk hands a route declaring `quadrature` a grid
    (num_points), any other exact route its tail (tol);
  - "moments": without it in laplace's `provides`, moments_route refuses occurrence and the
    closed form says so;
  - `exact`: a Laplace route declared inexact drops out of "auto", which takes the lattice.
  """
  assert not hasattr(lj.risk, "AUTO_ORDER") and not hasattr(lj.risk, "QUADRATURE_ROUTES")
  assert not hasattr(lj.risk.moments, "MOMENT_ROUTES")
  assert lj.risk.names("risk", exact=True) == ("laplace", "lattice", "transfer", "count",
                                               "toy_constant")
  assert lj.risk.names("moments") == ("laplace", "transfer", "count", "toy_constant")

  lang, theta = toy_language(), {"alpha": np.zeros(4), "beta": np.full(4, 0.5)}
  lj.population_risk(lang, theta)
  assert toy_route.built_with[-1] == {"tol": 1e-12}
  monkeypatch.setattr(ConstantOutputRoute, "quadrature", True)
  lj.population_risk(lang, {"alpha": np.zeros(4), "beta": np.full(4, 0.25)})
  assert set(toy_route.built_with[-1]) == {"num_points"}

  occurrence = lj.occurrence(4)
  laplace_route = type(lj.risk.ROUTES["laplace"])
  assert lj.risk.moments.moments_route(occurrence) == "laplace"
  monkeypatch.setattr(laplace_route, "provides", frozenset({"risk"}))
  assert lj.risk.moments.moments_route(occurrence) == "count"  # the next exact route (§3g)
  monkeypatch.setattr(type(lj.risk.ROUTES["count"]), "provides", frozenset({"risk", "error"}))
  with pytest.raises(ValueError, match=r"^the moments of the attention masses need an exact "
                                       r"route: occurrence.*AutomatonLabels") as refused:
    lj.risk.moments.moments_route(occurrence)
  assert "laplace" not in str(refused.value)
  plan = lj.plans.three_phase(1.0, 1.0, 1.0, 10)
  assert "route 'laplace'" in lj.closed_form.supports(occurrence, plan)

  assert lj.risk.resolve_route(occurrence, "squared", "auto") == "laplace"
  monkeypatch.setattr(laplace_route, "exact", False)
  assert lj.risk.resolve_route(occurrence, "squared", "auto") == "lattice"
  assert lj.risk.names("risk", exact=True)[0] == "lattice"


def test_register_refuses_a_taken_name_and_unknown_quantities():
  """register: one route per name, and only the quantities of base.QUANTITIES."""
  with pytest.raises(ValueError, match="route 'laplace' is already registered"):
    lj.risk.register(lj.risk.ROUTES["laplace"])

  class Nonsense(ConstantOutputRoute):
    name = "toy_nonsense"
    provides = frozenset({"risk", "entropy"})

  with pytest.raises(ValueError, match=r"provides \['entropy'\]"):
    lj.risk.register(Nonsense())
  assert "toy_nonsense" not in lj.risk.ROUTES


def test_an_option_the_route_does_not_take_is_named_with_the_routes_that_do():
  """class_weights is the transfer route's: on a presence language "auto" picks the Laplace
  route, and the option is refused in one line, never a raw TypeError from build."""
  with pytest.raises(ValueError, match=r"route 'laplace' does not take the option "
                                       r"'class_weights'; routes that do: "
                                       r"\['transfer', 'count'\]"):
    lj.risk_fn(lj.occurrence(3), class_weights="balanced")
  assert lj.risk_fn(lj.occurrence(3), num_points=400).name == "laplace"   # an option it takes
