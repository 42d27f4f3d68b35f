"""The count route (docs/theory.md §3g) against brute force over every string, against the
Laplace, lattice and transfer routes where they overlap, and against the sampled route.

Tolerances: at a fixed length n ≤ 14 with uniform π every count vector weighs ≥ 3^-14 > tol/2,
so the route drops nothing and its bound (report["risk_bound"]) is 0; what is left is float64
summation roundoff over at most 3 + 3^2 + … + 3^10 < 9·10^4 strings (the mixture's padded
batch; values of order 1, weights summing to 1), below 1e-11 for the risk and 1e-10 for the
gradient.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import pytest
from jaxprs import batched_and_alone
from quick import some_quick

import lagjax as lj
from lagjax.data import counting, regular_builtins
from lagjax.models import direct

LAYOUTS = tuple(direct.Layout(cls, query, positions) for cls in (False, True)
                for query in ("cls", "last") for positions in ("none", "first_last"))
# Four layouts in which each of the three parts is both on and off: the quick loop's.
QUICK_LAYOUTS = (LAYOUTS[0], LAYOUTS[3], LAYOUTS[5], LAYOUTS[6])
ROUNDOFF = 1e-11
GRADIENT_ROUNDOFF = 1e-10


def layout_id(layout):
  return f"{'cls' if layout.cls else 'nocls'}-{layout.query}-{layout.positions}"


def random_params(d: int, layout, seed: int = 0, scale: float = 1.0):
  """θ with every table of `layout` drawn N(0, scale²)."""
  params = direct.zero_params(d, layout)
  keys = jax.random.split(jax.random.key(seed), len(params))
  return {name: scale * jax.random.normal(key, value.shape)
          for key, (name, value) in zip(keys, sorted(params.items()))}


def all_strings(d: int, n: int) -> np.ndarray:
  return np.array(list(itertools.product(range(d), repeat=n)), dtype=np.int64)


@functools.cache
def strings_and_labels(lang, n: int):
  """Every string of length n, its probability Π π and its label by the language's own
  label_tokens (the recogniser, not the route's q)."""
  tokens = all_strings(lang.d, n)
  mask = np.ones_like(tokens, dtype=bool)
  probability = np.prod(lang.pi_array[tokens], axis=1)
  # Jitted: one program per length, where eager indexing compiled dozens of single operations.
  labels = np.asarray(jax.jit(lang.label_tokens)(jnp.asarray(tokens), jnp.asarray(mask)))
  return jnp.asarray(tokens), jnp.asarray(mask), jnp.asarray(probability), jnp.asarray(labels)


@functools.partial(jax.jit, static_argnames="loss")
def _brute_force_value_and_grad(params, tokens, mask, probability, labels, loss):
  """(risk, ∇risk, 0-1 error) over the given strings; the strings are arguments, not
  constants, so one compiled program serves every language and length of a shape (XLA
  constant-folds closed-over string tables slowly)."""
  loss_fn = lj.risk.base.get_loss(loss)

  def risk(params):
    return probability @ loss_fn(direct.forward_tokens(params, tokens, mask), labels)

  value, grads = jax.value_and_grad(risk)(params)
  error = probability @ lj.risk.base.zero_one_error(
      direct.forward_tokens(params, tokens, mask), labels)
  return value, grads, error


def brute_force(lang, n: int, loss="squared"):
  """params -> (risk, ∇risk, error) at length n by direct.forward_tokens on every string."""
  arrays = strings_and_labels(lang, n)
  return lambda params: _brute_force_value_and_grad(params, *arrays, loss=loss)


def with_length(lang, law):
  return dataclasses.replace(lang, length=law)


@dataclasses.dataclass(frozen=True)
class UniformLengths:
  """n uniform on {1, …, n_max}: a user's length law with the protocol's members only, so one
  route covers every short length at once."""

  n_max: int

  @property
  def mean(self):
    return (self.n_max + 1) / 2

  def log_pmf(self, n):
    n = jnp.asarray(n)
    return jnp.where((n >= 1) & (n <= self.n_max), -jnp.log(self.n_max), -jnp.inf)

  def sample(self, key, shape):
    return jax.random.randint(key, shape, 1, self.n_max + 1)

  def tail(self, n):
    return max(0.0, 1.0 - n / self.n_max)


@functools.cache
def padded_strings_and_labels(lang, n_max: int):
  """Every string of length 1…n_max, padded to n_max (mask False after the real tokens), its
  probability Π π given its length, its length, and its label by the language's label_tokens
  on the padded batch: one brute-force program for a whole length mixture, not one per
  length."""
  blocks = [all_strings(lang.d, n) for n in range(1, n_max + 1)]
  tokens = np.concatenate([np.pad(block, ((0, 0), (0, n_max - block.shape[1])))
                           for block in blocks])
  lengths = np.concatenate([np.full(len(block), block.shape[1]) for block in blocks])
  mask = np.arange(n_max)[None] < lengths[:, None]
  probability = np.concatenate([np.prod(lang.pi_array[block], axis=1) for block in blocks])
  labels = jax.jit(lang.label_tokens)(jnp.asarray(tokens), jnp.asarray(mask))
  return jnp.asarray(tokens), jnp.asarray(mask), probability, labels, lengths


def brute_force_mixture(lang, n_max: int, loss="squared", length_weights=None):
  """params -> (risk, ∇risk, error) over every string of length ≤ n_max, padded, length n
  weighted length_weights(n) (default 1/n_max: UniformLengths(n_max))."""
  tokens, mask, probability, labels, lengths = padded_strings_and_labels(lang, n_max)
  weights = np.full(len(lengths), 1 / n_max) if length_weights is None else length_weights(
      lengths)
  weighted = jnp.asarray(probability * weights)
  return lambda params: _brute_force_value_and_grad(params, tokens, mask, weighted, labels,
                                                    loss=loss)


def count_route(lang, layout, **options):
  return lj.risk.ROUTES["count"].build(lang, layout=layout, class_weights="population",
                                       **options)


def assert_route_matches_brute_force(lang, n, layout, params, loss="squared", mixture=False):
  """The route at length n (or under UniformLengths(n) with mixture) against brute force."""
  law = UniformLengths(n) if mixture else lj.fixed(n)
  route = count_route(with_length(lang, law), layout, loss=loss)
  report = jax.jit(route.report)(params)
  risk, grads = jax.jit(jax.value_and_grad(route.risk))(params)
  brute = (brute_force_mixture(lang, n, loss) if mixture else
           brute_force(with_length(lang, law), n, loss))
  expected, expected_grads, expected_error = brute(params)
  where = f"{lang.describe()} n={n} {layout}"
  assert float(report["risk_bound"]) == 0.0, where   # nothing dropped at these lengths
  assert abs(float(risk) - float(expected)) <= ROUNDOFF, (where, risk, expected)
  assert abs(float(report["risk"]) - float(expected)) <= ROUNDOFF, where
  for name in params:
    np.testing.assert_allclose(grads[name], expected_grads[name], rtol=0,
                               atol=GRADIENT_ROUNDOFF, err_msg=f"{where} {name}")
  assert abs(float(report["error"]) - float(expected_error)) <= ROUNDOFF, where


@pytest.mark.parametrize("layout", [
    layout if layout in QUICK_LAYOUTS else pytest.param(layout, marks=pytest.mark.slow)
    for layout in LAYOUTS], ids=layout_id)
def test_short_lengths_equal_brute_force_on_dyck1(layout):
  """Risk, gradient and 0-1 error under n uniform on 1..6, every layout: n = 1 (first =
  last), n = 2 (no middle), a = b and a ≠ b all occur, and Dyck-1's q depends on the ends
  and is fractional. (Each length alone, every built-in, up to 14: the slow test below.)"""
  assert_route_matches_brute_force(counting.dyck1(), 6, layout,
                                   random_params(2, layout, seed=1), mixture=True)


BUILTINS = (counting.majority(), counting.dyck1(), counting.anbn(), counting.plurality(0, 2),
            counting.plurality(1, 3), counting.majority(pi=(0.3, 0.7)))
OTHER_LAYOUTS = tuple(layout for layout in LAYOUTS if layout not in QUICK_LAYOUTS)


@pytest.mark.slow
@pytest.mark.parametrize(("lang", "layout"), [
    (lang, layout) for i, lang in enumerate(BUILTINS)
    for layout in (LAYOUTS if lang.d == 3 else QUICK_LAYOUTS if i % 2 == 0 else OTHER_LAYOUTS)],
    ids=lambda value: layout_id(value) if isinstance(value, direct.Layout)
    else value.describe() + str(value.pi))
def test_every_builtin_equals_brute_force_over_every_length(lang, layout):
  """Every built-in: the three-letter one in all eight layouts, the two-letter ones in four
  each (alternating halves, each part on and off in both), so every layout meets at least
  three of them. n uniform on 1..14 (d = 2) or 1..10 (d = 3: 3^10 strings), one route
  against the mean of the fixed-length brute forces (an error δ at one length moves the mean
  by δ/14, far above ROUNDOFF unless errors cancel across lengths); and the logistic loss
  at n = 7 (any loss: Σ w [q ℓ(f, +1) + (1 - q) ℓ(f, -1)])."""
  params = random_params(lang.d, layout, seed=2)
  assert_route_matches_brute_force(lang, 14 if lang.d == 2 else 10, layout, params,
                                   mixture=True)
  assert_route_matches_brute_force(lang, 7, layout, params, loss="logistic")


@pytest.mark.slow
@pytest.mark.parametrize("lang", [counting.dyck1(), counting.plurality(1, 3)],
                         ids=lambda lang: lang.describe())
def test_each_length_alone_equals_brute_force(lang):
  """Fixed lengths alone, in the layout with every part on (CLS token, last query, position
  tables): no cancellation across lengths. n = 1 (first = last), 2 (no middle), 3 and 4 (one
  and two middle tokens), one between and the longest of the mixture tests above, whose
  δ/n_max argument covers every length (each length compiles a route of its own)."""
  layout = LAYOUTS[7]
  params = random_params(lang.d, layout, seed=2)
  for n in (1, 2, 3, 4, 7, 14) if lang.d == 2 else (1, 2, 3, 4, 10):
    assert_route_matches_brute_force(lang, n, layout, params)


@pytest.mark.parametrize("layout", [LAYOUTS[7]], ids=layout_id)
def test_scores_spread_beyond_the_cluster_gap_take_the_explicit_entries(layout):
  """Position-table scores 900 apart: the scaled products would underflow, so the route takes
  direct.forward_counts on the explicit entries; value and gradient still equal brute force."""
  params = random_params(2, layout, seed=3)
  params["alpha_first"] = params["alpha_first"].at[0].set(900.0)
  params["alpha_last"] = params["alpha_last"].at[1].set(-900.0)
  assert_route_matches_brute_force(counting.dyck1(), 5, layout, params, mixture=True)


@pytest.mark.slow  # the quick loop checks lj.batched.every on forward_counts (test_direct)
def test_a_vmapped_batch_takes_one_branch_and_each_members_value():
  """Under vmap the route's branch (scaled masses, or the explicit entries beyond the cluster
  gap) is one unbatched cond (lagjax/batched.py), not a select that computes the explicit
  entries for every member at every step; each member's value and gradient is its unbatched
  one, to roundoff, in a batch whose members agree and in one where a member's scores are
  900 apart (the whole batch then takes the explicit entries)."""
  layout = LAYOUTS[7]
  route = count_route(with_length(counting.dyck1(), lj.fixed(5)), layout)
  value_and_grad = jax.value_and_grad(route.risk)
  members = [random_params(2, layout, seed=seed) for seed in (6, 7)]
  wide = dict(members[1], alpha_first=members[1]["alpha_first"].at[0].set(900.0))
  for (risks, grads), alone in batched_and_alone(value_and_grad, (members, [members[0], wide])):
    for i, (risk, grad) in enumerate(alone):
      assert abs(float(risks[i]) - float(risk)) <= ROUNDOFF
      for name in grad:
        np.testing.assert_allclose(grads[name][i], grad[name], rtol=0, atol=GRADIENT_ROUNDOFF)


def assert_geometric_equals_fixed_lengths(lang, p: float, n_max: int, layout):
  """Geometric(p) = Σ_n p(1-p)^(n-1) R_n: R_n by brute force for n ≤ n_max, and the rest
  bounded independently of the route by P(n > n_max)·sup ℓ = (1-p)^n_max·½(1 + max|f|)²."""
  params = random_params(2, layout, seed=4)
  lang = with_length(lang, lj.geometric(p))
  report = jax.jit(count_route(lang, layout).report)(params)
  total = float(brute_force_mixture(lang, n_max, length_weights=lambda n: p * (1 - p) ** (
      n - 1))(params)[0])
  max_abs_f = float(jnp.abs(lj.risk.entries.entry_table(params)[1]).max())
  rest = (1 - p) ** n_max * 0.5 * (1 + max_abs_f) ** 2
  assert rest < 1e-11   # the comparison is sharp
  assert abs(float(report["risk"]) - total) <= rest + float(report["risk_bound"]) + ROUNDOFF


def test_geometric_lengths_equal_the_sum_of_fixed_length_brute_forces():
  assert_geometric_equals_fixed_lengths(
      counting.dyck1(), 0.97, 8, direct.Layout(cls=True, query="last", positions="first_last"))


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS, ids=layout_id)
def test_geometric_lengths_equal_fixed_length_sums_on_every_layout(layout):
  for lang in (counting.majority(), counting.dyck1(), counting.anbn()):
    assert_geometric_equals_fixed_lengths(lang, 0.9, 14, layout)


