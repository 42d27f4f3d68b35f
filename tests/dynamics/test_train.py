"""lj.train: the claims of docs/theory.md section 5, tying, finite samples, KQV, divergence.

Tolerances. The Laplace route's quadrature error is below 1e-14 (docs/theory.md §3a),
and two simulations of the same dynamics differ only by float64 roundoff of
O(d) sums per step, a few 1e-16 per step relative; 1e-12 covers hundreds of
steps of that with a margin and still catches any real difference (a
different gradient moves θ by far more than 1e-12 in one step).
"""

import functools
import math

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.data.sampling import sample_counts
from lagjax.dynamics.runner import MAX_VALUE as MAX_RISK
from lagjax.dynamics.train import choose_partition, make_runner

EXACT = 1e-12


def assert_runs_close(run, other, atol=EXACT):
  """Risk records, (α, β) records and final params of two runs agree to atol."""
  np.testing.assert_array_equal(run.steps, other.steps)
  for name in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(run, name), getattr(other, name), rtol=0, atol=atol,
                               err_msg=name)
  assert set(run.params) == set(other.params)
  for name in run.params:
    np.testing.assert_allclose(run.params[name], other.params[name], rtol=0, atol=atol,
                               err_msg=name)


# ---------------------------------------------------------------------------
# The four claims at d = 10 from θ0 = 0 (docs/theory.md section 5).
# ---------------------------------------------------------------------------

CLAIMS_D = 10
CLAIMS_STEPS = 300


@functools.cache
def claims_run(name):
  """The runs of the claims at d = 10, built once per module."""
  lang = lj.occurrence(CLAIMS_D)
  plan = {
      "attention_only": lj.plans.attention_only(100.0, CLAIMS_STEPS),  # output_only's program
      "attention_first": lj.plans.attention_first(100.0, 1.0, CLAIMS_STEPS),
      "output_only": lj.plans.output_only(1.0, CLAIMS_STEPS),
      "three_phase": lj.plans.three_phase(10.0, 100.0, 1.0, CLAIMS_STEPS),
  }[name]
  return lj.train(lang, plan)


def least_squares_floor(d):
  """min_β R(α = 0, β) for occurrence(d), balanced geometric law, by hand.

  At α = 0, f = β_o + (β_a - β_o) x with x = c_a / n, so the floor is
  ½ (Var y - Cov(x, y)² / Var x) with Var y = 1, Cov(x, y) = E x = π and
  Var x = π (1 - π) E[1/n], E[1/n] = -p ln p / (1 - p) (docs/theory.md section 4).
  """
  p = lj.occurrence(d).length.p
  pi = 1.0 / d
  mean_inverse_length = -p * math.log(p) / (1 - p)
  return 0.5 - 0.5 * pi / ((1 - pi) * mean_inverse_length)


def laplace_floor(lang):
  """The same floor from laplace.attention_moments at α = 0 and a least-squares solve (one
  compiled program)."""
  partition = lj.partition.of_language(lang)
  moments = lj.risk.laplace.attention_moments(lang, partition)

  @jax.jit
  def floor(alpha):
    hessian, target = moments({"alpha": alpha})
    beta = jnp.linalg.lstsq(hessian, target)[0]
    return lj.dynamics.output_phase.quadratic_risk(hessian, target, beta)

  return float(floor(jnp.zeros(partition.num_groups)))


def test_least_squares_floor_at_d10():
  """The Laplace least-squares floor equals the hand formula and docs/theory.md §4's 0.2977."""
  floor = laplace_floor(lj.occurrence(CLAIMS_D))
  # Quadrature < 1e-14; the 2x2 solve adds a few ulps of its condition number (~50).
  assert abs(floor - least_squares_floor(CLAIMS_D)) < EXACT
  # docs/theory.md quotes 4 digits.
  assert abs(floor - 0.2977) < 5e-5


def test_attention_only_stays_at_half():
  """attention_only from zero never moves: R = 1/2 at every recorded step, α = β = 0."""
  run = claims_run("attention_only")
  assert run.risk.shape == (CLAIMS_STEPS + 1,)
  np.testing.assert_allclose(run.risk, 0.5, rtol=0, atol=EXACT)
  np.testing.assert_array_equal(run.alpha, 0.0)
  np.testing.assert_array_equal(run.beta, 0.0)
  assert not run.diverged


