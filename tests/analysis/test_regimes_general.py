"""The three-phase regime on every language with an exact moments route (issue 36 item 1,
lagjax/analysis/regimes.py, docs/theory.md §8.8).

Oracles, independent of the regime's moments code:
- lj.train's first two steps (jax.grad of the language's risk route, not of its moments):
  the scores equal η1η2(a1 + η1 a2). Both are float64 arithmetic on one quadrature, so they
  differ by roundoff, ~1e-15 relative; hence 1e-12.
- R∞ at a boundary point: the least-squares minimum over β of the risk route at the learned
  α, ½ - ½ gᵀH⁺g with H = ∇²_β R and g = -∇_β R(β = 0) by jax.hessian / jax.grad of the route.
  The boundary ends are refined to 1e-12 in log η2, so R∞ = ε there to far better than the
  1e-6 relative the issue asks; R∞ is checked on both sides (1 ± 1e-3) to cross ε.
- The occurrence family's committed law (the traced Laplace problem) against the same
  language through the route path (route="laplace": the route's attention_moments): the
  two differ by roundoff in the quadrature's order of summation, ~1e-13 relative.

The transfer route compiles slowly (about a minute per compiled function on two shared
cores), so the automaton tests are slow; the quick loop keeps the occurrence check and the
bad inputs.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax import regimes

jax.config.update("jax_enable_x64", True)

# Tomita 4 on the plain model: R*(Δ) is lowest (≈ 0.431) near Δ ≈ 1 and ½-ish at both ends
# (0.454 at Δ = 0), so ε = 0.44 succeeds on one bounded interval of Δ, hence of η2 at
# fixed η1: not a single crossing. The random automaton is drawn once (seed 25 of
# rng.integers(0, 3, (3, 2)), minimal with 3 states) under a fixed geometric length law.
TOMITA_EPS = 0.44
RANDOM_TABLE = [[1, 0], [2, 0], [0, 0]]
# Its R*(Δ) is lowest (≈ 0.346, the output-only floor) near Δ = 0 and 0.414 at both ends:
# ε = 0.35 succeeds for small η2 and fails beyond one crossing (a succeeding-to-failing one).
RANDOM_EPS = 0.35


def random_automaton():
  return lj.regular(RANDOM_TABLE, [0], length=lj.geometric(0.2), name="random3")


def two_steps(lang, eta1, eta2):
  """Per-token α after one output step of η1 and one attention step of η2 from zero, by
  lj.train (exact population GD on the language's risk route)."""
  plan = lj.plans.Plan((lj.plans.Phase("output", eta1, 1), lj.plans.Phase("attention", eta2, 1)))
  return np.asarray(lj.train(lang, plan).alpha[-1])


def limit_risk_oracle(lang):
  """α (per token group) -> min_β R(α, β) from the risk route's own β-derivatives."""
  partition = lj.partition.of_language(lang)
  risk = lj.risk_fn(lang, partition=partition).risk
  groups = partition.num_groups

  @jax.jit
  def parts(alpha):
    def of_beta(beta):
      return risk({"alpha": alpha, "beta": beta})
    zero = jnp.zeros(groups)
    return jax.hessian(of_beta)(zero), -jax.grad(of_beta)(zero)

  def limit(alpha):
    hessian, target = (np.asarray(x) for x in parts(jnp.asarray(alpha)))
    return 0.5 - 0.5 * target @ np.linalg.pinv(hessian, rcond=1e-12, hermitian=True) @ target
  return limit


def test_occurrence_through_the_route_path_is_the_committed_law():
  """route="laplace" builds the route's attention_moments (the general path); "auto" keeps
  the traced Laplace problem of the committed law. b, c, η1_max, Δ_ε and the η2_min curve
  agree to 1e-10."""
  lang = lj.occurrence(6)
  committed = regimes.three_phase_regime(lang, 1e-3)
  general = regimes.three_phase_regime(lang, 1e-3, route="laplace")
  assert committed.route == general.route == "laplace"
  assert committed.coordinates == general.coordinates == 1 and general.monotone
  for name in ("b", "c", "eta1_max", "delta_eps", "min_product", "eta1_stable"):
    np.testing.assert_allclose(getattr(general, name), getattr(committed, name), rtol=1e-10,
                               err_msg=name)
  eta1 = np.geomspace(0.5, 1.2 * committed.eta1_max, 16)
  curve = np.asarray(committed.eta2_min(eta1))
  assert np.isinf(curve[eta1 > committed.eta1_max]).all() and np.isfinite(curve[:-2]).all()
  np.testing.assert_allclose(np.asarray(general.eta2_min(eta1)), curve, rtol=1e-10)


def test_eta1_stable_is_two_over_the_top_scaled_eigenvalue_at_zero():
  """η1_stable = 2/λ_max(D^{-1/2} H(0) D^{-1/2}), H(0) from the moments at α = 0; for occurrence
  at d = 6 (groups {a}, the 5 others) against lj.risk.moments.moments_fn."""
  lang = lj.occurrence(6)
  partition = lj.partition.of_language(lang)
  hessian, _ = lj.risk.moments.moments_fn(lang, partition)({"alpha": jnp.zeros(2)})
  root = np.sqrt(np.asarray(partition.sizes, np.float64))
  top = np.linalg.eigvalsh(np.asarray(hessian) / np.outer(root, root))[-1]
  regime = regimes.three_phase_regime(lang, 1e-3)
  np.testing.assert_allclose(regime.eta1_stable, 2.0 / top, rtol=1e-12)


class NoRoute(lj.Language):
  """A counting language (more 0s than 1s) that declares no exact capability."""

  def __init__(self):
    self.d, self.pi, self.length = 2, (0.5, 0.5), lj.geometric(0.1)

  def label_tokens(self, tokens, mask):
    zeros = jnp.sum((tokens == 0) & mask, -1)
    return jnp.where(2 * zeros > jnp.sum(mask, -1), 1.0, -1.0)

  def positive_rate(self):
    return 0.4

  def describe(self):
    return "more_zeros(d=2)"


@pytest.mark.parametrize("call, field", [
    (lambda: regimes.three_phase_regime(NoRoute(), 0.1), "lang: more_zeros(d=2) has no exact "
                                                         "route for the moments"),
    (lambda: regimes.three_phase_regime(lj.occurrence(4), 0.1, route="transfer"),
     "lang: route 'transfer' gives no exact moments for occurrence"),
    (lambda: regimes.three_phase_regime(lj.occurrence(4), 0.1, route="lattice"), "route must be"),
    (lambda: regimes.three_phase_regime(lj.data.regular_builtins.tomita(4), 0.5), "eps (ε)"),
    (lambda: regimes.three_phase_regime(lj.data.regular_builtins.tomita(4), 0.0), "eps (ε)"),
    (lambda: regimes.three_phase_regime(random_automaton(), -1e-3), "eps (ε)"),
])
def test_bad_input_is_one_line_naming_the_field(call, field):
  with pytest.raises(ValueError) as error:
    call()
  message = str(error.value)
  assert field in message and "\n" not in message, message


@pytest.fixture(scope="module")
def tomita():
  lang = lj.data.regular_builtins.tomita(4)
  return lang, regimes.three_phase_regime(lang, TOMITA_EPS)


@pytest.fixture(scope="module")
def random3():
  lang = random_automaton()
  return lang, regimes.three_phase_regime(lang, RANDOM_EPS)


@pytest.mark.slow  # the transfer route compiles for about a minute per function
@pytest.mark.parametrize("which", ["tomita", "random3"])
def test_two_steps_of_lj_train_are_the_polynomial(which, request):
  """α after one output step and one attention step from zero (lj.train) equals
  η1η2(a1 + η1 a2) to 1e-12, at pairs spread over three decades."""
  lang, regime = request.getfixturevalue(which)
  assert regime.route == "transfer"
  ids = lj.partition.token_group_ids(lang)
  a1, a2 = (np.asarray(a)[ids] for a in regime.coefficients)
  for eta1, eta2 in [(0.7, 3.0), (5.0, 40.0), (30.0, 900.0)]:
    expected = eta1 * eta2 * (a1 + eta1 * a2)
    assert np.abs(expected).max() > 1e-6 * eta1 * eta2  # a real step, not zero
    np.testing.assert_allclose(two_steps(lang, eta1, eta2), expected, rtol=0,
                               atol=1e-12 * np.abs(expected).max())


@pytest.mark.slow
def test_tomita_boundary_is_an_interval_with_risk_eps_at_both_ends(tomita):
  """At ε = 0.44 Tomita 4 succeeds on a bounded interval of Δ: the regime says the crossing
  is not single (η2_min NaN), and eta2_intervals gives one interval per η1 whose ends have
  R∞ = ε (independent oracle) and R∞ crossing ε there."""
  lang, regime = tomita
  assert regime.coordinates == 1 and not regime.monotone and "not monotone" in regime.note
  eta1 = np.array([0.5, 4.0])
  assert np.isnan(np.asarray(regime.eta2_min(eta1))).all()
  limit = limit_risk_oracle(lang)
  a1, a2 = (np.asarray(a) for a in regime.coefficients)
  for e1, intervals in zip(eta1, regime.eta2_intervals(eta1)):
    assert intervals.shape == (1, 2) and 0 < intervals[0, 0] < intervals[0, 1] < math.inf
    for end, inside in zip(intervals[0], (1.0, -1.0)):
      def risk(eta2, e1=e1):
        return limit(eta2 * (e1 * a1 + e1**2 * a2))
      np.testing.assert_allclose(risk(end), TOMITA_EPS, rtol=1e-6)
      assert risk(end * (1 + inside * 1e-3)) < TOMITA_EPS < risk(end * (1 - inside * 1e-3))


@pytest.mark.slow
def test_random_automaton_boundary_points_have_risk_eps(random3):
  """The random automaton: every finite η2_min (or interval end) has R∞ = ε and crosses it."""
  lang, regime = random3
  limit = limit_risk_oracle(lang)
  a1, a2 = (np.asarray(a) for a in regime.coefficients)
  eta1 = np.array([0.5, 4.0])
  checked = 0
  for e1, intervals in zip(eta1, regime.eta2_intervals(eta1)):
    for row in intervals:
      for end, inside in zip(row, (1.0, -1.0)):
        if end in (1e-3, 1e15):  # an end of the scan, not a crossing
          continue
        def risk(eta2, e1=e1):
          return limit(eta2 * (e1 * a1 + e1**2 * a2))
        np.testing.assert_allclose(risk(end), RANDOM_EPS, rtol=1e-6)
        assert risk(end * (1 + inside * 1e-3)) < RANDOM_EPS < risk(end * (1 - inside * 1e-3))
        checked += 1
  assert checked >= 1, regime.note


@pytest.mark.slow
def test_a_language_whose_first_steps_never_move_attention_gets_no_law_from_roundoff():
  """On even pairs (plain model) a1 = a2 = 0 up to roundoff: the regime says attention never
  moves and every (η1, η2) ends at the output-only floor, instead of b, c, a wall and Δ_ε
  built from ~1e-17 noise (which flipped between one and two coordinates across XLA builds)."""
  regime = lj.regimes.three_phase_regime(lj.data.regular_builtins.even_pairs(), 1e-3)
  assert regime.coordinates == 0
  assert math.isnan(regime.b) and math.isnan(regime.eta1_max) and math.isnan(regime.delta_eps)
  assert "never move attention" in regime.note
  assert regime.risk_floor > 1e-3
  assert np.all(np.isinf(np.asarray(regime.eta2_min(np.array([0.5, 2.0])))))


@pytest.mark.slow
def test_a_roundoff_c_is_no_wall():
  """At least two b's (a three-state automaton): a2 vanishes modulo constants, so c is
  roundoff (~1e-18 against b ≈ 0.025) and the attention step never reverses sign; the wall
  b/|c| would be ~1e16, a number made of roundoff. The regime reports no wall."""
  lang = lj.regular([[0, 1], [1, 2], [2, 2]], accepting=[2], name="two_bs")
  regime = regimes.three_phase_regime(lang, 0.40)
  assert regime.coordinates == 1 and regime.b > 1e-3
  assert abs(regime.c) <= regimes.FLAT_C * regime.b
  assert math.isinf(regime.eta1_max)
  assert regime.monotone and math.isfinite(regime.delta_eps)