@pytest.mark.parametrize("layout", some_quick(LAYOUTS, QUICK_LAYOUTS), ids=layout_id)
def test_parity_and_even_pairs_equal_the_transfer_route(layout):
  """Regular languages that declare CountLabels: the count route equals the transfer route
  (quadrature accurate to ~1e-14) to 1e-12, both through lj.population_risk."""
  theta = random_params(2, layout, seed=5)
  for lang in (regular_builtins.parity(), regular_builtins.even_pairs()):
    by_count = lj.population_risk(lang, theta, route="count", tol=1e-14)
    by_transfer = lj.population_risk(lang, theta, route="transfer")
    assert by_count.risk_route == "count"
    assert abs(by_count.value - by_transfer.value) <= 1e-12, (lang.describe(), layout)


def test_occurrence_equals_the_laplace_and_lattice_routes():
  """The occurrence family on its count blocks: squared loss against Laplace, logistic loss
  and 0-1 error against the lattice route, to 1e-12."""
  for lang, group in ((lj.occurrence(4), np.array([0, 1, 1, 1])),
                      (lj.any_of(5, (0, 1)), np.array([0, 0, 1, 1, 1]))):
    # θ constant on the count blocks: two token groups, so the enumerations stay small
    theta = {"alpha": jnp.array([1.5, -1.0])[group], "beta": jnp.array([1.0, -0.5])[group]}
    laplace = lj.population_risk(lang, theta, route="laplace")
    by_count = lj.population_risk(lang, theta, route="count", tol=1e-14)
    assert laplace.risk_route == "laplace" and by_count.risk_route == "count"
    assert abs(by_count.value - laplace.value) <= 1e-12
    lattice = lj.population_risk(lang, theta, loss="logistic", route="lattice", tol=1e-14)
    logistic = lj.population_risk(lang, theta, loss="logistic", route="count", tol=1e-14)
    assert abs(logistic.value - lattice.value) <= 1e-12
    partition = lj.partition.of_params(lang, theta)
    grouped = direct.group_params(partition, theta)
    errors = [lj.risk.ROUTES[name].build(lang, partition, tol=1e-14).report(grouped)["error"]
              for name in ("lattice", "count")]
    assert abs(float(errors[0]) - float(errors[1])) <= 2e-14