def test_attention_first_equals_output_only():
  """attention_first's first step is exactly zero, so it ends where output_only does."""
  first, only = claims_run("attention_first"), claims_run("output_only")
  for name in ("alpha", "beta"):
    np.testing.assert_allclose(first.params[name], only.params[name], rtol=0, atol=EXACT)
  # The whole trajectory, shifted by the null attention step.
  np.testing.assert_allclose(first.risk[1:], only.risk, rtol=0, atol=EXACT)
  # The output phase really moved β (the comparison is not between two zeros).
  assert np.abs(only.params["beta"]).max() > 0.1


def test_output_only_never_below_floor():
  """output_only never goes below the least-squares floor, and GD approaches it from above."""
  run = claims_run("output_only")
  floor = least_squares_floor(CLAIMS_D)
  assert run.risk.shape == (CLAIMS_STEPS + 1,)
  assert run.risk.min() >= floor - EXACT
  # GD with η = 1 below 2/λ_max is monotone on this quadratic.
  assert np.all(np.diff(run.risk) <= EXACT)
  assert run.risk[-1] - floor < 1e-3
  assert run.error[-1] > 0.05  # the floor is not a classifier: errors remain


def test_three_phase_learns():
  """three_phase(10, 100, 1, 300) at d = 10 ends below 1e-3 risk with zero 0-1 error."""
  run = claims_run("three_phase")
  assert run.error_route in ("threshold", "lattice")  # an exact 0-1 error route
  assert run.risk[-1] < 1e-3
  assert run.error[-1] == 0.0
  assert run.margin[-1] > 0  # attention favours the letter a
  assert not run.diverged and run.diverged_step == -1


# ---------------------------------------------------------------------------
# Tied (group) simulation vs all d tokens (docs/theory.md section 3b).
# ---------------------------------------------------------------------------

TIED_D = 6


def tied_theta0(cls=False):
  """A nonzero θ0 constant on the groups {a}, Σ∖{a} of occurrence(0)."""
  theta = lj.init_params(TIED_D, cls=cls)
  theta["alpha"] = jnp.array([0.4] + [-0.3] * (TIED_D - 1))
  theta["beta"] = jnp.array([0.2] + [-0.1] * (TIED_D - 1))
  return theta


@pytest.mark.parametrize("plan_name, theta0_name", [("three_phase", "zero"), ("joint", "cls")])
@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_tied_equals_full(plan_name, theta0_name):
  """tied="auto" (2 groups) and tied=False (d tokens) give the same run to 1e-12."""
  lang = lj.occurrence(TIED_D)
  plan = {"three_phase": lj.plans.three_phase(6.0, 36.0, 1.0, 4),
          "joint": lj.plans.joint(2.0, 5)}[plan_name]
  # The CLS case also starts away from zero (tied within the groups, CLS scores nonzero).
  theta0 = lj.init_params(TIED_D) if theta0_name == "zero" else dict(
      tied_theta0(cls=True), alpha_cls=jnp.array(0.1), beta_cls=jnp.array(-0.2))
  tied = lj.train(lang, plan, theta0)
  full = lj.train(lang, plan, theta0, tied=False)
  assert tied.tied and not full.tied
  assert_runs_close(tied, full)
  # Both groups moved, so the per-token gradient scaling (1/group size) was exercised.
  assert np.abs(full.alpha[-1] - full.alpha[0]).max() > 1e-3
  assert np.abs(full.beta[-1] - full.beta[0]).max() > 1e-3
  if theta0_name == "cls":
    assert abs(float(full.params["beta_cls"]) + 0.2) > 1e-3
    assert abs(float(full.params["alpha_cls"]) - 0.1) > 1e-6


def test_tied_true_refuses_untied_theta0():
  """tied=True with θ0 not constant on the groups is an error, not a silent full run."""
  lang = lj.occurrence(TIED_D)
  theta = tied_theta0()
  theta["beta"] = theta["beta"].at[2].set(0.5)
  with pytest.raises(ValueError, match="tied=True"):
    lj.train(lang, lj.plans.joint(1.0, 2), theta, tied=True)
  partition = choose_partition(lang, theta, lj.plans.joint(1.0, 2), "auto")
  assert partition.num_groups == TIED_D


# ---------------------------------------------------------------------------
# Finite samples (Empirical objectives).
# ---------------------------------------------------------------------------

SAMPLE_D = 5
N_SAMPLES = 300
BATCH = 7
SAMPLE_ETAS = (0.7, 0.4, 0.5)


