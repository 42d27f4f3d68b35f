"""The direct model's position tables and last-token query (docs/theory.md §2b), and the
transfer route on them (§3d).

forward_tokens is checked against the definition written out per string in plain Python;
the transfer route against brute-force enumeration of every string at fixed lengths (risk
and gradient), against central finite differences, and against the sampled route; the
training loop on tied token groups against the same run on every token.

Error bounds: as in test_transfer_route.py, the quadrature error is < 1e-15 relative to
max(1, max|value|²) and an enumeration of ≤ 2^10 terms adds roundoff < 1e-13 of that scale,
so TOL = 1e-12 relative to it bounds both. Here the values of a position are β plus up to
two position tables, so the scale is max(1, (3 max|table|)²).
"""

import dataclasses
import functools
import math
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from enumeration import FixedOneOf, padded_automaton, padded_labelled_strings
from quick import some_quick

import lagjax as lj
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.data import regular
from lagjax.data import regular_builtins as rb
from lagjax.models import direct
from lagjax.risk import automaton as automaton_lib
from lagjax.risk import quadrature as quadrature_lib
from lagjax.risk import transfer

TOL = 1e-12
LAYOUTS = [dict(cls=cls, query=query, positions=positions) for cls in (False, True)
           for query in direct.QUERIES for positions in direct.POSITIONS]
FULL = dict(query="last", positions="first_last")
# Built lazily (language(name)): building one compiles its acceptance probability, which
# every xdist worker would otherwise pay at collection.
BUILTINS = {"parity": rb.parity, "first": rb.first, "even_pairs": rb.even_pairs,
            **{f"tomita{k}": functools.partial(rb.tomita, k) for k in range(1, 8)},
            "dyck2": functools.partial(rb.dyck, 2),
            "cycle3": functools.partial(rb.cycle_navigation, 3),
            "mod_count": functools.partial(rb.mod_count, 1, 3, 1),
            "contains": functools.partial(rb.contains, (1, 0, 1)),
            "occurrence3": functools.partial(rb.occurrence_automaton, 3)}
# Lengths checked: the shortest strings (where first, last and both coincide, or meet with
# nothing between) and a longer one; test_transfer_route.py checks every n up to 10 on the
# CLS model.
LENGTHS = {2: (1, 2, 7), 3: (1, 2, 5)}
LEFT = 38.0 + np.log(10.0)   # one window wide enough for every fixed length up to 10
WIDTH = quadrature_lib.window_width(None, left=LEFT)   # (the language only sets the default left)
# random_params draws every table in [-2, 2], so a score (α plus up to two position tables)
# lies in [-6, 6]: the window centers α_max - α_e of one query row lie within 12/h = 48
# lattice steps, and the merged windows need at most WIDTH + 49 nodes (asserted through
# `covered`). Slots past those have weight 0: the nodes and weights are the default grid's,
# only the run time (linear in the slots) changes.
NUM_POINTS = WIDTH + 56
FIXED_BITS = 3   # see padded_route
assert max(max(lengths) for lengths in LENGTHS.values()) < 2**FIXED_BITS
MAX_STATES = 5   # the most states of the automata padded below (asserted there)


@functools.cache
def language(name: str):
  """A built-in by name, or random0 / random1."""
  return random_language(int(name[-1])) if name.startswith("random") else BUILTINS[name]()


def random_params(rng, d: int, **layout):
  zero = lj.init_params(d, **layout)
  return {name: jnp.asarray(rng.uniform(-2.0, 2.0, np.shape(value)))
          for name, value in zero.items()}


