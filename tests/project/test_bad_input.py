"""Bad input: invalid input raises ValueError with a message that names the offending field.

A concept rather than one module (issue 33 item 7): the checks a user meets first, through the
public entry points (the languages and length laws, lj.population_risk and its routes, the
initialisers, plans, training and the atlas settings), each test naming the one it calls.
"""

import math

import jax
import numpy as np
import pytest

import lagjax as lj
from lagjax.models import direct as model
from lagjax.models import kqv

D = 4


@pytest.fixture(scope="module")
def lang():
  return lj.occurrence(D, length=lj.geometric(0.5))


def params(d=D, **overrides):
  theta = {"alpha": np.zeros(d), "beta": np.zeros(d)}
  theta.update(overrides)
  return theta


@pytest.mark.parametrize("d", [1, 0, -3, 2.5, True])
def test_alphabet_size(d):
  """d must be an integer >= 2 for languages and for init_params."""
  for builder in (lambda: lj.occurrence(d), lambda: lj.any_of(d, (0,)), lambda: lj.all_of(d, (0,))):
    with pytest.raises(ValueError, match="alphabet size d"):
      builder()
  with pytest.raises(ValueError, match="d must be"):
    lj.init_params(d)


@pytest.mark.parametrize("build, letters", [
    (lj.occurrence, 4), (lj.occurrence, -1), (lj.any_of, (0, 7)), (lj.all_of, (-2, 1)),
])
def test_letters_out_of_range(build, letters):
  """Every letter must lie in {0, …, d-1}."""
  with pytest.raises(ValueError, match="letters must lie in"):
    build(D, letters)


@pytest.mark.parametrize("build", [lj.any_of, lj.all_of])
def test_letters_repeated_empty_or_everything(build):
  """Letters are distinct, at least one, and leave some other letter."""
  with pytest.raises(ValueError, match="letters must not repeat"):
    build(D, (1, 1))
  with pytest.raises(ValueError, match="letters must name at least one"):
    build(D, ())
  with pytest.raises(ValueError, match="letters must leave at least one other"):
    build(D, (0, 1, 2, 3))


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5, math.nan, math.inf, -math.inf])
def test_geometric_p(p):
  """Geometric p must be a finite probability in (0, 1)."""
  with pytest.raises(ValueError, match="geometric p"):
    lj.geometric(p)


@pytest.mark.parametrize("lam", [0.0, -1.0, math.nan, math.inf])
def test_shifted_poisson_lam(lam):
  """The Poisson rate must be finite and > 0."""
  with pytest.raises(ValueError, match="shifted Poisson lam"):
    lj.shifted_poisson(lam)


@pytest.mark.parametrize("n0", [0, -2, 1.5])
def test_fixed_n0(n0):
  """A fixed length is an integer >= 1."""
  with pytest.raises(ValueError, match="fixed length n0"):
    lj.fixed(n0)


def test_length_not_a_law():
  """length must be one of the length laws."""
  with pytest.raises(ValueError, match="length must be a length law"):
    lj.occurrence(D, length=0.5)


@pytest.mark.parametrize("pi, message", [
    ([0.5, 0.5], "pi must have shape"),
    ([[0.25] * 4], "pi must have shape"),
    ([0.6, 0.6, -0.1, -0.1], "pi must be a distribution"),
    ([0.3, 0.3, 0.3, 0.3], "pi must be a distribution"),
    ([0.25, 0.25, 0.25, math.nan], "pi must be a distribution"),
    ([0.5, 0.5, 0.0, 0.0], "pi must be a distribution"),
])
def test_pi_not_a_distribution(pi, message):
  """π must have shape (d,), be finite, positive and sum to 1."""
  with pytest.raises(ValueError, match=message):
    lj.occurrence(D, pi=pi, length=lj.geometric(0.5))


def test_no_balanced_length():
  """OR of 2 of 3 letters has P(y = -1) <= 1/3 for every length: no balanced law exists."""
  with pytest.raises(ValueError, match="no geometric length law balances"):
    lj.any_of(3, (0, 1))


