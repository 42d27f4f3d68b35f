"""The transfer route (docs/theory.md §3d): exact squared risk on regular languages.

Checked against brute-force enumeration of every string at fixed lengths (risk and its
exact gradient, written out in numpy), against the Laplace route on the occurrence family
built as automata, against the sampled route, and through the closed form and the step
engine, which must agree on a regular language as they do on occurrence.

Error bound used throughout: the quadrature error is < 1e-15 relative to max(1, max|β|²)
(§3d: the Laplace route's trapezoid bound, measured 9.5e-16 as h = 0.25 against 0.125),
and an enumeration of ≤ 2^10 terms of size ≤ max(1, max|β|)² adds roundoff < 1e-13 of that
scale; 1e-12 relative to it bounds both.
"""

import dataclasses
import functools
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from enumeration import FixedOneOf, labelled_strings, padded_automaton
from quick import some_quick

import lagjax as lj
from lagjax.data import lengths as lengths_lib
from lagjax.data import partition as partition_lib
from lagjax.data import regular
from lagjax.data import regular_builtins as rb
from lagjax.dynamics import engines
from lagjax.risk import laplace, quadrature, transfer

TRANSFER = lj.risk.ROUTES["transfer"]

TOL = 1e-12


def enumerated(lang, n: int, params):
  """Risk and its gradient (α, β[, α_cls, β_cls]) summed over every string of length n, with
  labels from walking the automaton's table (numpy, all strings at once)."""
  alpha, beta = np.asarray(params["alpha"]), np.asarray(params["beta"])
  cls = "alpha_cls" in params
  u0 = float(np.exp(params["alpha_cls"])) if cls else 0.0
  beta0 = float(params["beta_cls"]) if cls else 0.0
  strings, y, weight = labelled_strings(lang, n)                           # (d^n, n)
  counts = np.stack([(strings == x).sum(1) for x in range(lang.d)], axis=1)   # (d^n, d)
  u = np.exp(alpha)
  big_b = counts @ u + u0
  f = (counts @ (u * beta) + u0 * beta0) / big_b
  residual = weight * (f - y) / big_b
  grads = {"alpha": residual @ (counts * u * (beta - f[:, None])),
           "beta": residual @ (counts * u)}
  if cls:
    grads["alpha_cls"] = residual @ (u0 * (beta0 - f))
    grads["beta_cls"] = residual.sum() * u0
  return float(weight @ (0.5 * (f - y) ** 2)), grads