def by_definition(params, string) -> float:
  """f(w) from docs/theory.md §2b, one position at a time in plain Python."""
  n, last = len(string), string[-1]
  alpha = np.asarray(params["alpha"])
  scores, values = [], []
  for i, x in enumerate(string):
    score = alpha[last, x] if alpha.ndim == 2 else alpha[x]
    value = float(params["beta"][x])
    for flag, suffix in ((i == 0, "first"), (i == n - 1, "last")):
      if flag and "alpha_first" in params:
        score += float(params["alpha_" + suffix][x])
        value += float(params["beta_" + suffix][x])
    scores.append(float(score))
    values.append(value)
  if "alpha_cls" in params:
    cls_score = np.asarray(params["alpha_cls"])
    scores.append(float(cls_score[last] if cls_score.ndim else cls_score))
    values.append(float(params["beta_cls"]))
  top = max(scores)
  weights = [math.exp(s - top) for s in scores]
  return sum(w * v for w, v in zip(weights, values)) / sum(weights)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: "-".join(map(str, layout.values())))
def test_forward_tokens_follows_the_definition(layout):
  """Padded batches of strings of lengths 1..6 (d = 3): forward_tokens equals the
  per-string definition to 1e-14 (one softmax in float64: a few ulps)."""
  rng = np.random.default_rng(0)
  params = random_params(rng, 3, **layout)
  strings = [list(rng.integers(0, 3, size=n)) for n in range(1, 7) for _ in range(3)]
  tokens = np.zeros((len(strings), 8), np.int64)
  mask = np.zeros((len(strings), 8), bool)
  for row, string in enumerate(strings):
    tokens[row, :len(string)] = string
    mask[row, :len(string)] = True
  f = np.asarray(jax.jit(lj.forward_tokens)(params, tokens, mask))   # one compile, not op by op
  expected = [by_definition(params, s) for s in strings]
  np.testing.assert_allclose(f, expected, rtol=0, atol=1e-14)


def test_a_widened_theta_has_the_same_f_and_contains_is_the_definition():
  """widen carries θ of a contained layout to a containing one with the same f on every
  string (by the definition, per string); `contains` holds exactly for the same CLS token,
  a query the bigger one can imitate (last ⊇ cls) and tables the bigger one has."""
  rng = np.random.default_rng(1)
  strings = [list(rng.integers(0, 3, size=n)) for n in range(1, 6) for _ in range(4)]
  layouts = [direct.Layout(**layout) for layout in LAYOUTS]
  for small in layouts:
    params = random_params(rng, 3, **small._asdict())
    for big in layouts:
      expected = (small.cls == big.cls and (small.query == big.query or big.query == "last")
                  and (small.positions == "none" or big.positions == small.positions))
      assert big.contains(small) == expected, (big, small)
      if not expected:
        with pytest.raises(ValueError, match="^to must contain the layout of params"):
          direct.widen(params, big)
        continue
      wide = direct.widen(params, big)
      assert direct.layout(wide) == big
      for string in strings:
        assert abs(by_definition(wide, string) - by_definition(params, string)) <= 1e-15


@jax.jit
def padded_route(params, law, automaton):
  """((risk, grid covered), grad) of the transfer route at params, on an automaton as arrays,
  under a traced length law (lj.fixed(n)). One compilation per layout and alphabet size
  serves every language and every length. A traced Fixed(n0).matrix_pgf squares over
  MAX_FIXED_LENGTH_BITS = 24 bits of n0; every n here is below 2^FIXED_BITS, so the trace
  runs lagjax's Fixed with FIXED_BITS (the squarings left out only square a power the
  product never takes; test_transfer_route.py checks the full 24 once)."""
  with mock.patch.object(lengths_lib, "MAX_FIXED_LENGTH_BITS", FIXED_BITS):  # at trace time
    def risk(theta):
      mean_f, mean_f2, _, covered = transfer.moments(
          theta, automaton, law, step=quadrature_lib.STEP, left=LEFT, width=WIDTH,
          num_points=NUM_POINTS)
      return transfer.squared_risk_of(mean_f, mean_f2)[0], covered
    return jax.value_and_grad(risk, has_aux=True)(params)


@jax.jit
def enumerated_value_and_grad(params, tokens, mask, y, weight):
  """(Σ_w weight ½ (f(w) - y)², grad), f by forward_tokens, over padded_labelled_strings: one
  compilation per layout and alphabet size, shared by every language and length."""
  def risk(theta):
    return weight @ (0.5 * (direct.forward_tokens(theta, tokens, mask) - y) ** 2)
  return jax.value_and_grad(risk)(params)