@pytest.mark.parametrize("d, shown", [(3, "0.3333"), (4, "0.5")])
def test_no_balanced_length_message_states_the_bound_it_checks(d, shown):
  """The check is π(Σ∖L) <= 1/2, so at d = 4 (π(Σ∖L) = 1/2 exactly) the message must say
  "= 0.5 ≤ 1/2", never the false "= 0.5 < 1/2"."""
  with pytest.raises(ValueError) as raised:
    lj.any_of(d, (0, 1))
  assert str(raised.value).endswith(f"P(y=-1) < π(Σ∖L) = {shown} ≤ 1/2.")


@pytest.mark.parametrize("theta, message", [
    (params(alpha=np.zeros(D + 1)), r"params\['alpha'\] must have shape \(4,\)"),
    (params(beta=np.zeros(D - 1)), r"params\['beta'\] must have shape \(4,\)"),
    (params(alpha=np.zeros((D, 1))), r"params\['alpha'\] must have shape"),
    (params(alpha_cls=np.zeros(())), "both 'alpha_cls' and 'beta_cls'"),
    (params(alpha_cls=np.zeros(2), beta_cls=np.zeros(2)),
     r"params\['alpha_cls'\] must have shape \(\) under the CLS query"),
    (params(alpha=np.zeros((D, D)), alpha_cls=np.zeros(()), beta_cls=np.zeros(())),
     r"params\['alpha_cls'\] must have shape \(4,\) under the last-token query"),
    (params(gamma=np.zeros(D)), "unknown keys"),
    ({"alpha": np.zeros(D)}, "keys 'alpha', 'beta'"),
    (params(alpha=np.array([0.0, np.nan, 0.0, 0.0])), r"params\['alpha'\] must be finite"),
    (params(beta=np.array([0.0, 0.0, np.inf, 0.0])), r"params\['beta'\] must be finite"),
    (params(alpha_cls=np.asarray(-np.inf), beta_cls=np.zeros(())),
     r"params\['alpha_cls'\] must be finite"),
])
def test_bad_params(lang, theta, message):
  """Every eager entry point validates θ before computing."""
  with pytest.raises(ValueError, match=message):
    lj.population_risk(lang, theta)
  with pytest.raises(ValueError, match=message):
    lj.population_risk(lang, theta, loss="logistic")
  with pytest.raises(ValueError, match=message):
    lj.error_rate(lang, theta)
  with pytest.raises(ValueError, match=message):
    lj.sampled_risk(jax.random.key(0), lang, theta, n_samples=100)
  with pytest.raises(ValueError, match=message):
    model.check_params(theta, D)


@pytest.mark.parametrize("route", ["auto", "laplace", "lattice", "sampled"])
def test_unknown_loss(lang, route):
  """A loss name outside the registry is refused by every entry point."""
  with pytest.raises(ValueError, match="unknown loss 'hinge'"):
    lj.risk_fn(lang, loss="hinge", route=route, key=jax.random.key(0))
  with pytest.raises(ValueError, match="unknown loss 'hinge'"):
    lj.population_risk(lang, params(), loss="hinge")
  with pytest.raises(ValueError, match="unknown loss 'hinge'"):
    lj.sampled_risk(jax.random.key(0), lang, params(), loss="hinge", n_samples=100)


def test_unknown_route(lang):
  """A route name outside the registry is refused and the known ones listed."""
  with pytest.raises(ValueError, match="route must be one of .*laplace.*; got 'exact'"):
    lj.risk_fn(lang, route="exact")
  with pytest.raises(ValueError, match="route must be one of .*; got 'exact'"):
    lj.population_risk(lang, params(), route="exact")


def test_laplace_needs_squared_loss(lang):
  """The Laplace route is exact for squared loss only (docs/theory.md §3a)."""
  with pytest.raises(ValueError, match="route 'laplace' is exact for loss 'squared' only"):
    lj.risk_fn(lang, route="laplace", loss="logistic")
  with pytest.raises(ValueError, match="route 'laplace' is exact for loss 'squared' only"):
    lj.population_risk(lang, params(), route="laplace", loss="logistic")