def random_theta(d, seed):
  rng = np.random.default_rng(seed)
  return {"alpha": jnp.asarray(rng.normal(0, 0.5, d)), "beta": jnp.asarray(rng.normal(0, 0.5, d))}


def empirical_risk_by_loop(theta, counts, labels):
  """½ mean (f - y)², f = Σ c e^α β / Σ c e^α, one string at a time in numpy."""
  alpha, beta = np.asarray(theta["alpha"]), np.asarray(theta["beta"])
  total = 0.0
  for count, label in zip(np.asarray(counts), np.asarray(labels)):
    weights = count * np.exp(alpha)
    f = float(np.sum(weights * beta) / np.sum(weights))
    total += 0.5 * (f - label) ** 2
  return total / len(labels)


@jax.jit
def empirical_risk(theta, counts, labels):
  """The same empirical risk in jnp, written independently of lagjax.models."""
  weights = counts * jnp.exp(theta["alpha"])
  f = (weights @ theta["beta"]) / weights.sum(-1)
  return jnp.mean(0.5 * (f - labels) ** 2)


empirical_grad = jax.jit(jax.grad(empirical_risk))
jitted_sample_counts = jax.jit(sample_counts, static_argnums=(1, 2))


def test_sample_counts():
  """Rows are counts of strings of the sampled lengths (>= 1); labels match label_counts."""
  lang = lj.occurrence(SAMPLE_D)
  key = jax.random.key(3)
  n = 4000
  counts, labels = sample_counts(key, lang, n)
  chex.assert_shape(counts, (n, SAMPLE_D))
  chex.assert_shape(labels, (n,))
  counts = np.asarray(counts)
  np.testing.assert_array_equal(counts, np.round(counts))
  assert counts.min() >= 0
  lengths = counts.sum(1)
  assert lengths.min() >= 1
  # The lengths are the length law's draws from the first half of the split key.
  np.testing.assert_array_equal(lengths, lang.length.sample(jax.random.split(key)[0], (n,)))
  np.testing.assert_array_equal(labels, lang.label_counts(counts))
  np.testing.assert_array_equal(labels, np.where(counts[:, 0] > 0, 1.0, -1.0))
  # Law checks at 5 standard errors (fixed key, so not flaky): mean length 1/p,
  # each token a fraction π = 1/d of the tokens, P(y = +1) = 1/2.
  p = lang.length.p
  assert abs(lengths.mean() - 1 / p) < 5 * math.sqrt((1 - p) / p**2 / n)
  share = counts.sum(0) / lengths.sum()
  np.testing.assert_allclose(share, 1 / SAMPLE_D, atol=5 * math.sqrt(0.2 * 0.8 / lengths.sum()))
  assert abs(np.mean(labels == 1) - 0.5) < 5 * math.sqrt(0.25 / n)


@functools.cache
def empirical_run():
  """Output 1 step on Empirical(N), both 1 step on Empirical(N), output 1 minibatch step."""
  lang = lj.occurrence(SAMPLE_D)
  eta1, eta2, eta3 = SAMPLE_ETAS
  plan = lj.plans.custom([
      lj.plans.Phase("output", eta1, 1, objective=lj.plans.Empirical(N_SAMPLES)),
      lj.plans.Phase("both", eta2, 1, objective=lj.plans.Empirical(N_SAMPLES)),
      lj.plans.Phase("output", eta3, 1, objective=lj.plans.Empirical(N_SAMPLES, BATCH)),
  ])
  key = jax.random.key(11)
  theta0 = random_theta(SAMPLE_D, 0)
  return lang, theta0, key, lj.train(lang, plan, theta0, key=key)


