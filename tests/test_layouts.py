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

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from enumeration import labelled_strings

import lagjax as lj
from lagjax.data import partition as partition_lib
from lagjax.data import regular
from lagjax.data import regular_builtins as rb
from lagjax.models import direct
from lagjax.risk import automaton_error, laplace, transfer

TOL = 1e-12
LAYOUTS = [dict(cls=cls, query=query, positions=positions) for cls in (False, True)
           for query in direct.QUERIES for positions in direct.POSITIONS]
FULL = dict(query="last", positions="first_last")
BUILTINS = {"parity": rb.parity(), "first": rb.first(), "even_pairs": rb.even_pairs(),
            **{f"tomita{k}": rb.tomita(k) for k in range(1, 8)}, "dyck2": rb.dyck(2),
            "cycle3": rb.cycle_navigation(3), "mod_count": rb.mod_count(1, 3, 1),
            "contains": rb.contains((1, 0, 1)), "occurrence3": rb.occurrence_automaton(3)}
# Lengths checked: the shortest strings (where first, last and both coincide, or meet with
# nothing between) and a longer one; test_transfer_route.py checks every n up to 10 on the
# CLS model.
LENGTHS = {2: (1, 2, 7), 3: (1, 2, 5)}
LEFT = 38.0 + np.log(10.0)   # one window wide enough for every fixed length up to 10


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
  f = np.asarray(lj.forward_tokens(params, tokens, mask))
  expected = [by_definition(params, s) for s in strings]
  np.testing.assert_allclose(f, expected, rtol=0, atol=1e-14)


def fixed_length_route(base):
  """jit((params, law) -> ((risk, grid covered), grad)) of the transfer route with a traced
  Fixed law, on two windows (scores within ±6 need one window and 48 more nodes). The
  automaton is padded with unreachable states to MAX_STATES (they add exact zeros)."""
  letters, accepting, start = transfer.automaton_arrays(base)
  pad = MAX_STATES - letters.shape[-1]
  padded = transfer.Automaton(jnp.pad(letters, ((0, 0), (0, pad), (0, pad))),
                              jnp.pad(accepting, (0, pad)), jnp.pad(start, (0, pad)))
  return functools.partial(padded_route(), automaton=padded)


@functools.cache
def padded_route():
  """jit((params, law, automaton) -> ((risk, grid covered), grad)) of the transfer route with
  a static Fixed law (log2 n squarings, not 24) and the automaton as arrays, so one
  compilation serves every language of one alphabet size and number of states."""
  width = laplace.window_width(BUILTINS["parity"], left=LEFT)

  def value_and_grad(params, law, automaton):
    def risk(theta):
      mean_f, mean_f2, _, covered = transfer.moments(
          theta, automaton, law, step=laplace.STEP, left=LEFT, width=width, max_clusters=2)
      return transfer.squared_risk_of(mean_f, mean_f2)[0], covered
    return jax.value_and_grad(risk, has_aux=True)(params)

  return jax.jit(value_and_grad, static_argnames="law")


@functools.cache
def enumerated_value_and_grad():
  """jit((params, strings, y, weight) -> (Σ_w weight ½ (f(w) - y)², grad)), f by
  forward_tokens: one compilation per string shape (d, n), shared by every language."""
  def risk(params, strings, y, weight):
    mask = jnp.ones(strings.shape, bool)
    return weight @ (0.5 * (direct.forward_tokens(params, strings, mask) - y) ** 2)
  return jax.jit(jax.value_and_grad(risk))


def random_language(seed: int):
  table = np.random.default_rng(seed).integers(0, 5, size=(5, 2))
  return regular.regular(table, [0, 3], length=lj.geometric(0.2), balance=False,
                         name=f"random{seed}")


MAX_STATES = max(lang.automaton()[0].shape[0]
                 for lang in [*BUILTINS.values(), random_language(0), random_language(1)])

def check_against_enumeration(base, evaluate, n, params):
  (value, covered), grads = evaluate(params, lj.fixed(n))
  assert covered
  expected, expected_grads = enumerated_value_and_grad()(params, *labelled_strings(base, n))
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


@pytest.mark.parametrize("name", ENUMERATED)
def test_last_query_and_positions_equal_enumeration(name):
  """Last query + position tables (CLS on for every other language), random θ: risk and
  gradient of the route at the LENGTHS equal the enumerated sums to TOL."""
  index = ENUMERATED.index(name)
  base = BUILTINS[name] if name in BUILTINS else random_language(int(name[-1]))
  rng = np.random.default_rng(index)
  evaluate = fixed_length_route(base)
  for n in LENGTHS[base.d]:
    check_against_enumeration(base, evaluate, n, random_params(rng, base.d, cls=index % 2 == 1,
                                                               **FULL))