def random_automaton(rng, states: int, d: int):
  table = rng.integers(0, states, size=(states, d))
  accepting = rng.choice(states, size=max(1, states // 2), replace=False)
  return table, accepting


def random_params(rng, d: int, cls: bool):
  params = {"alpha": jnp.asarray(rng.uniform(-3, 3, d)), "beta": jnp.asarray(rng.uniform(-2, 2, d))}
  if cls:
    params.update(alpha_cls=jnp.asarray(rng.uniform(-3, 3)),
                  beta_cls=jnp.asarray(rng.uniform(-2, 2)))
  return params


# Built lazily (language(name)): building one compiles its acceptance probability, which
# every xdist worker would otherwise pay at collection.
LANGUAGES = {"even_pairs": rb.even_pairs, "tomita3": functools.partial(rb.tomita, 3),
             "parity": rb.parity, "dyck2": functools.partial(rb.dyck, 2),
             "cycle3": functools.partial(rb.cycle_navigation, 3)}
BUILTINS = {**LANGUAGES, "first": rb.first,
            **{f"tomita{k}": functools.partial(rb.tomita, k) for k in (1, 2, 4, 5, 6, 7)},
            "mod_count": functools.partial(rb.mod_count, 1, 3, 1),
            "contains": functools.partial(rb.contains, (1, 0, 1))}
MAX_LENGTH = {2: 10, 3: 6}
# One window wide enough for every fixed length up to 10, so one compiled function per
# language serves every n (Fixed(n).matrix_pgf takes a traced n).
LEFT = 38.0 + np.log(10.0)
WIDTH = quadrature.window_width(None, left=LEFT)   # (the language only sets the default left)
# random_params draws every score in [-3, 3], so the window centers α_max - α_g lie within
# 6/h = 24 lattice steps of each other and the merged windows need at most WIDTH + 25 nodes
# (asserted through `covered`). Slots past those have weight 0, so these nodes and weights
# are the default grid's: only the run time (linear in the slots) changes.
NUM_POINTS = WIDTH + 32
# A traced Fixed(n0).matrix_pgf squares over MAX_FIXED_LENGTH_BITS = 24 bits of n0, enough
# for any n0 < 2^24. Every n here is below 2^4, so the 20 squarings past bit 4 only square a
# power the product never takes: the compiled function below traces lagjax's Fixed with 4
# bits (6x less run time; the same code). test_fixed_length_route_at_24_bits checks the
# full loop once.
FIXED_BITS = 4
assert max(MAX_LENGTH.values()) < 2**FIXED_BITS


def fixed_length_risk(base, cls: bool):
  """(params, law) -> ((risk, grid covered), grad) of the transfer route on `base` with
  length law `law` (a traced Fixed, so one-class lengths are allowed). The automaton is
  padded with unreachable states to MAX_STATES (exact zeros), so one compilation per
  (d, cls) serves every language."""
  del cls  # read from the params' layout
  return functools.partial(_padded_value_and_grad, automaton=padded_automaton(base, MAX_STATES))


def _value_and_grad(params, law, automaton):
  def risk(theta):
    mean_f, mean_f2, _, covered = transfer.moments(theta, automaton, law, step=quadrature.STEP,
                                                   left=LEFT, width=WIDTH,
                                                   num_points=NUM_POINTS)
    return transfer.squared_risk_of(mean_f, mean_f2)[0], covered
  return jax.value_and_grad(risk, has_aux=True)(params)


@jax.jit
def _padded_value_and_grad(params, law, automaton):
  with mock.patch.object(lengths_lib, "MAX_FIXED_LENGTH_BITS", FIXED_BITS):  # at trace time
    return _value_and_grad(params, law, automaton)


_padded_value_and_grad_24_bits = jax.jit(_value_and_grad)


def random_language(seed: int):
  table, accepting = random_automaton(np.random.default_rng(seed), 5, 2)
  return regular.regular(table, accepting, length=lj.geometric(0.2), balance=False,
                         name=f"random{seed}")


@functools.cache
def language(name: str):
  """A built-in by name, or random0 / random1."""
  return random_language(int(name[-1])) if name.startswith("random") else BUILTINS[name]()


MAX_STATES = 5   # the most states of BUILTINS and the random automata (asserted when padding)


@pytest.mark.parametrize("name", sorted(BUILTINS) + ["random0", "random1"])
def test_fixed_length_risk_and_gradient_equal_enumeration(name):
  """n = 1..10 (d = 2) or 1..6 (d = 3), random θ, CLS on for every other language: risk
  and gradient of the route (jax.grad through the quadrature) equal the enumerated sums
  to TOL."""
  index = (sorted(BUILTINS) + ["random0", "random1"]).index(name)
  base = language(name)
  rng = np.random.default_rng(index)
  cls = index % 2 == 1
  evaluate = fixed_length_risk(base, cls)
  for n in range(1, MAX_LENGTH[base.d] + 1):
    params = random_params(rng, base.d, cls)
    (value, covered), grads = evaluate(params, lj.fixed(n))
    assert covered
    expected, expected_grads = enumerated(base, n, params)
    scale = max(1.0, float(jnp.abs(params["beta"]).max()) ** 2)
    assert abs(float(value) - expected) <= TOL * scale, (name, n, float(value), expected)
    for key, grad in grads.items():
      np.testing.assert_allclose(np.asarray(grad), expected_grads[key], rtol=0,
                                 atol=TOL * scale, err_msg=f"{name} n={n} {key}")


def test_fixed_length_route_at_24_bits():
  """The same check through lagjax's traced Fixed at its full 24 squarings (the 20 past the
  bits of n square a power that is never taken, and must leave the risk and its gradient
  finite and unchanged): Tomita 7 with CLS at n = 10 equals the enumerated sums to TOL."""
  base = language("tomita7")
  params = random_params(np.random.default_rng(24), 2, cls=True)
  (value, covered), grads = _padded_value_and_grad_24_bits(params, lj.fixed(10),
                                                           padded_automaton(base, MAX_STATES))
  assert covered
  expected, expected_grads = enumerated(base, 10, params)
  scale = max(1.0, float(jnp.abs(params["beta"]).max()) ** 2)
  assert abs(float(value) - expected) <= TOL * scale, (float(value), expected)
  for key, grad in grads.items():
    np.testing.assert_allclose(np.asarray(grad), expected_grads[key], rtol=0,
                               atol=TOL * scale, err_msg=key)


OCCURRENCE_KINDS = ("occurrence", "any_of", "all_of")


@functools.cache
def occurrence_family(kind: str):
  """(presence language, the same language as an automaton) at d = 50."""
  d, letters = 50, (0,) if kind == "occurrence" else (0, 1)
  presence = {"occurrence": lambda: lj.occurrence(d), "any_of": lambda: lj.any_of(d, letters),
              "all_of": lambda: lj.all_of(d, letters)}[kind]()
  automaton = {"occurrence": lambda: rb.occurrence_automaton(d),
               "any_of": lambda: rb.any_of_automaton(d, letters),
               "all_of": lambda: rb.all_of_automaton(d, letters)}[kind]()
  return presence, automaton


@functools.cache
def occurrence_width() -> int:
  """One window width for the three languages (the widest: E[n] differs a little), so one
  compilation of the transfer route serves them all."""
  return max(quadrature.window_width(occurrence_family(kind)[0]) for kind in OCCURRENCE_KINDS)


@functools.partial(jax.jit, static_argnames=("width", "num_points"))
def occurrence_transfer_value_and_grad(params, automaton, law, left, width, num_points):
  """(risk, grad) of the transfer route (TransferRoute.build's moments) on an automaton as arrays,
  padded to 4 states, with a traced length law and window start `left`."""
  def risk(theta):
    mean_f, mean_f2, _, _ = transfer.moments(theta, automaton, law, step=quadrature.STEP,
                                             left=left, width=width, num_points=num_points)
    return transfer.squared_risk_of(mean_f, mean_f2)[0]
  return jax.value_and_grad(risk)(params)


@pytest.mark.parametrize("cls", [False, True])
@pytest.mark.parametrize("kind", OCCURRENCE_KINDS)
def test_occurrence_family_as_automata_equals_the_laplace_route(kind, cls):
  """d = 50, per-token random θ (three score clusters): the transfer route on the automaton
  and the Laplace route on the presence language agree in risk and gradient to TOL (both
  are the same trapezoid sums on the same nodes, so only roundoff separates them; the
  transfer route's windows, of one width for the three languages, run up to 5 nodes further
  right, where every kernel is below exp(-e^4.5) < 1e-39)."""
  d = 50
  presence, automaton = occurrence_family(kind)
  assert automaton.length == presence.length
  rng = np.random.default_rng(7)
  params = {"alpha": jnp.asarray(rng.choice([-4.0, 0.0, 5.0], d) + 0.1 * rng.normal(size=d)),
            "beta": jnp.asarray(rng.normal(size=d))}
  if cls:
    params.update(alpha_cls=jnp.asarray(1.5), beta_cls=jnp.asarray(-0.4))
  windows = 3 + int(cls)
  points = quadrature.window_width(presence) * windows
  assert quadrature.points_needed(presence, params) <= points
  padded = padded_automaton(automaton, 4)
  width = occurrence_width()
  value, grads = occurrence_transfer_value_and_grad(
      params, padded, automaton.length, quadrature.window_left(automaton), width, windows * width)
  expected, expected_grads = jax.jit(jax.value_and_grad(
      lj.risk.ROUTES["laplace"].build(presence, layout=lj.models.direct.Layout(cls=cls),
                                      num_points=points).risk))(params)
  assert abs(float(value - expected)) <= TOL, (float(value), float(expected))
  for key in grads:
    np.testing.assert_allclose(grads[key], expected_grads[key], rtol=0, atol=TOL, err_msg=key)


def test_attention_moments_equal_the_laplace_moments():
  """(H, g) by autodiff of the transfer route equal the Laplace route's closed-form moments
  on the occurrence automaton (d = 6, CLS), to TOL."""
  d = 6
  rng = np.random.default_rng(3)
  params = {"alpha": jnp.asarray(rng.normal(size=d)), "beta": jnp.zeros(d),
            "alpha_cls": jnp.asarray(0.2), "beta_cls": jnp.asarray(0.0)}
  moments = jax.jit(transfer.attention_moments(rb.occurrence_automaton(d), cls=True))
  hessian, target = moments(params)
  expected_h, expected_g = jax.jit(laplace.attention_moments(lj.occurrence(d), cls=True))(params)
  np.testing.assert_allclose(hessian, expected_h, rtol=0, atol=TOL)
  np.testing.assert_allclose(target, expected_g, rtol=0, atol=TOL)


@pytest.mark.parametrize("name", some_quick(["even_pairs", "tomita3", "cycle3"], ["cycle3"]))
def test_sampled_route_within_four_standard_errors(name):
  """The sampled route on 20 000 strings (CLS, random θ) lies within 4 standard errors of
  the exact value."""
  lang = language(name)
  params = random_params(np.random.default_rng(11), lang.d, cls=True)
  exact = lj.population_risk(lang, params)
  assert exact.risk_route == "transfer"
  sampled = lj.population_risk(lang, params, route="sampled", key=jax.random.key(5),
                               n_samples=20_000)
  assert abs(sampled.value - exact.value) <= 4 * sampled.details["stderr"], (exact, sampled)


def test_auto_picks_transfer_and_presence_routes_refuse_in_one_line():
  lang = rb.even_pairs()
  assert lj.risk.resolve_route(lang, "squared", "auto") == "transfer"
  for route in ("laplace", "lattice"):
    with pytest.raises(ValueError, match=r"^route '\w+' does not support even_pairs.*"
                                         r"PresenceLabels[^\n]*$"):
      lj.risk.resolve_route(lang, "squared", route)
  with pytest.raises(ValueError, match=r"does not declare AutomatonLabels"):
    lj.risk.resolve_route(lj.occurrence(4), "squared", "transfer")
  with pytest.raises(ValueError, match=r"loss 'squared' only"):
    lj.risk.resolve_route(lang, "logistic", "transfer")


@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_both_engines_agree_on_a_regular_language():
  """Tomita 4 (CLS-free direct model), three-phase plan: the closed form (moments (H, g) of
  the transfer route) and the step loop give the same records to TOL."""
  lang = rb.tomita(4)
  plan = lj.plans.three_phase(2.0, 8.0, 1.0, 20)
  runs = {engine: engines.build(lang, plan, num_records=8, engine=engine).evaluate(
      jnp.asarray(plan.etas), jax.random.key(0)) for engine in ("closed_form", "steps")}
  assert runs["closed_form"].partition == runs["steps"].partition
  for field in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(runs["closed_form"], field),
                               getattr(runs["steps"], field), rtol=TOL, atol=TOL,
                               err_msg=field)
  assert float(jnp.abs(runs["steps"].alpha[-1]).max()) > 1e-3   # attention moved


def test_beta_only_closed_form_is_the_limit_of_gd_on_the_route():
  """first() at fixed scores α = (0.4, -0.3) with CLS: output GD in closed form at T = ∞
  (output_phase.output_gd with the route's (H, g)) equals 600 explicit GD steps on the
  transfer route's risk in β (metric: one token per group). The gap contracts like
  (1 - η λ_min)^T, below 1e-12 here (asserted through λ_min), plus roundoff."""
  lang = rb.first()
  params = {"alpha": jnp.array([0.4, -0.3]), "beta": jnp.zeros(2), "alpha_cls": jnp.asarray(0.1),
            "beta_cls": jnp.asarray(0.0)}
  hessian, target = jax.jit(lj.risk.moments.moments_fn(lang, cls=True))(params)
  eigenvalues = np.linalg.eigvalsh(np.asarray(hessian))
  eta, steps = 1.0 / eigenvalues.max(), 600
  assert (1 - eta * eigenvalues.min()) ** steps < 1e-12
  sizes = jnp.ones(3)
  limit = jax.jit(lj.dynamics.output_phase.output_gd)(hessian, target, sizes, jnp.zeros(3), eta,
                                                      jnp.inf)
  risk = TRANSFER.build(lang).risk
  grad = jax.grad(lambda beta: risk(lj.models.direct.unstack(params, "beta", beta)))
  walked = jax.jit(lambda beta: jax.lax.fori_loop(0, steps, lambda _, b: b - eta * grad(b),
                                                  beta))(jnp.zeros(3))
  np.testing.assert_allclose(walked, limit, rtol=0, atol=1e-10)
  assert float(jnp.abs(limit).max()) > 0.1


def enumerated_error(lang, n: int, params):
  """P(sign f ≠ y) over every string of length n (sign 0 counts as an error)."""
  strings, y, _ = labelled_strings(lang, n)
  counts = np.stack([(strings == x).sum(1) for x in range(lang.d)], axis=1)
  u = np.exp(np.asarray(params["alpha"]))
  numerator = counts @ (u * np.asarray(params["beta"]))
  if "alpha_cls" in params:
    numerator = numerator + float(np.exp(params["alpha_cls"]) * params["beta_cls"])
  wrong = np.sign(numerator) != y
  return float(np.prod(lang.pi_array[strings], axis=1) @ wrong)


@functools.partial(jax.jit, static_argnames="base")
def dp_error(params, law, base):
  """The DP's (0-1 error, tail bound) on `base` with length law `law` (a FixedOneOf, whose
  choice of length is traced), built inside the compiled function: one compilation per
  language and layout serves every length."""
  lang = dataclasses.replace(base, length=law)
  report = lj.risk.ROUTES["automaton"].build(lang, partition_lib.singletons(lang.d)).report(params)
  return report["error"], report["error_bound"]


@pytest.mark.parametrize("name", ["even_pairs", "tomita3", "cycle3", "random0"])
def test_automaton_error_route_equals_enumeration(name):
  """The DP's exact 0-1 error at fixed lengths n = 1, 4, 7 (d = 2) or 1, 3, 5 (d = 3), CLS
  on for even pairs and cycle navigation, random θ and one θ with a sign-0 tie: equal to
  the enumerated error up to roundoff (≤ 2^7 terms of size ≤ 1: 1e-13); tail bound 0."""
  base = language(name)
  rng = np.random.default_rng(5)
  cls = name in ("even_pairs", "cycle3")
  lengths = (1, 4, 7) if base.d == 2 else (1, 3, 5)
  for n in lengths:
    tie = dict(random_params(rng, base.d, cls), beta=jnp.zeros(base.d))
    if cls:
      tie["beta_cls"] = jnp.asarray(0.0)
    for params in (random_params(rng, base.d, cls), tie):
      value, bound = dp_error(params, FixedOneOf.of(lengths, n), base)
      assert float(bound) == 0.0
      assert abs(float(value) - enumerated_error(base, n, params)) <= 1e-13, (name, n)


def test_exact_error_of_a_regular_language_is_the_dp_and_within_four_se_of_sampling():
  """error.choose picks the DP for a regular language on 2 token groups; lj.error_rate's
  exact value (geometric lengths, tail ≤ 1e-12) lies within 4 SE of 200 000 sampled
  strings."""
  lang = language("tomita4")
  params = {"alpha": jnp.array([0.4, -0.2]), "beta": jnp.array([0.3, -0.5]),
            "alpha_cls": jnp.asarray(0.1), "beta_cls": jnp.asarray(0.2)}
  assert lj.risk.error.choose(lang, partition_lib.singletons(2)) == "automaton"
  exact = lj.risk.exact_error(lang, params)
  assert exact.error_route == "automaton" and exact.details["error_bound"] <= 1e-12
  sampled = lj.population_risk(lang, params, route="sampled", key=jax.random.key(3),
                               n_samples=200_000)
  assert abs(sampled.details["error"] - exact.value) <= 4 * sampled.details["error_stderr"]


def test_class_balanced_risk_equals_enumeration():
  """class_weights="balanced": ½ E[ℓ | y = +1] + ½ E[ℓ | y = -1] equals the enumerated
  class-conditional means at fixed lengths (even pairs, n = 3, 5, CLS) to TOL; at a
  language with P(y = +1) = ½ (parity) it equals the population risk."""
  rng = np.random.default_rng(21)
  for n in (3, 5):
    lang = dataclasses.replace(language("even_pairs"), length=lj.fixed(n))
    params = random_params(rng, 2, cls=True)
    value = float(jax.jit(TRANSFER.build(lang, class_weights="balanced").risk)(params))
    strings, y, _ = labelled_strings(lang, n)
    counts = np.stack([(strings == x).sum(1) for x in range(2)], axis=1)
    u, u0 = np.exp(np.asarray(params["alpha"])), float(np.exp(params["alpha_cls"]))
    f = (counts @ (u * np.asarray(params["beta"])) + u0 * float(params["beta_cls"])) / (
        counts @ u + u0)
    loss = 0.5 * (f - y) ** 2
    expected = 0.5 * loss[y > 0].mean() + 0.5 * loss[y < 0].mean()   # uniform π: plain means
    assert abs(value - expected) <= TOL, (n, value, expected)
  parity = language("parity")
  params = random_params(rng, 2, cls=False)
  balanced = jax.jit(TRANSFER.build(parity, class_weights="balanced").risk)(params)
  assert abs(float(balanced) - float(jax.jit(TRANSFER.build(parity).risk)(params))) <= TOL
  with pytest.raises(ValueError, match=r"^class_weights must be one of \('population'"):
    TRANSFER.build(parity, class_weights="equal")


def test_class_balanced_risk_weights_an_unbalanced_language():
  """class_weights="balanced" on a language whose classes are not equally likely: even pairs
  under π = (0.7, 0.3) at n = 3 has P(y = +1) = 0.58, and the route's risk is the π-weighted
  ½ E[ℓ | y = +1] + ½ E[ℓ | y = -1] of the enumeration, away from the population risk (issue
  34's mutation campaign: the tests above use P(y = +1) = ½, where the balanced weights are
  1 and 1, so the weighting itself was never seen). TOL: both sides are exact sums of 8
  terms."""
  rng = np.random.default_rng(22)
  lang = dataclasses.replace(language("even_pairs"), length=lj.fixed(3), pi=(0.7, 0.3))
  params = random_params(rng, 2, cls=False)
  value = float(jax.jit(TRANSFER.build(lang, class_weights="balanced").risk)(params))
  strings, y, weight = labelled_strings(lang, 3)
  assert abs(weight[y > 0].sum() - 0.58) <= TOL
  counts = np.stack([(strings == x).sum(1) for x in range(2)], axis=1)
  u = np.exp(np.asarray(params["alpha"]))
  loss = 0.5 * ((counts @ (u * np.asarray(params["beta"]))) / (counts @ u) - y) ** 2
  positive, negative = y > 0, y < 0
  expected = (0.5 * weight[positive] @ loss[positive] / weight[positive].sum()
              + 0.5 * weight[negative] @ loss[negative] / weight[negative].sum())
  assert abs(value - expected) <= TOL, (value, expected)
  assert abs(value - weight @ loss) > 1e-3


def test_transfer_route_without_a_partition_reports_one_group_per_token():
  """Built without a partition, the route's `partition` (the groups that index θ) is one
  group per token, as its risk uses (issue 34's mutation campaign: None survived)."""
  lang = language("even_pairs")
  route = TRANSFER.build(lang)
  assert route.partition.num_groups == lang.d
  assert route.partition == partition_lib.singletons(lang.d)