def random_language(seed: int):
  table = np.random.default_rng(seed).integers(0, 5, size=(5, 2))
  return regular.regular(table, [0, 3], length=lj.geometric(0.2), balance=False,
                         name=f"random{seed}")


def check_against_enumeration(base, n, params):
  lengths = LENGTHS[base.d]
  (value, covered), grads = padded_route(params, lj.fixed(n), padded_automaton(base, MAX_STATES))
  assert covered
  expected, expected_grads = enumerated_value_and_grad(
      params, *padded_labelled_strings(base, n, max(lengths)))
  scale = max(1.0, (3 * max(float(jnp.abs(v).max()) for v in params.values())) ** 2)
  assert abs(float(value - expected)) <= TOL * scale, (n, float(value), float(expected))
  for key in grads:
    np.testing.assert_allclose(grads[key], expected_grads[key], rtol=0, atol=TOL * scale,
                               err_msg=f"n={n} {key}")


# The layout logic is the same for every automaton; these cover each kind of built-in (first
# and last token, 5 states, bounded depth, d = 3, a word, a modulus, a group) and two random
# automata. test_transfer_route.py checks every built-in at n = 1..10 on the CLS model.
ENUMERATED = ["even_pairs", "tomita3", "tomita7", "dyck2", "cycle3", "contains", "mod_count",
              "parity", "random0", "random1"]


@pytest.mark.slow  # compile-heavy: in the full suite, out of the quick loop
@pytest.mark.parametrize("name", ENUMERATED)
def test_last_query_and_positions_equal_enumeration(name):
  """Last query + position tables (CLS on for every other language), random θ: risk and
  gradient of the route at the LENGTHS equal the enumerated sums to TOL."""
  index = ENUMERATED.index(name)
  base = language(name)
  rng = np.random.default_rng(index)
  for n in LENGTHS[base.d]:
    check_against_enumeration(base, n, random_params(rng, base.d, cls=index % 2 == 1, **FULL))


ONE_NEW_PART = [layout for layout in LAYOUTS
                if (layout["query"] == "cls") != (layout["positions"] == "none")]


@pytest.mark.parametrize("layout", ONE_NEW_PART,
                         ids=lambda layout: "-".join(map(str, layout.values())))
def test_every_layout_equals_enumeration_on_even_pairs(layout):
  """Even pairs (whose label reads the first and the last token), n = 1, 2, 7, on the layouts
  with one new part: position tables or the last query, CLS off and on (the last query with
  position tables is in test_last_query_and_positions_equal_enumeration, the plain model
  in test_transfer_route.py)."""
  base = language("even_pairs")
  rng = np.random.default_rng(1)
  for n in (1, 2, 7):
    check_against_enumeration(base, n, random_params(rng, 2, **layout))


def test_gradient_equals_central_differences():
  """Even pairs at its balanced geometric law, last query + positions + CLS: the route's
  gradient equals central differences with h = 1e-5 to 1e-8 (truncation h² |R'''| / 6
  < 1e-10 for |R'''| < 10, roundoff 1e-16 / h ~ 1e-11)."""
  lang = rb.even_pairs()
  params = random_params(np.random.default_rng(4), 2, cls=True, **FULL)
  # One compiled value_and_grad serves the gradient and every shifted risk.
  value_and_grad = jax.jit(jax.value_and_grad(lj.risk.ROUTES["transfer"].build(lang).risk))
  _, grads = value_and_grad(params)
  h = 1e-5
  for name, value in params.items():
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    for i in range(flat.size):
      shifted = [dict(params, **{name: jnp.asarray(
          (flat + sign * h * np.eye(flat.size)[i]).reshape(np.shape(value)))}) for sign in (1, -1)]
      difference = (float(value_and_grad(shifted[0])[0])
                    - float(value_and_grad(shifted[1])[0])) / (2 * h)
      assert abs(difference - float(np.asarray(grads[name]).reshape(-1)[i])) <= 1e-8, (name, i)