ONE_NEW_PART = [layout for layout in LAYOUTS
                if (layout["query"] == "cls") != (layout["positions"] == "none")]


@pytest.mark.parametrize("layout", ONE_NEW_PART,
                         ids=lambda layout: "-".join(map(str, layout.values())))
def test_every_layout_equals_enumeration_on_even_pairs(layout):
  """Even pairs (whose label reads the first and the last token), n = 1, 2, 7, on the layouts
  with one new part: position tables or the last query, CLS off and on (the last query with
  position tables is in test_last_query_and_positions_equal_enumeration, the plain model
  in test_transfer_route.py)."""
  base = BUILTINS["even_pairs"]
  evaluate = fixed_length_route(base)
  rng = np.random.default_rng(1)
  for n in (1, 2, 7):
    check_against_enumeration(base, evaluate, n, random_params(rng, 2, **layout))


def test_gradient_equals_central_differences():
  """Even pairs at its balanced geometric law, last query + positions + CLS: the route's
  gradient equals central differences with h = 1e-5 to 1e-8 (truncation h² |R'''| / 6
  < 1e-10 for |R'''| < 10, roundoff 1e-16 / h ~ 1e-11)."""
  lang = rb.even_pairs()
  params = random_params(np.random.default_rng(4), 2, cls=True, **FULL)
  route = transfer.build(lang)
  risk = jax.jit(route.risk)
  grads = jax.jit(jax.grad(route.risk))(params)
  h = 1e-5
  for name, value in params.items():
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    for i in range(flat.size):
      shifted = [dict(params, **{name: jnp.asarray(
          (flat + sign * h * np.eye(flat.size)[i]).reshape(np.shape(value)))}) for sign in (1, -1)]
      difference = (float(risk(shifted[0])) - float(risk(shifted[1]))) / (2 * h)
      assert abs(difference - float(np.asarray(grads[name]).reshape(-1)[i])) <= 1e-8, (name, i)


class ThreeStateGeometric:
  """Geometric(p) seen only through its matrix_pgf_derivatives: moments then take the general
  path (the 3Q × 3Q phased automaton) instead of the Q × Q block path."""

  def __init__(self, law):
    self.law = law

  def matrix_pgf_derivatives(self, left, matrices, right):
    return self.law.matrix_pgf_derivatives(left, matrices, right)


@pytest.mark.parametrize("cls", [False, True])
def test_block_path_equals_the_phased_automaton(cls):
  """Geometric lengths, last query + position tables: the moments by the Q × Q block path
  (closed-form derivatives of the resolvent) equal those of the 3Q × 3Q phased automaton,
  and so do their gradients, on even pairs and Tomita 5 at random θ, to TOL (both are the
  same sums; only roundoff separates them)."""
  rng = np.random.default_rng(13)
  for lang in (BUILTINS["even_pairs"], BUILTINS["tomita5"]):
    params = random_params(rng, 2, cls=cls, **FULL)
    automaton = transfer.automaton_arrays(lang)
    quadrature = dict(step=lj.risk.laplace.STEP, left=lj.risk.laplace.window_left(lang),
                      width=lj.risk.laplace.window_width(lang))
    results = []
    for law in (lang.length, ThreeStateGeometric(lang.length)):
      def risk(theta, law=law, automaton=automaton, quadrature=quadrature):
        mean_f, mean_f2, _, covered = transfer.moments(theta, automaton, law, **quadrature)
        return transfer.squared_risk_of(mean_f, mean_f2)[0], (mean_f, mean_f2, covered)
      results.append(jax.jit(jax.value_and_grad(risk, has_aux=True))(params))
    ((block, block_moments), block_grads), ((general, general_moments), general_grads) = results
    assert block_moments[2] and general_moments[2]
    scale = max(1.0, (3 * max(float(jnp.abs(v).max()) for v in params.values())) ** 2)
    for mine, theirs in zip(block_moments[:2], general_moments[:2]):
      np.testing.assert_allclose(mine, theirs, rtol=0, atol=TOL * scale)
    assert abs(float(block - general)) <= TOL * scale
    for key in block_grads:
      np.testing.assert_allclose(block_grads[key], general_grads[key], rtol=0,
                                 atol=TOL * scale, err_msg=key)