def test_moments_give_the_routes_squared_risk():
  """R(β) = ½ βᵀHβ - gᵀβ + ½ at fixed α (§5), with (H, g) from the count route's moments
  and R from its risk, on majority with the CLS token, at two β."""
  lang = counting.majority(length=lj.geometric(0.3))
  params = random_params(2, direct.Layout(cls=True), seed=6)
  H, g = lj.risk.ROUTES["count"].attention_moments(lang, cls=True)(params)
  route = count_route(lang, direct.Layout(cls=True))
  for scale in (1.0, -2.5):
    params = direct.unstack(params, "beta", scale * direct.stack(params, "beta"))
    beta = direct.stack(params, "beta")
    report = route.report(params)
    quadratic = float(0.5 * beta @ H @ beta - g @ beta + 0.5)
    assert abs(quadratic - float(report["risk"])) <= float(report["risk_bound"]) + ROUNDOFF


@pytest.mark.slow
@pytest.mark.parametrize("cls", [False, True])
def test_moments_equal_the_transfer_routes_on_parity(cls):
  """(H, g) of the plain layout: the count route's enumeration against the transfer route's
  forward-mode derivatives, to 1e-12."""
  lang = regular_builtins.parity()
  params = random_params(2, direct.Layout(cls=cls), seed=6)
  H, g = lj.risk.ROUTES["count"].attention_moments(lang, cls=cls, tol=1e-14)(params)
  H_ref, g_ref = lj.risk.ROUTES["transfer"].attention_moments(lang, cls=cls)(params)
  np.testing.assert_allclose(H, H_ref, rtol=0, atol=1e-12)
  np.testing.assert_allclose(g, g_ref, rtol=0, atol=1e-12)