def test_population_risk_sampled_route_estimates_the_exact_risk(lang):
  """population_risk(route="sampled") is a Monte Carlo estimate with its standard error,
  labelled as such, within 5 standard errors of the exact value."""
  theta = params(alpha=np.linspace(0.0, 1.0, D), beta=np.linspace(-1.0, 1.0, D))
  exact = lj.population_risk(lang, theta)
  estimate = lj.population_risk(lang, theta, route="sampled", n_samples=20_000)
  assert estimate.risk_route == "sampled" and estimate.details["stderr"] > 0
  assert abs(estimate.value - exact.value) < 5 * estimate.details["stderr"]


def test_sampled_route_needs_key(lang):
  """The sampled route draws strings, so it needs a PRNG key."""
  with pytest.raises(ValueError, match="needs a PRNG key"):
    lj.risk_fn(lang, route="sampled")


@pytest.mark.parametrize("n_samples", [1, 0, 2.5])
def test_sampled_n_samples(lang, n_samples):
  """n_samples must be an integer >= 2."""
  with pytest.raises(ValueError, match="n_samples must be an integer"):
    lj.sampled_risk(jax.random.key(0), lang, params(), n_samples=n_samples)


def test_lattice_too_large():
  """AND at d = 50 untied: C(N + 50, 50) count vectors, far beyond max_vectors."""
  with pytest.raises(ValueError, match="lattice route needs .* count vectors"):
    lj.risk_fn(lj.all_of(50, (0, 1)), route="lattice")
  with pytest.raises(ValueError, match="more than max_vectors = 10"):
    lj.risk_fn(lj.occurrence(D, length=lj.geometric(0.5)), route="lattice", max_vectors=10)


@pytest.mark.parametrize("tol", [0.0, 1.0, -1e-3])
def test_lattice_tol(lang, tol):
  """The lattice tail must lie in (0, 1)."""
  with pytest.raises(ValueError, match="tol must lie in"):
    lj.risk_fn(lang, route="lattice", tol=tol)


def test_lattice_partition_must_refine_language():
  """Groups that mix a letter with other tokens are refused."""
  lang = lj.occurrence(D, length=lj.geometric(0.5))
  merged = lj.partition.Partition(((0, 1), (2, 3)))
  with pytest.raises(ValueError, match="partition must refine"):
    lj.risk_fn(lang, route="lattice", partition=merged)


def test_lang_not_a_language():
  """Routes are built for Language objects only."""
  with pytest.raises(ValueError, match="needs a lj.languages.Language"):
    lj.risk_fn("occurrence")
  with pytest.raises(ValueError, match="needs a lj.languages.Language"):
    lj.population_risk("occurrence", params())


@pytest.mark.parametrize("scale", [0.0, -1.0, math.nan])
def test_init_kqv_scale(scale):
  """The KQV init scale must be finite and > 0."""
  with pytest.raises(ValueError, match="scale must be a finite real > 0"):
    kqv.init_kqv(jax.random.key(0), D, scale=scale)


def test_init_kqv_embeddings_shape():
  """Embeddings must have shape (d, width)."""
  with pytest.raises(ValueError, match=r"embeddings must have shape \(4, 3\)"):
    kqv.init_kqv(jax.random.key(0), D, width=3, embeddings=np.eye(D))


@pytest.mark.parametrize("values, message", [
    ((), "config.d_list must list at least one integer >= 2"),
    ((8, 1), "config.d_list entries must be an integer >= 2; got 1"),
    ((8, 2.5), "config.d_list entries must be an integer >= 2; got 2.5"),
    ((8, True), "config.d_list entries must be an integer >= 2; got True"),
])
def test_integer_lists_name_the_field(values, message):
  with pytest.raises(ValueError, match=message):
    lj.validation.check_ints("config.d_list", values, 2)
  assert lj.validation.check_ints("config.d_list", (2, 8), 2) == (2, 8)