@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_empirical_steps_are_gradients_of_explicit_sums():
  """Each Empirical step: θ_{t+1} = θ_t - η ∇(½ mean (f - y)²) on its phase's own sample.

  Phase i samples with fold_in(key, i) and a minibatch step t draws its rows
  with randint(fold_in(key, t)) (lagjax/dynamics/train.py); the expected steps are
  rebuilt here from those samples.
  """
  lang, theta0, key, run = empirical_run()
  assert not run.tied
  chex.assert_shape(run.beta, (4, SAMPLE_D))
  alpha, beta = run.alpha, run.beta
  eta1, eta2, eta3 = SAMPLE_ETAS
  samples = [jitted_sample_counts(jax.random.fold_in(key, i), lang, N_SAMPLES)
             for i in range(3)]
  counts, labels = samples[0]
  # The two independent implementations of the empirical risk agree (roundoff of
  # N = 300 terms of size <= 2: < 1e-13).
  assert abs(empirical_risk_by_loop(theta0, counts, labels)
             - float(empirical_risk(theta0, counts, labels))) < 1e-13
  # Gradients of size O(1) summed over N terms: roundoff < 1e-13; 1e-10 leaves margin.
  theta = dict(theta0)
  np.testing.assert_array_equal(beta[0], theta0["beta"])
  grads = empirical_grad(theta, *samples[0])
  theta = dict(theta, beta=theta["beta"] - eta1 * grads["beta"])
  np.testing.assert_allclose(alpha[1], theta0["alpha"], rtol=0, atol=0)
  np.testing.assert_allclose(beta[1], theta["beta"], rtol=0, atol=1e-10)
  theta = {"alpha": alpha[1], "beta": beta[1]}
  grads = empirical_grad(theta, *samples[1])
  assert np.abs(grads["alpha"]).max() > 1e-3  # the attention step is not trivially zero
  np.testing.assert_allclose(alpha[2], theta["alpha"] - eta2 * grads["alpha"], rtol=0,
                             atol=1e-10)
  np.testing.assert_allclose(beta[2], theta["beta"] - eta2 * grads["beta"], rtol=0, atol=1e-10)
  theta = {"alpha": alpha[2], "beta": beta[2]}
  rows = jax.random.randint(jax.random.fold_in(key, 2), (BATCH,), 0, N_SAMPLES)
  counts, labels = samples[2]
  grads = empirical_grad(theta, counts[rows], labels[rows])
  np.testing.assert_allclose(alpha[3], theta["alpha"], rtol=0, atol=0)
  np.testing.assert_allclose(beta[3], theta["beta"] - eta3 * grads["beta"], rtol=0, atol=1e-10)
  # The full-sample step differs from the minibatch step (the batch really is a subsample).
  full = empirical_grad(theta, counts, labels)
  assert np.abs(full["beta"] - grads["beta"]).max() > 1e-4


# ---------------------------------------------------------------------------
# KQV form (docs/theory.md section 2).
# ---------------------------------------------------------------------------


def test_kqv_to_direct_by_hand():
  """α_σ = (e_cls W_Q)·(E_σ W_K)/√k and β_σ = (E_σ W_V)·w_o on a d = 3, m = 2, k = 2 example."""
  trainable = {"W_Q": jnp.array([[1.0, 2.0], [0.0, -1.0]]),
               "W_K": jnp.array([[3.0, 1.0], [-1.0, 2.0]]),
               "W_V": jnp.array([[1.0, 0.0], [2.0, 1.0]]),
               "w_o": jnp.array([1.0, -2.0])}
  fixed = {"E": jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), "e_cls": jnp.array([1.0, 2.0])}
  # e_cls W_Q = (1, 0); E W_K rows: (3, 1), (-1, 2), (2, 3); so α = (3, -1, 2)/√2.
  # E W_V rows: (1, 0), (2, 1), (3, 1); dotted with w_o = (1, -2): β = (1, 0, 1).
  direct = lj.models.kqv.kqv_to_direct(trainable, fixed)
  np.testing.assert_allclose(direct["alpha"], np.array([3.0, -1.0, 2.0]) / math.sqrt(2),
                             rtol=0, atol=1e-15)
  np.testing.assert_allclose(direct["beta"], [1.0, 0.0, 1.0], rtol=0, atol=1e-15)


def test_train_kqv():
  """train_kqv: finite records, step 0 = the init it draws, step 1 = one GD step on the weights."""
  d, eta, scale = 5, 0.5, 0.3
  lang = lj.occurrence(d)
  key = jax.random.key(7)
  run = lj.train_kqv(lang, lj.plans.joint(eta, 4), key, scale=scale)
  chex.assert_tree_all_finite((run.risk, run.alpha, run.beta, run.params))
  chex.assert_shape(run.alpha, (5, d))
  assert not run.diverged
  # train_kqv draws the init from the first half of split(key).
  trainable, fixed = lj.models.kqv.init_kqv(jax.random.split(key)[0], d, scale=scale)
  init = lj.models.kqv.kqv_to_direct(trainable, fixed)
  np.testing.assert_allclose(run.alpha[0], init["alpha"], rtol=0, atol=1e-15)
  np.testing.assert_allclose(run.beta[0], init["beta"], rtol=0, atol=1e-15)
  risk = lj.risk_fn(lang).risk

  @jax.jit  # one compiled program
  def by_hand(trainable, init):
    """One joint SGD step on all four weight matrices, and the risk at the init."""
    grads = jax.grad(lambda w: risk(lj.models.kqv.kqv_to_direct(w, fixed)))(trainable)
    stepped = jax.tree_util.tree_map(lambda w, g: w - eta * g, trainable, grads)
    return lj.models.kqv.kqv_to_direct(stepped, fixed), risk(init)

  after, init_risk = by_hand(trainable, init)
  np.testing.assert_allclose(run.alpha[1], after["alpha"], rtol=0, atol=EXACT)
  np.testing.assert_allclose(run.beta[1], after["beta"], rtol=0, atol=EXACT)
  np.testing.assert_allclose(run.risk[0], init_risk, rtol=0, atol=EXACT)
  assert run.risk[-1] < run.risk[0]