def test_auto_picks_the_count_route_only_where_no_earlier_route_applies():
  for lang in (counting.majority(), counting.dyck1(), counting.anbn(), counting.plurality()):
    assert lj.risk.resolve_route(lang, "squared", "auto") == "count"
  assert lj.risk.resolve_route(regular_builtins.parity(), "squared", "auto") == "transfer"
  assert lj.risk.resolve_route(lj.occurrence(4), "squared", "auto") == "laplace"
  assert lj.risk.resolve_route(lj.occurrence(4), "logistic", "auto") == "lattice"
  assert lj.risk.moments.moments_route(counting.majority()) == "count"
  assert lj.risk.error.choose(counting.majority(), lj.partition.singletons(2)) == "count"
  assert "plain layout only" in lj.risk.ROUTES["count"].supports(
      counting.majority(), quantity="moments", layout=direct.Layout(query="last"))


def test_class_weights_balance_the_classes():
  """At f ≡ ½ (β constant) the balanced risk is ½·⅛ + ½·9/8 whatever P(y = +1), the
  population risk P₊·⅛ + P₋·9/8; each within its certified bound. The default is the
  language's: balanced for Dyck-1, population for majority."""
  lang = counting.dyck1(length=lj.geometric(0.3))
  params = {"alpha": jnp.array([0.4, -0.2]), "beta": jnp.array([0.5, 0.5])}
  default = lj.risk.ROUTES["count"].build(lang).report(params)
  assert float(default["weight_positive"]) > 1.0
  assert abs(float(default["risk"]) - 0.5 * (0.125 + 1.125)) <= float(default["risk_bound"])
  population = count_route(lang, direct.PLAIN).report(params)
  positive = lang.positive_rate()
  expected = positive * 0.125 + (1 - positive) * 1.125
  assert abs(float(population["risk"]) - expected) <= float(population["risk_bound"])
  majority = lj.risk.ROUTES["count"].build(counting.majority()).report(params)
  assert float(majority["weight_positive"]) == 1.0