@pytest.mark.parametrize("eps", [0.0, -1e-3, 0.5, 0.7, math.nan, math.inf])
def test_risk_threshold_is_below_the_risk_at_zero(eps):
  with pytest.raises(ValueError, match="eps"):
    lj.validation.check_risk_threshold("eps", eps)
  assert lj.validation.check_risk_threshold("eps", 1e-3) == 1e-3


def test_fixed_length_spec_must_be_integral():
  """from_spec("fixed:2.5") is refused by Fixed's own check (the spec used to truncate it to
  Fixed(n0=2)); an integral float still builds the law."""
  with pytest.raises(ValueError, match=r"^fixed length n0 must be an integer >= 1; got 2\.5\."):
    lj.lengths.from_spec("fixed:2.5")
  assert lj.lengths.from_spec("fixed:20.0") == lj.fixed(20)


@pytest.mark.parametrize("tail_mass", [0.0, 1.0, -1e-3, 1.5, math.nan])
def test_truncation_length_tail_mass(tail_mass):
  """0 < tail_mass < 1 for every law (0 used to raise a bare math domain error for a
  geometric law and to double N up to the limit for the others)."""
  for law in (lj.geometric(0.5), lj.fixed(3), lj.shifted_poisson(1.0)):
    with pytest.raises(ValueError, match=r"^tail_mass must be a finite real > 0 and < 1; got "):
      lj.lengths.truncation_length(law, tail_mass)


@pytest.mark.parametrize("count", [2, 4])
def test_plan_objectives_one_per_phase(count):
  """PlanSpec.build refuses objectives that are not one per phase, naming the number of
  phases (a short list used to raise IndexError, a long one was cut silently)."""
  objectives = [lj.plans.Population()] * count
  with pytest.raises(ValueError, match=r"^plan 'three_phase' takes objectives, one for each of "
                                       rf"its 3 phases; got {count}\."):
    lj.plans.three_phase(1.0, 1.0, 1.0, 5, objectives=objectives)


@pytest.mark.parametrize("fields, message", [
    ({"query": "typo"}, r"^query must be one of \('cls', 'last'\); got 'typo'\."),
    ({"positions": "first"}, r"^positions must be one of \('none', 'first_last'\); got 'first'"),
    ({"cls": 1}, r"^cls must be True or False; got 1\."),
])
def test_layout_fields(fields, message):
  """Layout checks its fields, with the allowed values of init_params
  (zero_params(2, Layout(query="typo")) used to build the CLS layout silently)."""
  with pytest.raises(ValueError, match=message):
    model.zero_params(2, model.Layout(**fields))


@pytest.mark.parametrize("flag", [True, np.bool_(True), np.bool_(False)])
def test_check_real_refuses_python_and_numpy_bools(flag):
  """check_real refuses NumPy bools as it does Python bools, like is_int and check_bool
  (np.bool_ used to pass as 1.0 or 0.0)."""
  with pytest.raises(ValueError, match=r"^eta must be a finite real >= 0; got "):
    lj.validation.check_real("eta", flag, minimum=0.0)


@pytest.mark.parametrize("max_risk", [0.0, -1.0, math.nan])
def test_train_erf_max_risk(max_risk):
  """train_erf refuses a divergence cap that is not > 0, as lj.train and lj.train_kqv do."""
  task = lj.tasks.get_task("slr", m=3)
  start = {"k": np.array([1.0, 0.0, 0.0]), "v": np.array([0.0, 1.0, 0.0])}
  with pytest.raises(ValueError, match=r"^max_risk must be a real > 0 \(inf: no cap\); got "):
    lj.dynamics.erf_train.train_erf(task, lj.plans.output_only(0.1, 2), 1.0, start,
                                  max_risk=max_risk)


@pytest.mark.parametrize("field, value, message", [
    ("steps", 2, "atlas steps must be an integer >= 3"),
    ("record_every", 0, "atlas record_every"),
    ("starts", 0, "atlas starts"),
    ("epsilon", 0.0, "atlas epsilon"),
    ("grid", (), "atlas grid must be a non-empty tuple"),
    ("grid", (1.0, -2.0), "atlas grid step size"),
])
def test_atlas_settings_name_the_bad_field(field, value, message):
  from lagjax.analysis import atlas
  with pytest.raises(ValueError, match=message):
    atlas.Settings(**{field: value})