@jax.tree_util.register_pytree_node_class
class ThreeStateGeometric:
  """Geometric(p) seen only through its matrix_pgf_derivatives: moments then take the general
  path (the 3Q × 3Q phased automaton) instead of the Q × Q block path."""

  def __init__(self, law):
    self.law = law

  def tree_flatten(self):
    return (self.law,), None

  @classmethod
  def tree_unflatten(cls, _, children):
    return cls(*children)

  def matrix_pgf_derivatives(self, left, matrices, right):
    return self.law.matrix_pgf_derivatives(left, matrices, right)


BLOCK_PATH_LANGUAGES = ("even_pairs", "tomita5")


@functools.cache
def block_path_quadrature():
  """One window for both languages of the block-path test (the wider one: it only adds
  nodes), so one compilation serves both; their geometric laws are traced."""
  left = max(quadrature_lib.window_left(language(name)) for name in BLOCK_PATH_LANGUAGES)
  return dict(step=quadrature_lib.STEP, left=left,
              width=quadrature_lib.window_width(None, left=left))


@functools.partial(jax.jit, static_argnames="quadrature")
def block_and_phased(params, law, automaton, quadrature):
  """(risk, (E f, E f², covered)) and grad by the Q × Q block path (a Geometric law) and by
  the 3Q × 3Q phased automaton (the same law as ThreeStateGeometric), in one compiled call."""
  def risk(theta, law):
    mean_f, mean_f2, _, covered = transfer.moments(theta, automaton, law, **dict(quadrature))
    return transfer.squared_risk_of(mean_f, mean_f2)[0], (mean_f, mean_f2, covered)
  return [jax.value_and_grad(risk, has_aux=True)(params, each)
          for each in (law, ThreeStateGeometric(law))]


@pytest.mark.parametrize("cls", some_quick([False, True], quick=[True]))
def test_block_path_equals_the_phased_automaton(cls):
  """Geometric lengths, last query + position tables: the moments by the Q × Q block path
  (closed-form derivatives of the resolvent) equal those of the 3Q × 3Q phased automaton,
  and so do their gradients, on even pairs and Tomita 5 at random θ, to TOL (both are the
  same sums; only roundoff separates them)."""
  rng = np.random.default_rng(13)
  quadrature = tuple(block_path_quadrature().items())
  for name in BLOCK_PATH_LANGUAGES:
    lang = language(name)
    params = random_params(rng, 2, cls=cls, **FULL)
    results = block_and_phased(params, lang.length, padded_automaton(lang, MAX_STATES), quadrature)
    ((block, block_moments), block_grads), ((general, general_moments), general_grads) = results
    assert block_moments[2] and general_moments[2]
    scale = max(1.0, (3 * max(float(jnp.abs(v).max()) for v in params.values())) ** 2)
    for mine, theirs in zip(block_moments[:2], general_moments[:2]):
      np.testing.assert_allclose(mine, theirs, rtol=0, atol=TOL * scale)
    assert abs(float(block - general)) <= TOL * scale
    for key in block_grads:
      np.testing.assert_allclose(block_grads[key], general_grads[key], rtol=0,
                                 atol=TOL * scale, err_msg=key)