# The shapes an automaton can have: no sink and period 2 (parity), order read at both ends
# (even_pairs), a sink (dyck2), d = 3 (cycle3), a substring (contains). The length law
# enters every language through the same matrix_pgf; enumeration pins each built-in's
# layout sums to 1e-12 at fixed lengths (above), so five shapes cover the default laws.
@pytest.mark.parametrize("name", ["parity", "even_pairs", "dyck2", "cycle3", "contains"])
def test_sampled_route_within_four_standard_errors(name):
  """A built-in at its default length law, last query + positions + CLS, random θ: the
  sampled route on 5 000 strings lies within 4 standard errors of the exact value (a check
  of the layouts' sums at the default length laws)."""
  lang = BUILTINS[name]
  params = random_params(np.random.default_rng(11), lang.d, cls=True, **FULL)
  exact = lj.population_risk(lang, params)
  assert exact.route == "transfer" and exact.details["grid_covered"]
  sampled = lj.population_risk(lang, params, route="sampled", key=jax.random.key(5),
                               n_samples=5_000)
  assert abs(sampled.value - exact.value) <= 4 * sampled.details["stderr"], (exact, sampled)


def enumerated_error(lang, n: int, params) -> float:
  """Σ over all d^n strings of π(w) 1{sign f(w) ≠ y(w)}, f by forward_tokens (sign 0 is an
  error)."""
  strings, y, weight = labelled_strings(lang, n)
  f = direct.forward_tokens(params, strings, np.ones_like(strings, bool))
  return float(weight @ (np.sign(np.asarray(f)) != y))


class SomeLengths:
  """A length law of the test's own (lagjax takes any object with these methods): uniform
  on a few lengths, so one DP serves them all."""

  def __init__(self, lengths):
    self.lengths = tuple(lengths)
    self.mean = float(np.mean(self.lengths))

  def log_pmf(self, n):
    hit = sum(jnp.asarray(n) == k for k in self.lengths)
    return jnp.where(hit > 0, -np.log(len(self.lengths)), -jnp.inf)

  def sample(self, key, shape):
    return jax.random.choice(key, jnp.asarray(self.lengths), shape)

  def tail(self, n_max):
    return float(np.mean([k > n_max for k in self.lengths]))


@pytest.mark.parametrize("name, lengths, layouts", [
    ("even_pairs", (1, 2, 5), [layout for layout in LAYOUTS if not layout["cls"]
                               and (layout["query"], layout["positions"]) != ("cls", "none")]),
    ("tomita3", (1, 5), [dict(cls=True, **FULL)]),
    ("cycle3", (1, 3), [dict(cls=False, **FULL)])])
def test_error_dp_equals_enumeration_on_every_layout(name, lengths, layouts):
  """The DP's exact 0-1 error (tracking the first and last token group) under a length law
  uniform on `lengths`, for random θ, for θ whose only nonzero value table is β_last (f
  reads the last token alone: the correction terms carry everything) and for β = 0
  everywhere (A = 0: every string is an error): equal to the mean of the enumerated errors
  at those lengths up to roundoff (≤ 3 · 3^5 terms of size ≤ 1: 1e-13), tail bound 0."""
  base = BUILTINS[name]
  lang = dataclasses.replace(base, length=SomeLengths(lengths))
  rng = np.random.default_rng(8)
  for layout in layouts:
    grouped_layout = direct.layout(lj.init_params(base.d, **layout))
    error = jax.jit(automaton_error.build(lang, partition_lib.singletons(base.d),
                                          layout=grouped_layout))
    params = random_params(rng, base.d, **layout)
    only_last = {key: (value if key == "beta_last" or key.startswith("alpha")
                       else jnp.zeros_like(value)) for key, value in params.items()}
    tie = {key: (value if key.startswith("alpha") else jnp.zeros_like(value))
           for key, value in params.items()}
    for theta in (params, only_last, tie):
      value, bound = error(theta)
      expected = np.mean([enumerated_error(base, n, theta) for n in lengths])
      assert float(bound) == 0.0
      assert abs(float(value) - expected) <= 1e-13, (layout, float(value), expected)


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
  with pytest.raises(ValueError, match=r"no exact route supports.*route 'laplace' computes"):
    lj.population_risk(lj.occurrence(4), lj.init_params(4, query="last"))
  with pytest.raises(ValueError, match=r"forward_counts computes the plain model"):
    lj.forward_counts(lj.init_params(2, query="last"), jnp.ones((1, 2)))
  with pytest.raises(ValueError, match=r"empirical objectives train the plain model"):
    lj.train(lang, lj.plans.output_only(1.0, 2, objective=lj.plans.Empirical(16)),
             lj.init_params(2, query="last"))