@dataclasses.dataclass(frozen=True)
class FirstIsMostFrequent(lj.languages.CountLabels, lj.Language):
  """A count language on d tokens: +1 when token 0 outnumbers each other token, with a label
  probability that may be broken on purpose (`scale`)."""

  d: int = 2
  pi: tuple = (0.5, 0.5)
  length: object = lj.geometric(0.5)
  scale: float = 1.0

  def label_probability(self, counts, first, last):
    others = np.delete(counts, 0, axis=1).max(axis=1)
    return self.scale * (counts[:, 0] > others).astype(float)

  def label_tokens(self, tokens, mask):
    counts = jnp.sum((tokens[..., None] == jnp.arange(self.d)) & mask[..., None], axis=-2)
    return jnp.where(counts[..., 0] > counts[..., 1:].max(-1), 1.0, -1.0)

  def positive_rate(self):
    return 0.3

  def describe(self):
    return f"first_is_most_frequent(d={self.d})"


@dataclasses.dataclass(frozen=True)
class HeavyTail:
  """P(n) ∝ 1/(n(n+1)): infinite mean."""

  def __post_init__(self):
    pass

  mean = math.inf

  def log_pmf(self, n):
    return -jnp.log(n * (n + 1.0))

  def sample(self, key, shape):
    return jnp.ones(shape, jnp.int32)

  def tail(self, n_max):
    return 1.0 / (n_max + 1.0)