@pytest.mark.parametrize("name", ["even_pairs", "first"])
def test_inside_blocks_equal_one_block(name):
  """Geometric lengths, last query + position tables + CLS: the block path split into the
  components of automaton.inside_blocks (a concrete automaton: two blocks of two states for
  even pairs, two of one for first) equals the same path on one block of all Q states (the
  automaton traced), risk and gradient, to TOL (the same sums; only roundoff separates them)."""
  lang = language(name)
  assert automaton_lib.inside_blocks(automaton_lib.automaton_arrays(lang)).shape[0] == 2
  params = random_params(np.random.default_rng(17), lang.d, cls=True, **FULL)
  quadrature = dict(step=quadrature_lib.STEP, left=quadrature_lib.window_left(lang),
                    width=quadrature_lib.window_width(lang),
                    num_points=2 * quadrature_lib.window_width(lang))

  def risk(theta, automaton):
    mean_f, mean_f2, _, covered = transfer.moments(theta, automaton, lang.length, **quadrature)
    return transfer.squared_risk_of(mean_f, mean_f2)[0], covered

  automaton = automaton_lib.automaton_arrays(lang)
  (blocks, covered), block_grads = jax.jit(jax.value_and_grad(
      lambda theta: risk(theta, automaton), has_aux=True))(params)
  (whole, _), whole_grads = jax.jit(jax.value_and_grad(risk, has_aux=True))(params, automaton)
  assert covered
  scale = max(1.0, (3 * max(float(jnp.abs(v).max()) for v in params.values())) ** 2)
  assert abs(float(blocks - whole)) <= TOL * scale
  for key in block_grads:
    np.testing.assert_allclose(block_grads[key], whole_grads[key], rtol=0, atol=TOL * scale,
                               err_msg=key)


# The shapes an automaton can have: no sink and period 2 (parity), order read at both ends
# (even_pairs), a sink (dyck2), d = 3 (cycle3), a substring (contains). The length law
# enters every language through the same matrix_pgf; enumeration pins each built-in's
# layout sums to 1e-12 at fixed lengths (above), so five shapes cover the default laws.
@pytest.mark.parametrize("name", some_quick(["parity", "even_pairs", "dyck2", "cycle3",
                                             "contains"], quick=["parity", "cycle3"]))
def test_sampled_route_within_four_standard_errors(name):
  """A built-in at its default length law, last query + positions + CLS, random θ: the
  sampled route on 5 000 strings lies within 4 standard errors of the exact value (a check
  of the layouts' sums at the default length laws)."""
  lang = language(name)
  params = random_params(np.random.default_rng(11), lang.d, cls=True, **FULL)
  exact = lj.population_risk(lang, params)
  assert exact.risk_route == "transfer" and exact.details["grid_covered"]
  sampled = lj.population_risk(lang, params, route="sampled", key=jax.random.key(5),
                               n_samples=5_000)
  assert abs(sampled.value - exact.value) <= 4 * sampled.details["stderr"], (exact, sampled)


@jax.jit
def enumerated_error(params, tokens, mask, y, weight):
  """Σ over the strings of padded_labelled_strings of π(w) 1{sign f(w) ≠ y(w)}, f by
  forward_tokens (sign 0 is an error): one compilation per layout and alphabet size."""
  return weight @ (jnp.sign(direct.forward_tokens(params, tokens, mask)) != y)


@functools.partial(jax.jit, static_argnames=("base", "layout"))
def dp_error(params, law, base, layout):
  """The DP's (0-1 error, tail bound) on `base` with length law `law` (a FixedOneOf, whose
  choice of length is traced), built inside the compiled function: one compilation per
  language and layout serves every length."""
  lang = dataclasses.replace(base, length=law)
  report = lj.risk.ROUTES["automaton"].build(lang, partition_lib.singletons(base.d),
                                            layout=layout).report(params)
  return report["error"], report["error_bound"]


@pytest.mark.parametrize("name, lengths, layouts", [
    ("even_pairs", (1, 2, 5), [layout for layout in LAYOUTS if not layout["cls"]
                               and (layout["query"], layout["positions"]) != ("cls", "none")]),
    ("tomita3", (1, 5), [dict(cls=True, **FULL)]),
    ("cycle3", (1, 3), [dict(cls=False, **FULL)])])