def test_train_takes_an_integral_float_record_every():
  """record_every=2.0 is accepted by the shared check and reaches the loop as the int 2
  (it used to pass the check and then fail inside JAX)."""
  lang = lj.occurrence(3)
  run = lj.train(lang, lj.plans.output_only(1.0, 4), record_every=2.0)
  assert run.steps.tolist() == [0, 2, 4]


@pytest.mark.parametrize("check", [
    lambda value: lj.validation.check_real("eta", value, minimum=0.0),
    lambda value: lj.validation.check_positive("gamma", value),
    lambda value: lj.validation.check_risk_threshold("epsilon", value),
])
@pytest.mark.parametrize("value", ["1.0", "0.1", b"1", True, np.bool_(True)])
def test_number_checks_refuse_strings_and_bools(check, value):
  """A step size, duration or threshold given as a string that spells a number ('1.0') or as
  a bool is refused in one line, naming the value (issue 34: lj.plans.joint('1.0', 10))."""
  with pytest.raises(ValueError, match=r"must be a finite real.*; got ") as raised:
    check(value)
  assert repr(value) in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("value", ["3", b"3", True, 3.5])
def test_count_check_refuses_strings_and_bools(value):
  """A count (steps, seeds) given as a string, a bool or a fractional float is refused."""
  with pytest.raises(ValueError, match=r"^steps must be an integer >= 1; got "):
    lj.validation.check_int("steps", value, 1, integral_floats=True)


def test_check_real_bounds_are_inclusive_unless_strict():
  """check_real accepts a value equal to its minimum or maximum unless strict / strict_max,
  and its message writes each bound as it applies (issue 34's mutation campaign: the
  inclusive bounds, strict_max's default and the '<=' of the message were unchecked)."""
  check = lj.validation.check_real
  assert check("p", 0.0, minimum=0.0) == 0.0
  assert check("p", 1.0, maximum=1.0) == 1.0
  assert check("p", 1.0, minimum=0.0, maximum=1.0) == 1.0
  with pytest.raises(ValueError, match=r"^p must be a finite real >= 0 and <= 1; got 1\.5\.$"):
    check("p", 1.5, minimum=0.0, maximum=1.0)
  with pytest.raises(ValueError, match=r"^p must be a finite real > 0 and < 1; got 1\.0\.$"):
    check("p", 1.0, minimum=0.0, strict=True, maximum=1.0, strict_max=True)
  with pytest.raises(ValueError, match=r"^p must be a finite real; got inf\.$"):
    check("p", math.inf)


@pytest.mark.parametrize("value", [None, [1.0], {"eta": 1.0}, object()])
def test_check_real_refuses_what_float_cannot_read(value):
  """A value float() refuses (None, a list, a dict) is a ValueError in one line, not the
  TypeError of comparing it with a bound (issue 34's mutation campaign)."""
  with pytest.raises(ValueError, match=r"^eta must be a finite real >= 0; got ") as raised:
    lj.validation.check_real("eta", value, minimum=0.0)
  assert "\n" not in str(raised.value)


def test_check_keys_names_every_missing_key_and_sorts_mixed_unknown_keys():
  """check_keys lists every missing key, comma-separated in the required order, and sorts
  unknown keys of mixed types by their repr (sorting 0 with 'gamma' raises TypeError)
  (issue 34's mutation campaign)."""
  with pytest.raises(ValueError, match=r"^params is missing keys: 'alpha', 'beta'; it must "
                                       r"have the keys 'alpha', 'beta'\.$"):
    lj.validation.check_keys("params", {}, ("alpha", "beta"))
  with pytest.raises(ValueError, match=r"^params has unknown keys: 'gamma', 0; allowed: the "
                                       r"keys 'alpha' \(optional: 'beta'\)\.$"):
    lj.validation.check_keys("params", {"alpha": 1, 0: 3, "gamma": 2}, ("alpha",), ("beta",))