# ---------------------------------------------------------------------------
# Divergence.
# ---------------------------------------------------------------------------

# The runs of output_only at d = 5 share one length, so lj.train compiles their loop once.
DIVERGENCE_STEPS = 8


def test_divergence_is_marked_and_frozen():
  """A huge η is marked diverged at the first step whose objective blows up; records stay finite."""
  lang = lj.occurrence(5)
  run = lj.train(lang, lj.plans.output_only(1e6, DIVERGENCE_STEPS))
  assert bool(run.diverged)
  step = int(run.diverged_step)
  assert step >= 0
  chex.assert_tree_all_finite((run.risk, run.alpha, run.beta, run.params))
  risk = np.asarray(run.risk)
  # The step that diverges is the first whose objective (the record before it) is
  # non-finite or above max_risk; earlier records are the unfrozen trajectory.
  first_bad = int(np.argmax(~np.isfinite(risk) | (risk > MAX_RISK)))
  assert step == first_bad
  # β1 = (2e5, -5e4, …) has R ~ 1e9 > max_risk = 1e8, so step 1 is the first bad one.
  assert step == 1
  # From then on every record and the final params are the last finite params.
  for name in ("alpha", "beta"):
    np.testing.assert_array_equal(getattr(run, name)[step:],
                                  np.broadcast_to(getattr(run, name)[step],
                                                  getattr(run, name)[step:].shape))
    np.testing.assert_array_equal(run.params[name], getattr(run, name)[step])
  # The first step really was taken with η = 1e6 (β1 = -η ∂R/∂β at zero, docs/theory.md §4).
  np.testing.assert_allclose(run.beta[1, 0], 1e6 / 5, rtol=1e-12)


def test_divergence_does_not_leak_across_a_vmap():
  """Vmapped over η, a diverging lane leaves the other lane equal to its own run."""
  lang = lj.occurrence(5)
  plan = lj.plans.output_only(1.0, DIVERGENCE_STEPS)
  theta0 = lj.init_params(5)
  partition = choose_partition(lang, theta0, plan, "auto")
  run = make_runner(lang, plan.slots(), partition, num_steps=plan.total_steps)
  grouped = {k: jnp.asarray(partition.group(v)) for k, v in theta0.items()}
  data = jax.vmap(lambda etas: plan.data(etas=etas))(jnp.array([[1.0], [1e6]]))
  both = jax.jit(jax.vmap(run, in_axes=(None, None, 0)))(grouped, jax.random.key(0), data)
  np.testing.assert_array_equal(both.diverged, [False, True])
  assert int(both.diverged_step[0]) == -1 and int(both.diverged_step[1]) >= 0
  chex.assert_tree_all_finite((both.risk, both.alpha, both.beta))
  alone = lj.train(lang, plan)
  np.testing.assert_allclose(both.risk[0], alone.risk, rtol=0, atol=EXACT)
  np.testing.assert_allclose(both.beta[0], alone.beta, rtol=0, atol=EXACT)
  assert alone.risk[-1] < alone.risk[0] - 0.1


def test_divergence_guard_rejects_non_finite_new_params():
  """From β0 = 50 at d = 5, output_only(1e308, 8): R(θ0) ~ 1e3 is finite and below max_risk,
  but the step η ∂R/∂β overflows, so the new params are not finite. The guard must mark
  the run diverged at step 0 and keep θ0 in every record. (A guard that checks only
  the objective accepts the infinite params and marks step 1, with NaN records.)"""
  lang = lj.occurrence(5)
  theta0 = {"alpha": np.zeros(5), "beta": np.full(5, 50.0)}
  run = lj.train(lang, lj.plans.output_only(1e308, DIVERGENCE_STEPS), theta0)
  assert bool(run.diverged) and int(run.diverged_step) == 0
  chex.assert_tree_all_finite((run.risk, run.error, run.alpha, run.beta, run.margin, run.params))
  assert 1e3 < float(run.risk[0]) < MAX_RISK
  for name in ("alpha", "beta"):
    np.testing.assert_array_equal(getattr(run, name),
                                  np.broadcast_to(theta0[name], getattr(run, name).shape))
    np.testing.assert_array_equal(run.params[name], theta0[name])


