"""What the routes ask of a length law (RouteSpec.length_needs, lagjax/risk/base.py; the
length-law protocol of lagjax/data/lengths.py, docs/theory.md §1, §3).

A user's law with only the required members (mean, log_pmf, sample, tail) is refused by the
routes that call more (Laplace: pgf, pgf_d1, pgf_d2; transfer: matrix_pgf_derivatives) in
one line naming the missing method and the route, at risk_fn, population_risk and build;
"auto" passes over such a route, says why, and takes the next route the law serves.
"""

import jax
import jax.numpy as jnp
import pytest

import lagjax as lj
from lagjax.risk import base

STOP = 0.25


class RequiredOnly:
  """Geometric(1/4) with only the members every law must have (lengths.REQUIRED)."""

  mean = 1.0 / STOP

  def log_pmf(self, n):
    return jnp.log(STOP) + (n - 1) * jnp.log1p(-STOP)

  def sample(self, key, shape):
    return jax.random.geometric(key, STOP, shape)

  def tail(self, n_max):
    return (1.0 - STOP) ** n_max

  def __repr__(self):
    return "RequiredOnly()"


class WithPgf(RequiredOnly):
  """The same law with its generating function: the Laplace route's needs."""

  def pgf(self, z):
    return lj.geometric(STOP).pgf(z)

  def pgf_d1(self, z):
    return lj.geometric(STOP).pgf_d1(z)

  def pgf_d2(self, z):
    return lj.geometric(STOP).pgf_d2(z)


class WithMatrixPgf(RequiredOnly):
  """The same law with the matrix form a regular language needs for P(y = +1), but not
  the derivatives the transfer route takes."""

  def matrix_pgf(self, left, matrix, right):
    return lj.geometric(STOP).matrix_pgf(left, matrix, right)


THETA = {"alpha": jnp.array([0.7, -0.2, 0.1, 0.0]), "beta": jnp.array([1.0, -0.5, -0.3, 0.2])}


def _assert_one_line_naming(message, method, route):
  assert "\n" not in message
  assert method in message and f"route {route!r}" in message, message


def test_laplace_refuses_a_law_without_pgf_naming_the_method_and_the_route():
  lang = lj.occurrence(4, length=RequiredOnly())
  for call in (lambda: lj.risk_fn(lang, route="laplace"),
               lambda: lj.population_risk(lang, THETA, route="laplace"),
               lambda: lj.risk.ROUTES["laplace"].build(lang),
               lambda: lj.risk.ROUTES["laplace"].attention_moments(lang)):
    with pytest.raises(ValueError) as caught:
      call()
    _assert_one_line_naming(str(caught.value), "pgf_d1", "laplace")


@pytest.mark.slow  # compile-heavy: in the full suite, out of the quick loop
def test_auto_passes_over_laplace_says_why_and_takes_lattice():
  """Without pgf, "auto" takes the lattice route (log_pmf and tail), with the value the
  lattice route gives on the built-in Geometric(1/4) (both certified to 1e-12)."""
  lang = lj.occurrence(4, length=RequiredOnly())
  chosen, reasons = lj.risk.first_supporting(lang)
  assert chosen == "lattice"
  _assert_one_line_naming(reasons["laplace"], "pgf_d1", "laplace")
  assert lj.risk.resolve_route(lang, "squared", "auto") == "lattice"
  assert lj.risk_fn(lang).name == "lattice"
  result = lj.population_risk(lang, THETA)
  reference = lj.population_risk(lj.occurrence(4, length=lj.geometric(STOP)), THETA,
                                 route="lattice")
  assert result.risk_route == "lattice"
  assert abs(result.value - reference.value) <= 2e-12