def one_line_error(call, match):
  with pytest.raises(ValueError, match=match) as raised:
    call()
  assert "\n" not in str(raised.value), str(raised.value)
  return str(raised.value)


def test_bad_inputs_fail_in_one_line_naming_the_field():
  route = lj.risk.ROUTES["count"]
  majority = counting.majority()
  for tol in (0.0, 1.0, -1e-3, 2.0):
    one_line_error(functools.partial(route.build, majority, tol=tol),
                   r"^tol must be a finite real > 0 and < 1")
  message = one_line_error(lambda: route.build(majority, max_vectors=1000),
                           r"^route 'count' would enumerate 36,584 count vectors "
                           r"\(G = 2 groups, lengths up to N = 269 for tol 1e-12\)")
  assert "tie tokens in fewer groups or raise tol" in message
  wide = FirstIsMostFrequent(d=8, pi=(0.125,) * 8, length=lj.geometric(0.1))
  reason = route.supports(wide)
  assert reason.startswith("route 'count' would enumerate ") and "G = 8 groups" in reason
  one_line_error(lambda: lj.risk_fn(wide, route="count"), r"^route 'count' does not support "
                                                           r"first_is_most_frequent\(d=8\)")
  one_line_error(lambda: route.build(FirstIsMostFrequent(scale=1.5)),
                 r"^label_probability of first_is_most_frequent\(d=2\) must return \(\d+,\) "
                 r"values in \[0, 1\]; got 1\.5 at counts \[1, 0\]")
  one_line_error(lambda: route.build(FirstIsMostFrequent(scale=np.nan)),
                 r"values in \[0, 1\]; got nan")
  heavy = FirstIsMostFrequent(length=HeavyTail())
  one_line_error(lambda: route.build(heavy), r"^length law mean must be finite for the count "
                                             r"route; got .* with mean inf")
  assert route.supports(heavy).startswith("length law mean must be finite")
  one_line_error(lambda: route.build(majority, class_weights="rare"), r"^class_weights must be")


@pytest.mark.parametrize("layout", [direct.PLAIN, LAYOUTS[7]], ids=layout_id)
def test_groups_that_span_count_blocks_sum_the_refinement_back(layout):
  """Plurality ties the letters 1 and 2 by role (lj.partition.of_language) but counts them
  apart: the route on the tied groups equals the route on single tokens at the same θ."""
  lang = counting.plurality(length=lj.geometric(0.3))
  tied = lj.partition.of_language(lang)
  assert tied.num_groups == 2
  params = random_params(2, layout, seed=9)
  on_groups = count_route(lang, layout, partition=tied).report(params)
  on_tokens = count_route(lang, layout).report(direct.expand_params(tied, params))
  bound = float(on_groups["risk_bound"]) + float(on_tokens["risk_bound"])
  assert abs(float(on_groups["risk"]) - float(on_tokens["risk"])) <= bound + ROUNDOFF
  assert abs(float(on_groups["error"]) - float(on_tokens["error"])) <= 2e-12
  assert lj.population_risk(lang, lj.init_params(3)).risk_route == "count"   # θ0 ties 1, 2