# ---------------------------------------------------------------------------
# Records and bad input.
# ---------------------------------------------------------------------------


def test_record_every_thins_the_records():
  """record_every = 70 keeps every 70th record of the record_every = 1 run, and step T."""
  every = claims_run("three_phase")
  plan = lj.plans.three_phase(10.0, 100.0, 1.0, CLAIMS_STEPS)  # T = 302
  thinned = lj.train(lj.occurrence(CLAIMS_D), plan, record_every=70)
  kept = np.array([0, 70, 140, 210, 280, 302])
  np.testing.assert_array_equal(thinned.steps, kept)
  np.testing.assert_array_equal(every.steps, np.arange(CLAIMS_STEPS + 3))
  np.testing.assert_allclose(thinned.risk, every.risk[kept], rtol=0, atol=EXACT)
  np.testing.assert_allclose(thinned.beta, every.beta[kept], rtol=0, atol=EXACT)
  np.testing.assert_allclose(thinned.error, every.error[kept], rtol=0, atol=EXACT)


def test_zero_one_false_leaves_the_error_out_and_nothing_else():
  """zero_one=False (the atlas's GD runs) drops records error and its route, and the run is
  the same to the bit: the 0-1 error is only read, never stepped on."""
  pairs = lj.languages.from_spec("even_pairs")
  theta0 = lj.models.direct.init_params(pairs.d, query="last", positions="first_last")
  plan = lj.plans.joint(1.0, 6)
  full = lj.train(pairs, plan, theta0)
  light = lj.train(pairs, plan, theta0, zero_one=False)
  assert "error" in full.records and "error" not in light.records
  assert dict(full.info)["error_route"] == "automaton"
  assert dict(light.info)["error_route"] == "none"
  for name in ("risk", "alpha", "beta"):
    np.testing.assert_array_equal(getattr(light, name), getattr(full, name))
  np.testing.assert_array_equal(light.records["margin"], full.records["margin"])


def test_optimization_level_changes_the_program_not_the_run(jit_options):
  """A run compiled at XLA level 2 (not the suite's -O0; the option reaches jax.jit) equals
  the default one within roundoff: the same float64 operations, fused or ordered differently
  (EXACT covers hundreds of steps, above)."""
  lang, plan = lj.occurrence(5), lj.plans.joint(1.0, 6)
  default = lj.train(lang, plan)
  assert {"xla_backend_optimization_level": 2} not in jit_options
  level_2 = lj.train(lang, plan, optimization_level=2)
  assert {"xla_backend_optimization_level": 2} in jit_options
  assert np.ptp(np.asarray(default.risk)) > 1e-3   # the run moves
  for name in ("risk", "alpha", "beta"):
    np.testing.assert_allclose(getattr(level_2, name), getattr(default, name), rtol=0,
                               atol=EXACT)


@pytest.mark.parametrize("options, field", [
    ({"record_every": 0}, "record_every"), ({"record_every": 1.5}, "record_every"),
    ({"max_risk": 0.0}, "max_risk"), ({"tied": "yes"}, "tied"),
    ({"optimization_level": 4}, "optimization_level"),
    ({"optimization_level": True}, "optimization_level"),
])
def test_bad_train_options(options, field):
  with pytest.raises(ValueError, match=field):
    lj.train(lj.occurrence(5), lj.plans.joint(1.0, 2), **options)


def test_bad_train_arguments():
  lang = lj.occurrence(5)
  with pytest.raises(ValueError, match="plan"):
    lj.train(lang, "three_phase")
  with pytest.raises(ValueError, match="lang"):
    lj.train("occurrence", lj.plans.joint(1.0, 2))
  with pytest.raises(ValueError, match="record_every"):
    lj.train_kqv(lang, lj.plans.joint(1.0, 2), jax.random.key(0), record_every=0)
  with pytest.raises(ValueError, match="shape"):
    lj.train(lang, lj.plans.joint(1.0, 2), lj.init_params(4))