def test_error_dp_equals_enumeration_on_every_layout(name, lengths, layouts):
  """The DP's exact 0-1 error (tracking the first and last token group) at each fixed length
  of `lengths`, for random θ, for θ whose only nonzero
  value table is β_last (f reads the last token alone: the correction terms carry
  everything) and for β = 0 everywhere (A = 0: every string is an error): equal to the
  enumerated error at that length up to roundoff (≤ 3^5 terms of size ≤ 1: 1e-13), tail
  bound 0."""
  base = language(name)
  rng = np.random.default_rng(8)
  for layout in layouts:
    grouped_layout = direct.layout(lj.init_params(base.d, **layout))
    params = random_params(rng, base.d, **layout)
    only_last = {key: (value if key == "beta_last" or key.startswith("alpha")
                       else jnp.zeros_like(value)) for key, value in params.items()}
    tie = {key: (value if key.startswith("alpha") else jnp.zeros_like(value))
           for key, value in params.items()}
    for theta in (params, only_last, tie):
      for n in lengths:
        value, bound = dp_error(theta, FixedOneOf.of(lengths, n), base, grouped_layout)
        expected = float(enumerated_error(theta, *padded_labelled_strings(base, n,
                                                                          max(lengths))))
        assert float(bound) == 0.0
        assert abs(float(value) - expected) <= 1e-13, (layout, n, float(value), expected)


@pytest.mark.slow  # compile-heavy: in the full suite, out of the quick loop
def test_tied_training_equals_training_every_token():
  """The occurrence automaton at d = 4 ties tokens {1, 2, 3}; a three-phase plan from zero
  with position tables + CLS gives the same records tied (each table's gradient divided by
  k_g) as on every token, to TOL. Under the last query GD does not keep the tie (α[x, x]
  and α[c, x], c ≠ x, part), so the run is on every token and tied=True is refused."""
  lang = rb.occurrence_automaton(4)
  plan = lj.plans.three_phase(1.0, 4.0, 1.0, 6)
  theta0 = lj.init_params(4, cls=True, positions="first_last")
  tied = lj.train(lang, plan, theta0, tied=True)
  untied = lj.train(lang, plan, theta0, tied=False)
  assert tied.tied and not untied.tied
  for field in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(tied, field), getattr(untied, field), rtol=0, atol=TOL,
                               err_msg=field)
  assert float(tied.risk[-1]) < float(tied.risk[0]) - 0.01
  assert tied.alpha.shape == (tied.steps.shape[0], 3 * 4)   # α, α_first, α_last
  last = lj.init_params(4, cls=True, **FULL)
  assert lj.dynamics.train.choose_partition(lang, last, plan, "auto").num_groups == 4
  with pytest.raises(ValueError, match="tied=True needs .* the CLS query"):
    lj.train(lang, plan, last, tied=True)


def test_layout_errors_are_one_line():
  lang = rb.even_pairs()
  params = lj.init_params(2, cls=True, query="last")
  with pytest.raises(ValueError, match=r"^params\['alpha_cls'\] must have shape \(2,\) under "
                                       r"the last-token query"):
    lj.population_risk(lang, dict(params, alpha_cls=jnp.zeros(())))
  with pytest.raises(ValueError, match=r"all four position tables"):
    lj.population_risk(lang, dict(params, alpha_first=jnp.zeros(2)))
  with pytest.raises(ValueError, match=r"^query must be one of"):
    lj.init_params(2, query="first")
  with pytest.raises(ValueError, match=r"route 'laplace' computes the plain model"):
    lj.population_risk(lj.occurrence(4), lj.init_params(4, positions="first_last"),
                       route="laplace")
  with pytest.raises(ValueError, match=r"route 'lattice' computes the plain model"):
    lj.population_risk(lj.occurrence(4), lj.init_params(4, query="last"), route="lattice")
  # occurrence declares CountLabels, so "auto" takes the count route, exact in every layout
  assert lj.population_risk(lj.occurrence(4), lj.init_params(4, query="last")).risk_route == (
      "count")
  with pytest.raises(ValueError, match=r"forward_counts computes the plain model"):
    lj.forward_counts(lj.init_params(2, query="last"), jnp.ones((1, 2)))
  with pytest.raises(ValueError, match=r"empirical objectives train the plain model"):
    lj.train(lang, lj.plans.output_only(1.0, 2, objective=lj.plans.Empirical(16)),
             lj.init_params(2, query="last"))