def test_a_law_with_pgf_keeps_the_laplace_route():
  """The check asks for the methods, not a type: the same law with pgf, pgf_d1 and pgf_d2
  takes the Laplace route, equal to the built-in Geometric(1/4)."""
  lang = lj.occurrence(4, length=WithPgf())
  assert lj.risk.ROUTES["laplace"].supports(lang) is None
  result = lj.population_risk(lang, THETA)
  reference = lj.population_risk(lj.occurrence(4, length=lj.geometric(STOP)), THETA)
  assert result.risk_route == reference.risk_route == "laplace"
  assert abs(result.value - reference.value) <= 1e-14


def test_transfer_refuses_a_law_without_matrix_pgf_derivatives():
  """On a regular language no other exact route applies: "auto" refuses in one line that
  names the transfer route's missing method; the sampled route still serves the law. (Tomita
  3: its label is not a function of counts and ends, so the count route does not apply.)"""
  lang = lj.data.regular_builtins.tomita(3, length=WithMatrixPgf())
  with pytest.raises(ValueError) as caught:
    lj.risk_fn(lang, route="transfer")
  _assert_one_line_naming(str(caught.value), "matrix_pgf_derivatives", "transfer")
  with pytest.raises(ValueError) as caught:
    lj.population_risk(lang, lj.init_params(2))
  _assert_one_line_naming(str(caught.value), "matrix_pgf_derivatives", "transfer")
  assert "route='sampled'" in str(caught.value)
  result = lj.population_risk(lang, lj.init_params(2), route="sampled", n_samples=100)
  assert result.value == 0.5  # θ = 0: f ≡ 0, so every string's loss is ½


def test_register_refuses_an_unknown_length_law_need():
  class Needy(base.RouteSpec):
    name = "needy"
    length_needs = ("required", "no_such_capability")

    def build(self, lang, partition=None, **options):
      raise NotImplementedError

  with pytest.raises(ValueError, match="no_such_capability"):
    lj.risk.register(Needy())
  assert "needy" not in lj.risk.ROUTES


class ForwardedPgf:
  """Geometric(1/4) whose methods are forwarded by __getattr__ (a wrapper) and whose mean,
  once `traced`, cannot be evaluated (as a law traced inside a compiled build, whose
  properties read tracers)."""

  def __init__(self):
    self.traced = False

  @property
  def mean(self):
    if self.traced:
      raise RuntimeError("the mean of a traced law cannot be evaluated here")
    return 1.0 / STOP

  def __getattr__(self, name):
    return getattr(lj.geometric(STOP), name)

  def __repr__(self):
    return "ForwardedPgf()"


def test_the_needs_are_looked_up_without_evaluating_and_through_getattr():
  """Issue 34 mutation survivor of base._has_member (`hasattr(obj, name)` -> `hasattr(None,
  name)`): a member that only __getattr__ provides counts as present, so the check never falls
  back to evaluating the law's members (here a mean that raises)."""
  lang = lj.occurrence(4, length=ForwardedPgf())
  lang.length.traced = True
  for name in ("laplace", "lattice"):
    assert lj.risk.ROUTES[name].length_law_reason(lang) is None
  lj.risk.ROUTES["laplace"].check_length_law(lang)
  with pytest.raises(RuntimeError):
    hasattr(lang.length, "mean")  # why the lookup must not evaluate: the property raises


def test_an_unregistered_route_with_an_unknown_need_gets_a_reason_not_a_crash():
  """Issue 34 mutation survivor of RouteSpec.length_law_reason (the default `("",)` of
  `CAPABILITIES.get`): a route built but not registered, whose length_needs names no
  capability, is answered with the one line of lengths.check_law naming the capability (so
  `supports` says why), not a TypeError from iterating None."""
  class Needy(base.RouteSpec):
    name = "needy"
    length_needs = ("required", "no_such_capability")

    def build(self, lang, partition=None, **options):
      raise NotImplementedError

  reason = Needy().length_law_reason(lj.occurrence(4, length=lj.geometric(STOP)))
  assert reason.startswith("unknown length-law capability 'no_such_capability'; known "), reason
  assert "\n" not in reason