def test_train_runs_on_the_count_route():
  """Through the route contract: 20 GD steps on majority, the risk and the exact 0-1 error
  recorded by the count route."""
  run = lj.train(counting.majority(), lj.plans.joint(2.0, 20))
  assert run.route == "count" and run.error_route == "count"
  assert float(run.risk[-1]) < float(run.risk[0]) == pytest.approx(0.5, abs=1e-11)
  assert float(run.error[0]) == pytest.approx(1.0, abs=1e-11)   # f ≡ 0: sign 0 is an error


@pytest.mark.slow
def test_flow_and_closed_form_run_on_the_count_route():
  """A short flow under the last query and position tables, and an output phase by its
  closed form (the count route's moments) against the solver."""
  lang = counting.majority()
  theta0 = lj.init_params(2, query="last", positions="first_last")
  flowed = lj.flow(lang, lj.plans.joint(1.0, 5), theta0, num_records=4)
  assert flowed.route == "count" and not bool(flowed.diverged)
  assert float(flowed.risk[-1]) < float(flowed.risk[0])
  plan = lj.plans.output_only(2.0, 10)
  assert lj.closed_form.supports(lang, plan) is None
  closed = lj.flow(lang, plan, num_records=4)
  solved = lj.flow(lang, plan, num_records=4, closed_form=False)
  np.testing.assert_allclose(closed.risk, solved.risk, rtol=0, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("lang", [counting.majority(), counting.dyck1(), counting.anbn(),
                                  counting.plurality()], ids=lambda lang: lang.describe())
def test_the_sampled_route_agrees_within_four_standard_errors(lang):
  for layout in (direct.PLAIN, direct.Layout(cls=True, query="last", positions="first_last")):
    theta = random_params(lang.d, layout, seed=7)
    exact = count_route(lang, layout).report(theta)
    sampled = lj.population_risk(lang, theta, route="sampled", key=jax.random.key(3),
                                 n_samples=40_000)
    assert abs(sampled.value - float(exact["risk"])) <= 4 * sampled.details["stderr"], (
        lang.describe(), layout)


def test_gradient_noise_is_exact_on_count_languages_in_any_layout():
  """lj.gradient_noise enumerates the count route's slots (§3f, §3g): its mean and covariance
  equal those of the per-string gradients of every string (n uniform on 1..5), brute force."""
  layout = direct.Layout(cls=True, query="last", positions="first_last")
  lang = with_length(counting.dyck1(), UniformLengths(5))
  params = random_params(2, layout, seed=8)
  noise = lj.gradient_noise(lang, params)
  assert noise.exact and noise.standard_error is None and noise.mass_left_out == 0.0
  flat, unravel = jax.flatten_util.ravel_pytree(params)

  @jax.jit
  def moments(tokens, probability, labels):   # one compile per length, not per operation
    def loss(x, one, label):
      return 0.5 * (direct.forward_tokens(unravel(x), one[None],
                                          jnp.ones_like(one, bool)[None])[0] - label) ** 2

    grads = jax.vmap(jax.grad(loss), in_axes=(None, 0, 0))(flat, tokens, labels)
    return probability @ grads / 5, (grads * probability[:, None]).T @ grads / 5

  means, seconds = [], []
  for n in range(1, 6):
    tokens, _, probability, labels = strings_and_labels(with_length(lang, lj.fixed(n)), n)
    first, second = moments(tokens, probability, labels)
    means.append(first)
    seconds.append(second)
  mean = sum(means)
  covariance = sum(seconds) - jnp.outer(mean, mean)
  np.testing.assert_allclose(noise.mean, mean, rtol=0, atol=1e-13)
  np.testing.assert_allclose(noise.covariance, covariance, rtol=0, atol=1e-12)
