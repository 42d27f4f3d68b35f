"""Tests for the blind spots of the issue-17 mutation campaign (docs/results/mutation/campaign.md).

Each test kills at least one surviving mutant of that campaign (named in its docstring) and
passes on the real code. All are fast: no training run, at most a few small jitted routes.
"""

import functools
import itertools
import types
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.risk import laplace

# --- lagjax/risk/laplace.py ------------------------------------------------------------------


def _three_letters():
  """d = 3, uniform π, geometric lengths of mean 2: strings often lack the top-score token,
  so every score window carries mass."""
  return lj.occurrence(3, 0, length=lj.geometric(0.5))


def test_points_needed_equals_the_routes_own_count():
  """points_needed (the grid sizing of lj.population_risk) counts the lattice points of the
  windows the route itself lays, centred at max α - α. Both counts are integers from the same
  merged_windows call on the same centres, so they agree exactly. At α = (0, -0.1, -30.6) the
  reflected centres max α + α floor onto the lattice differently (297 points, not 296).
  Kills: points_needed with alpha.max() + alpha."""
  lang = _three_letters()
  params = {"alpha": np.array([0.0, -0.1, -30.6]), "beta": np.array([1.0, -0.5, 2.0])}
  report = jax.jit(laplace.build(lang).report)(params)
  assert bool(report["grid_covered"])
  assert laplace.points_needed(lang, params) == int(report["grid_points_needed"]) == 296


def test_default_grid_holds_every_window_up_to_eight():
  """default_num_points: every window gets its nodes when there are at most 8 (docstring),
  MAX_CLUSTERS windows beyond. Integer arithmetic: exact.
  Kills: `windows < 8` instead of `windows <= 8`."""
  width = 174
  assert laplace.default_num_points(8, width) == 8 * width
  assert laplace.default_num_points(9, width) == laplace.MAX_CLUSTERS * width


def test_attention_moments_with_cls_give_the_laplace_risk():
  """With CLS, R(β) = ½ βᵀHβ - gᵀβ + ½ from attention_moments (docs/theory.md 3a) equals the
  Laplace route's risk at the same θ, and the default grid equals one sized explicitly for
  G + 1 windows. Scores 25 apart, CLS lowest (it is in every string, so a token scored far
  below it would carry no mass): the 4 windows (3 groups + CLS) need 473 lattice points, more
  than a grid for 2 windows (348) holds, and a string of token 2 only (probability 0.2) needs
  the window of token 2. Both sides are the same
  trapezoid sums on the same nodes (same step, window and node count), so they differ by
  float64 rounding only: sums of < 10³ terms of size < 10, far below 1e-10.
  Kills: attention_moments with num_groups - int(cls) windows; group_moments dividing by
  the CLS decay e^{-t u_cls} in H instead of multiplying."""
  lang = _three_letters()
  params = {"alpha": np.array([0.0, -25.0, -50.0]), "beta": np.array([1.0, -0.5, 2.0]),
            "alpha_cls": np.asarray(-75.0), "beta_cls": np.asarray(0.7)}
  width = laplace.window_width(lang)
  default = laplace.attention_moments(lang, cls=True)
  explicit = laplace.attention_moments(lang, cls=True, num_points=4 * width)
  route = laplace.build(lang, cls=True)

  @jax.jit  # one compiled program
  def evaluate(params):
    return default(params), explicit(params), route.report(params)["grid_covered"], \
        route.risk(params)

  (hessian, g), explicit, covered, risk = evaluate(params)
  np.testing.assert_allclose(hessian, explicit[0], rtol=0, atol=1e-12)
  np.testing.assert_allclose(g, explicit[1], rtol=0, atol=1e-12)
  beta = np.concatenate([params["beta"], [params["beta_cls"]]])
  from_moments = 0.5 * beta @ np.asarray(hessian) @ beta - np.asarray(g) @ beta + 0.5
  assert bool(covered)
  assert abs(from_moments - float(risk)) < 1e-10


# --- lagjax/risk/lattice.py ------------------------------------------------------------------


@pytest.mark.parametrize("num_groups, n_max", [(1, 5), (2, 3), (3, 4)])
def test_count_vectors_are_every_vector_once_and_num_count_vectors_counts_them(num_groups,
                                                                                n_max):
  """count_vectors lists each c ∈ N^G with 1 <= Σc <= N exactly once (checked against
  itertools), and num_count_vectors = C(N + G, G) - 1 is their number (the size the route
  checks against max_vectors). Integer enumeration: exact.
  Kills: num_count_vectors off by one or two; count_vectors starting from two empty rows."""
  from lagjax.risk import lattice
  rows = lattice.count_vectors(num_groups, n_max)
  expected = sorted(c for c in itertools.product(range(n_max + 1), repeat=num_groups)
                    if 1 <= sum(c) <= n_max)
  assert sorted(map(tuple, rows.tolist())) == expected
  assert lattice.num_count_vectors(num_groups, n_max) == len(expected)


def test_lattice_max_vectors_refuses_only_larger_enumerations():
  """max_vectors is the largest enumeration the route accepts (docstring: "refuse
  enumerations larger than this"): exactly the needed size builds, one less refuses.
  Kills: `size >= max_vectors`."""
  from lagjax.data import lengths as lengths_lib
  from lagjax.risk import lattice
  lang = lj.occurrence(3, 0, length=lj.geometric(0.5))
  tol = 1e-12
  n_max = lengths_lib.truncation_length(lang.length, tol / 2)
  size = lattice.num_count_vectors(3, n_max)
  lattice.build(lang, tol=tol, max_vectors=size)
  with pytest.raises(ValueError, match="max_vectors"):
    lattice.build(lang, tol=tol, max_vectors=size - 1)


# --- lagjax/risk/sampled.py ------------------------------------------------------------------


def test_sampled_report_is_the_sample_mean_and_standard_error():
  """report() of the sampled route gives, over its fixed sample, the mean loss and mean 0-1
  error and their standard errors std(ddof=1)/√n (the Bessel-corrected estimate), recomputed
  here string by string from the same batches. Same float64 terms summed in another order
  (n = 64 terms of size < 10): rtol 1e-10 is rounding only. θ is chosen so that the 0-1 error
  lies strictly between 0 and 1 (asserted), so error² and error³ differ.
  Kills: error_stderr with error**3; stderr with (total - 2); ℓ³ in place of ℓ² in the sums;
  risk() returning the mean ℓ² (sums[1]); build without a partition keeping None."""
  from lagjax.models import direct
  from lagjax.risk import base, sampled
  lang = lj.occurrence(3, 0, length=lj.geometric(0.3))
  params = {"alpha": np.array([0.5, -0.2, 0.1]), "beta": np.array([1.5, -0.7, 0.2])}
  key, n = jax.random.key(3), 64
  route = sampled.build(key, lang, n_samples=n)
  report = route.report(params)
  losses, errors = [], []

  @jax.jit  # one compiled program per batch shape
  def per_string(params, batch):
    f = direct.forward_tokens(params, batch.tokens, batch.mask)
    return base.squared_loss(f, batch.labels), base.zero_one_error(f, batch.labels)

  for batch in sampled.sample_batches(key, lang, n):
    keep = np.asarray(batch.weight) > 0
    loss, error = per_string(params, batch)
    losses.append(np.asarray(loss)[keep])
    errors.append(np.asarray(error)[keep])
  losses, errors = np.concatenate(losses), np.concatenate(errors)
  assert losses.size == n == report["n_samples"]
  assert 0.0 < errors.mean() < 1.0
  for name, values in (("risk", losses), ("error", errors)):
    np.testing.assert_allclose(float(report[name]), values.mean(), rtol=1e-10)
  np.testing.assert_allclose(float(route.risk(params)), losses.mean(), rtol=1e-10)
  for name, values in (("stderr", losses), ("error_stderr", errors)):
    np.testing.assert_allclose(float(report[name]), values.std(ddof=1) / np.sqrt(n), rtol=1e-10)


def test_sample_buckets_are_powers_of_two():
  """Strings are padded to power-of-two widths of at least 8 (bucket_length's contract), so
  the chunk shapes, and with them the compilations of _chunk_sums, come from a handful of
  buckets; each width is the smallest such bucket for its strings. Integer arithmetic: exact.
  Kills: bucket_length with a floor of 9; sample_batches with 3**k widths."""
  from lagjax.risk import sampled
  assert [sampled.bucket_length(n) for n in (1, 2, 8, 9, 16, 17, 1000)] == [8, 8, 8, 16, 16,
                                                                          32, 1024]
  lang = lj.occurrence(3, 0, length=lj.geometric(0.05))  # mean length 20: several buckets
  widths = set()
  for batch in sampled.sample_batches(jax.random.key(0), lang, 200):
    width = batch.tokens.shape[1]
    lengths = np.asarray(batch.mask).sum(axis=1)[np.asarray(batch.weight) > 0]
    assert width == sampled.bucket_length(int(lengths.max()))
    assert all(sampled.bucket_length(int(n)) == width for n in lengths)
    widths.add(width)
  assert len(widths) >= 3


# --- lagjax/risk/error.py --------------------------------------------------------------------


def test_threshold_error_route_equals_the_lattice_error():
  """The threshold 0-1 error route (binomial count law of the letters, O(N)) equals the
  lattice route's exact 0-1 error on the same two-group θ. π_L = 0.4, so the binomial pmf
  depends on log π_L; β of opposite signs put the decision threshold inside (0, n) for every
  length. Both routes are exact up to their certified tails (threshold: `tail`; lattice:
  error_bound, both from tol = 1e-12) plus float64 rounding of < 10⁴ terms of size <= 1
  (< 1e-12). Kills: c / log π_L in place of c · log π_L."""
  from lagjax.risk import error as error_lib
  from lagjax.risk import lattice
  lang = lj.any_of(5, (0, 1), length=lj.geometric(0.3))  # uniform π: π_L = 0.4
  partition = lj.partition.of_language(lang)
  params = {"alpha": np.array([0.3, -0.2]), "beta": np.array([1.0, -0.8])}
  value, tail = jax.jit(error_lib.build(lang, partition))(params)
  report = jax.jit(lattice.build(lang, partition, tol=1e-12).report)(params)
  assert 0.05 < float(report["error"]) < 0.95
  assert abs(float(value) - float(report["error"])) <= (float(tail) + float(report["error_bound"])
                                                        + 1e-12)


def test_threshold_error_route_needs_the_letters_as_one_of_two_groups():
  """error.supports: the threshold route applies on two token groups exactly when one of them
  is L, the letters (docstring: "on the two token groups L and the rest"); a two-group
  partition that splits L is refused, by supports and by build (ValueError, as its docstring
  says), and choose falls through to the lattice. Exact: booleans.
  Kills: `set(b) != set(letters)` in supports (true for any two-group partition, since a
  split never equals L; build then dies on StopIteration, not ValueError)."""
  from lagjax.risk import error as error_lib
  lang = lj.any_of(5, (0, 1), length=lj.geometric(0.3))
  assert error_lib.supports(lang, lj.partition.of_language(lang))
  for blocks in (((0, 2), (1, 3, 4)), ((0,), (1, 2, 3, 4))):
    split = lj.partition.Partition(blocks)
    assert not error_lib.supports(lang, split)
    assert error_lib.choose(lang, split) == "lattice"
    with pytest.raises(ValueError, match="threshold error route"):
      error_lib.build(lang, split)


def test_error_choose_picks_the_lattice_only_where_the_lattice_builds():
  """error.choose says "lattice" only where lattice.build accepts the enumeration: both size it
  with lengths up to N(tol/2). At d = 3 (three singleton groups) and geometric p = 0.085,
  N(tol/2) = 319 needs 5,512,639 count vectors (> lattice.MAX_VECTORS = 5,000,000) while
  N(2 tol) = 304 would need 4,775,384, so choose must not say "lattice" (today it gives None
  and best_route samples the error) where lattice.build refuses. Integer counts: exact.
  Kills: tol * 2 for tol / 2 in choose (it would pick a lattice that then refuses to build)."""
  from lagjax.data import lengths as lengths_lib
  from lagjax.risk import error as error_lib
  from lagjax.risk import lattice
  lang = lj.occurrence(3, 0, length=lj.geometric(0.085))
  partition = lj.partition.singletons(3)
  tol = 1e-12
  assert lattice.num_count_vectors(3, lengths_lib.truncation_length(lang.length, 2 * tol)) <= \
      lattice.MAX_VECTORS
  assert error_lib.choose(lang, partition, tol) != "lattice"
  with pytest.raises(ValueError, match="max_vectors"):
    lattice.build(lang, partition, tol=tol)


def test_best_route_uses_the_route_choose_picks():
  """error.best_route builds the route `choose` names: the O(N) threshold route for a tied
  occurrence language (two groups, the letter and the rest), the lattice for all_of on
  singletons at d = 3, and returns that name; its error is the chosen route's own (the same
  function on the same θ, so equal exactly).
  Kills: `name != "threshold"` in best_route (the threshold case fell to the sampled route,
  the lattice case into the threshold builder, which refuses it)."""
  from lagjax.risk import error as error_lib
  from lagjax.risk import lattice
  lang = lj.occurrence(3, 0, length=lj.geometric(0.5))
  partition = lj.partition.of_language(lang)
  report, name = error_lib.best_route(lang, partition)
  assert name == "threshold"
  params = {"alpha": np.array([0.3, -0.2]), "beta": np.array([1.0, -0.8])}
  assert float(jax.jit(report)(params)["error"]) == float(
      jax.jit(error_lib.build(lang, partition))(params)[0])
  lang = lj.all_of(3, (0, 1), length=lj.geometric(0.5))
  singletons = lj.partition.singletons(3)
  report, name = error_lib.best_route(lang, singletons)
  assert name == "lattice"
  params = {"alpha": np.array([0.3, -0.2, 0.1]), "beta": np.array([1.0, -0.8, 0.5])}
  assert float(jax.jit(report)(params)["error"]) == float(
      jax.jit(lattice.build(lang, singletons).report)(params)["error"])


def test_threshold_error_route_tabulates_lengths_up_to_4096():
  """The threshold route tabulates the binomial CDFs for n <= N <= error.MAX_TABLE_LENGTH =
  4096 (docs/theory.md §3): fixed length 4096 takes it, fixed length 4097 does not (today
  choose gives None there: the lattice would need C(4099, 2) - 1 = 8,398,850 count vectors
  on two groups, over lattice.MAX_VECTORS, so best_route samples) and build refuses it.
  Pure Python, no table built; integers: exact. Kills: MAX_TABLE_LENGTH = 4097."""
  from lagjax.risk import error as error_lib
  fits, over = (lj.occurrence(2, 0, length=lj.fixed(n0)) for n0 in (4096, 4097))
  assert error_lib.choose(fits, lj.partition.of_language(fits)) == "threshold"
  assert error_lib.choose(over, lj.partition.of_language(over)) != "threshold"
  with pytest.raises(ValueError, match="tabulates lengths up to 4096"):
    error_lib.build(over, lj.partition.of_language(over))


# --- lagjax/dynamics/plans.py ----------------------------------------------------------------


def test_phase_index_clips_to_the_last_phase_and_skips_empty_slots():
  """phase_index: the slot active at a global step, clipped to the last slot past the end;
  zero-length slots are never active (docstring). Integer searchsorted: exact.
  Kills: the clip at ends.shape[0] + 1 instead of - 1."""
  lengths = np.array([2, 0, 3])
  got = [int(lj.plans.phase_index(step, lengths)) for step in range(8)]
  assert got == [0, 0, 2, 2, 2, 2, 2, 2]
  plan = lj.plans.three_phase(0.1, 0.2, 0.3, 4)
  assert [int(plan.phase_index(step)) for step in (0, 1, 2, 5, 6, 50)] == [0, 1, 2, 2, 2, 2]


def test_empirical_accepts_one_sample():
  """Empirical(n_samples) takes any integer N >= 1 (validation bound 1); 0 is refused.
  Kills: the lower bound 2."""
  assert lj.plans.Empirical(1).n_samples == 1
  assert lj.plans.Empirical(1.0, batch_size=1).n_samples == 1
  with pytest.raises(ValueError, match="n_samples"):
    lj.plans.Empirical(0)


def test_phase_default_step_size_is_one():
  """Phase(group) without eta trains with η = 1 (the dataclass default, what a plan built
  from bare phases runs with). Exact. Kills: the default 2.0."""
  plan = lj.plans.custom([lj.plans.Phase("output", steps=2), lj.plans.Phase("both")])
  np.testing.assert_array_equal(plan.etas, [1.0, 1.0])
  assert float(plan.learning_rate()(0)) == 1.0


def test_plan_padding_to_num_slots():
  """Plan.slots / Plan.data pad a plan to num_slots >= #phases: exactly #phases slots is
  allowed (no padding), 5 slots add 2 zero-length slots with η = 0 that train nothing, and
  fewer slots than phases are refused. Exact: integers and the literal step sizes.
  Kills: `num_slots <= len(plan.phases)` refusing a full plan; padding = num_slots +
  #phases."""
  plan = lj.plans.three_phase(0.1, 0.2, 0.3, 4)
  assert len(plan.slots(3)) == 3
  np.testing.assert_array_equal(plan.data(3).lengths, [1, 1, 4])
  slots, data = plan.slots(5), plan.data(5)
  assert len(slots) == 5 and slots[3] == slots[4] == slots[2]
  np.testing.assert_array_equal(data.lengths, [1, 1, 4, 0, 0])
  np.testing.assert_array_equal(data.etas, [0.1, 0.2, 0.3, 0.0, 0.0])
  assert data.trains.shape == (5, 2) and not np.asarray(data.trains)[3:].any()
  with pytest.raises(ValueError, match="num_slots"):
    plan.slots(2)


# --- lagjax/dynamics/runner.py ---------------------------------------------------------------


def test_record_grid_by_hand():
  """record_grid(T, K) = round(kT/K), k = 0…K, joined with round(T^(k/(K-1))), k = 0…K-1
  (docstring): for T = 100, K = 4 the uniform part is 0, 25, 50, 75, 100 and the geometric
  part 1, 5 (4.64), 22 (21.5), 100. Integers: exact.
  Kills: the uniform part with K + 2 points (linspace(0, T, K + 2))."""
  grid = lj.runner.record_grid(100, 4)
  np.testing.assert_array_equal(grid, [0, 1, 5, 22, 25, 50, 75, 100])
  np.testing.assert_array_equal(lj.runner.uniform_records(100, 4),
                                [True, False, False, False, True, True, True, True])


def test_divergence_rule_keeps_a_step_at_exactly_max_value():
  """step_is_finite: a step counts when its objective is finite and <= max_value (docs and
  docstring): the objective equal to max_value is kept, the next float above is not, and a
  non-finite parameter is refused. Exact float comparisons.
  Kills: `value < max_value`."""
  params = {"beta": jnp.ones(2)}
  limit = lj.runner.MAX_VALUE
  assert bool(lj.runner.step_is_finite(jnp.float64(limit), limit, params))
  assert not bool(lj.runner.step_is_finite(jnp.nextafter(jnp.float64(limit), jnp.inf), limit,
                                           params))
  assert not bool(lj.runner.step_is_finite(1.0, limit, {"beta": jnp.array([1.0, jnp.nan])}))


def test_make_loop_rejects_a_record_grid_that_does_not_end_at_num_steps():
  """record_steps must rise from 0 to num_steps: a grid that stops short, one that starts
  late and one that falls are each refused before anything runs.
  Kills: the end check joined to the monotonicity check with `and`."""
  plan = lj.plans.joint(0.1, 4)
  for grid in ([0, 2, 3], [1, 2, 4], [0, 3, 2, 4]):
    with pytest.raises(ValueError, match="record_steps"):
      lj.runner.make_loop(plan.slots(), lambda params: params, lambda key: None, num_steps=4,
                          record=lambda params: {}, record_steps=grid)


def test_locate_divergence_at_the_first_record():
  """locate_divergence: when the first record (step 0) already fails the rule, the run
  diverged at step 0, as the loop would mark it (θ_0's objective is judged by step 0); a
  later first failure is bisected to the first failing step. Exact: integer steps, and
  inf / 1e9 against the cap 1e8.
  Kills: the lower end +1 instead of -1 below the first record (then hi = 0 is not above lo
  and the run counts as not diverged)."""
  zeros = jnp.zeros((3, 2))
  steps, total = jnp.array([0, 5, 10]), 10

  @jax.jit  # one compiled program for the four cases (first_bad traced)
  def run(risk, first_bad):
    records = {"risk": risk, "alpha": zeros, "beta": zeros}
    state_at = lambda t: (jnp.where(t >= first_bad, 1e9, 1.0), jnp.zeros(2), jnp.zeros(2))
    return lj.runner.locate_divergence(records, steps, total, state_at, 1e8, 4)

  def locate(risk, first_bad):
    diverged, step = run(jnp.asarray(risk), first_bad)
    return bool(diverged), int(step)

  assert locate([jnp.inf, jnp.inf, jnp.inf], 0) == (True, 0)
  assert locate([1e9, 1e9, 1e9], 0) == (True, 0)
  assert locate([1.0, 1e9, 1e9], 3) == (True, 3)
  assert locate([1.0, 1.0, 1.0], 20) == (False, -1)


def test_default_divergence_cap_is_one_e8():
  """The one divergence cap is lj.runner.MAX_VALUE = 1e8 (docs/theory.md §5, README), the
  default max_value of make_loop: an objective of exactly 1e8 runs on, one of 1e8 + 1 (a
  float64 integer, exact) is not taken and the run diverges at step 0.
  Kills: MAX_VALUE = 100000001.0."""
  plan = lj.plans.output_only(0.5, 3)
  params0 = {"beta": jnp.ones(2)}

  @jax.jit  # one compiled loop for both objective values (value traced)
  def run(value):
    objective = lambda key: lambda params, t, phase: (jnp.asarray(value),
                                                      {"beta": jnp.ones(2)})
    loop = lj.runner.make_loop(plan.slots(), lambda params: {"beta": "output"}, objective,
                               lambda params: {}, num_steps=3)
    return loop(params0, jax.random.key(0), plan.data())

  at_cap, above = run(1e8), run(1e8 + 1)
  assert not bool(at_cap.diverged) and int(at_cap.diverged_step) == -1
  np.testing.assert_array_equal(at_cap.params["beta"], [-0.5, -0.5])  # 3 steps of -0.5
  assert bool(above.diverged) and int(above.diverged_step) == 0
  np.testing.assert_array_equal(above.params["beta"], [1.0, 1.0])


# --- lagjax/dynamics/metrics.py --------------------------------------------------------------


def test_half_time_ratio_counts_a_half_time_of_one():
  """The half-time ratio t_α / t_β is defined when both half-times are > 0, so a half-time
  at step 1 counts (only -1, "never", and 0 are excluded). Exact: small integers.
  Kills: the condition t_alpha > 1."""
  alpha = jnp.array([[0.0], [1.0], [1.0], [1.0], [1.0]])  # r_α reaches 1/2 at step 1
  beta = jnp.array([[0.0], [0.0], [0.1], [0.9], [1.0]])   # r_β reaches 1/2 at step 3
  out = lj.metrics.lag_metrics(alpha, beta)
  assert (int(out.half_time_alpha), int(out.half_time_beta)) == (1, 3)
  assert float(out.half_time_ratio) == 1.0 / 3.0


def test_first_step_at_most_counts_risk_equal_to_epsilon():
  """τ_ε is the first record with risk <= ε (docstring): a record exactly at ε counts.
  Exact: compared floats are the same literal. Kills: `risk < epsilon`."""
  risk = jnp.array([0.5, 0.25, 0.125, 0.0625])
  assert int(lj.metrics.first_step_at_most(risk, 0.25)) == 1
  assert int(lj.metrics.first_step_at_most(risk, 0.01)) == -1


def test_horizon_free_lag_by_hand():
  """horizon_free_lag (docs/theory.md 6b) on a hand-worked record: τ_ε = 3; progress is
  normalised by the move up to τ_ε and is 0 after it; the lag gap is the mean of r_β - r_α
  over records 0…τ_ε: ((0-0) + (0-½) + (¼-1) + (1-1)) / 4 = -0.3125. Every value is a
  dyadic fraction, so float64 is exact. Never reaching ε gives τ = -1, r ≡ 0 and a NaN gap.
  Kills: the gap as the mean of r_β + r_α; first_step_at_most returning 1 for "never"."""
  alpha = jnp.array([[0.0], [1.0], [2.0], [2.0], [5.0]])  # |α_t - α_0| = 0, 1, 2, 2, 5
  beta = jnp.array([[0.0], [0.0], [1.0], [4.0], [4.0]])   # |β_t - β_0| = 0, 0, 1, 4, 4
  risk = jnp.array([1.0, 0.5, 0.25, 0.0625, 0.03125])
  out = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.1)
  assert int(out.tau_eps) == 3
  np.testing.assert_array_equal(out.r_alpha, [0.0, 0.5, 1.0, 1.0, 0.0])
  np.testing.assert_array_equal(out.r_beta, [0.0, 0.0, 0.25, 1.0, 0.0])
  assert float(out.lag_gap) == -0.3125
  assert (int(out.half_time_alpha), int(out.half_time_beta)) == (1, 3)
  never = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.01)
  assert int(never.tau_eps) == -1 and np.isnan(float(never.lag_gap))
  assert int(never.half_time_alpha) == int(never.half_time_beta) == -1
  np.testing.assert_array_equal(never.r_alpha, 0.0)


def test_horizon_free_lag_of_a_group_that_never_moves_is_zero():
  """"A group that has not moved by τ_ε has r ≡ 0" (docstring): r_α ≡ 0 (not 0/0 = NaN) and
  the gap is the mean of r_β alone, (0 + 0 + ¼ + 1) / 4 = 0.3125 (dyadic: exact); its
  half-time is -1. Kills: `scale >= 0` in progress (divides 0 by 0)."""
  alpha = jnp.zeros((5, 2))
  beta = jnp.array([[0.0], [0.0], [1.0], [4.0], [4.0]])
  risk = jnp.array([1.0, 0.5, 0.25, 0.0625, 0.03125])
  out = lj.metrics.horizon_free_lag(alpha, beta, risk, 0.1)
  np.testing.assert_array_equal(out.r_alpha, 0.0)
  assert float(out.lag_gap) == 0.3125
  assert int(out.half_time_alpha) == -1 and float(out.half_time_ratio) == -1.0


# --- lagjax/sweep/chunk_store.py -------------------------------------------------------------


def test_chunk_store_reopens_an_existing_workdir(tmp_path):
  """A resumed sweep opens a ChunkStore on a workdir whose chunks/ folder already exists and
  finds the chunks saved before. Kills: os.makedirs(..., exist_ok=False)."""
  from lagjax.sweep import chunk_store
  first = chunk_store.ChunkStore(str(tmp_path))
  first.save(0, 1, {"rows": np.arange(3)})
  again = chunk_store.ChunkStore(str(tmp_path))
  assert again.has(0, 1) and not again.has(0, 2)
  np.testing.assert_array_equal(again.load(0, 1)["rows"], np.arange(3))


# --- lagjax/analysis/finite_sample.py --------------------------------------------------------


def test_check_bracket_reads_the_last_grid_point():
  """check_bracket: success must start below the level and END at or above it, read at the
  largest N (docstring) — a rate above the level at an inner N does not bracket when the
  last one is below. Kills: rates[-2] for the last rate."""
  from lagjax.analysis import finite_sample
  n_grid = np.array([10, 20, 40])
  finite_sample.check_bracket(5, n_grid, np.array([0.1, 0.3, 0.7]))
  with pytest.raises(ValueError, match="larger N"):
    finite_sample.check_bracket(5, n_grid, np.array([0.1, 0.7, 0.3]))


def test_n_star_replicates_below_the_grid_are_zero():
  """n_star: a bootstrap replicate that already reaches the level at the smallest N is 0
  (docstring: "+inf (above) or 0 (below)"), and one that never reaches it is +inf. Every
  seed succeeds at every N (or none does), so every replicate is 0 (or +inf): exact. (The
  interval of all-+inf replicates is NaN, inf - inf inside np.percentile, so only the
  replicates are checked.)
  Kills: 1.0 in place of 0.0 for replicates below the grid."""
  from lagjax.analysis import finite_sample
  n_grid = np.array([10, 20, 40])
  estimate, low, high, replicates = finite_sample.n_star(n_grid, np.ones((4, 3), bool), 0.5,
                                                         resamples=20)
  assert estimate == -np.inf and (low, high) == (0.0, 0.0)
  np.testing.assert_array_equal(replicates, 0.0)
  with np.errstate(invalid="ignore"):  # the percentiles of all-+inf replicates: inf - inf
    _, _, _, replicates = finite_sample.n_star(n_grid, np.zeros((4, 3), bool), 0.5,
                                               resamples=20)
  np.testing.assert_array_equal(replicates, np.inf)



def test_a_diverged_seed_reports_error_one():
  """finite_sample.seed_error: a seed whose phase-3 β has an inf or a NaN reports 0-1 error 1
  (docs/theory.md §9d: every string wrong), a finite one its own error; exact.
  Kills: the diverged error 1.0 -> 2.0 (the success flags alone cannot see it)."""
  from lagjax.analysis import finite_sample
  for bad in (jnp.inf, -jnp.inf, jnp.nan):
    assert float(finite_sample.seed_error(jnp.array([0.5, bad]), 0.25)) == 1.0
  assert float(finite_sample.seed_error(jnp.array([0.5, -3.0]), 0.25)) == 0.25


def test_success_includes_an_error_equal_to_the_threshold():
  """finite_sample.succeeded: error <= threshold (docs/theory.md §9d), so a perfect fit at
  threshold 0 and an error exactly at the threshold succeed; exact comparisons.
  Kills: <= -> < on the success threshold."""
  from lagjax.analysis import finite_sample
  errors = jnp.array([0.0, 1e-3, 1.5e-3, 1.0])
  np.testing.assert_array_equal(finite_sample.succeeded(errors, 1e-3),
                                [True, True, False, False])
  np.testing.assert_array_equal(finite_sample.succeeded(errors, 0.0), [True, False, False, False])


@functools.partial(jax.jit, static_argnames="block")
def _empirical_gram(alpha, counts, labels, n, *, block):
  """finite_sample.empirical_gram with n traced: one compiled program serves every n."""
  from lagjax.analysis import finite_sample
  return finite_sample.empirical_gram(alpha, counts, labels, n, block=block)


@pytest.mark.parametrize("n", [1, 4, 5, 7])
def test_empirical_gram_is_the_gram_of_the_first_n_rows(n):
  """empirical_gram(α, c, y, n) = (WᵀW/n, Wᵀy/n) over the first n rows, W =
  direct.attention_masses(α, c), whatever n is modulo the block size (here 4: n = 1 and 5 end
  with a block of one row). Against a direct product on the same rows: the same float64
  products (masses <= 1, n <= 7 terms) summed block by block instead of at once, so they
  differ by rounding only; rtol 1e-13.
  Kills: (n + block - 2) // block blocks (drops the last block when n ≡ 1 mod block)."""
  from lagjax.models import direct
  rng = np.random.default_rng(0)
  counts = jnp.asarray(rng.integers(0, 4, size=(9, 3)) + np.eye(3, dtype=int)[[0, 1, 2] * 3])
  labels = jnp.asarray(rng.choice([-1.0, 1.0], size=9))
  alpha = jnp.array([0.4, -0.3, 0.1])
  gram, target = _empirical_gram(alpha, counts, labels, n, block=4)
  masses = np.asarray(direct.attention_masses(alpha, counts[:n]))
  np.testing.assert_allclose(gram, masses.T @ masses / n, rtol=1e-13, atol=0)
  np.testing.assert_allclose(target, masses.T @ np.asarray(labels[:n]) / n, rtol=1e-13, atol=1e-16)


def test_rate_model_d_log_squared_d_fits_its_own_law():
  """fit_rate_models: N* = C d ln²d exactly (C = 3) is fitted by the "C d ln^2 d" model with
  residuals at rounding level (log of a product of a few floats: ~1e-15, so chi² ~ 1e-26 at
  σ = 0.1; bound 1e-20) and C recovered to rtol 1e-12, while C d and C d ln d misfit
  (chi² > 1). Kills: "C d ln^2 d" as d ln³ d."""
  from lagjax.analysis import finite_sample
  d = np.array([10.0, 20.0, 40.0, 80.0, 160.0])
  fits = finite_sample.fit_rate_models(d, 3.0 * d * np.log(d) ** 2, np.full(d.size, 0.1))
  exact = fits["C d ln^2 d"]
  assert exact["chi2"] < 1e-20 and exact["dof"] == 4
  np.testing.assert_allclose(exact["C"], 3.0, rtol=1e-12)
  assert fits["C d"]["chi2"] > 1.0 and fits["C d ln d"]["chi2"] > 1.0


# --- lagjax/analysis/regimes.py --------------------------------------------------------------


def test_steps_needed_when_the_limit_risk_is_far_above_zero():
  """steps_needed is the first T with R_T - R_∞ <= ε, measured from the limit R_∞ even when
  R_∞ is far above ε (η2 = 40: R_∞ ≈ 0.17 at ε = 0.01, asserted), so it is finite there
  (54 steps) and R_T - R_∞ crosses ε between T - 1 and T. The risks are the closed-form
  quadratic risks the route itself compares, so the comparison with ε is exact.
  Kills: R_T + R_∞ > ε in _steps_needed (never true below ε there, so T = ∞)."""
  from lagjax.analysis import regimes
  lang, eps = lj.occurrence(20), 0.01
  # float64 scalars, as eta2_min passes them to risk_of: one compiled risk_of for both.
  eta1, eta2 = np.float64(20.0), np.float64(40.0)
  regime = regimes.three_phase_regime(lang, eps)
  limit = float(regime.risk_of(eta1, eta2))
  steps = float(regime.steps_needed(eta1, eta2))
  assert limit > 10 * eps and np.isfinite(steps) and steps > 1
  at = float(regimes.three_phase_regime(lang, eps, steps=int(steps)).risk_of(eta1, eta2))
  before = float(regimes.three_phase_regime(lang, eps, steps=int(steps) - 1).risk_of(eta1, eta2))
  assert at - limit <= eps < before - limit


def test_eta2_min_is_the_low_end_when_the_whole_scan_succeeds():
  """η2_min(η1) by bisection is the smallest η2 of eta2_range with R_T <= ε: at T = 100,
  η1 = 10, ε = 0.01 (d = 20) the T = ∞ law fails at finite T (the boundary is bisected),
  and every η2 of [300, 3e4] succeeds (the boundary lies near 214), so η2_min is the low end
  300 itself: exp(log 300), equal to 300 to a few ulp (rtol 1e-14).
  Kills: exp(xs[1]) for the first scan point (300 · 100^(1/95) ≈ 314.8)."""
  from lagjax.analysis import regimes
  low, high = 300.0, 3e4
  regime = regimes.three_phase_regime(lj.occurrence(20), 0.01, steps=100, eta2_range=(low, high))
  law = np.float64(regimes.three_phase_regime(lj.occurrence(20), 0.01).eta2_min(10.0))
  # float64 scalars, as eta2_min passes them to risk_of: one compiled risk_of for both.
  assert float(regime.risk_of(np.float64(10.0), law * (1 + regimes.LAW_CHECK))) > 0.01  # bisected
  # η2_min = 300 also shows that the whole scan succeeds: a failing first point would put
  # the bisected root above 300, a failing later one would make η2_min NaN.
  np.testing.assert_allclose(float(regime.eta2_min(10.0)), low, rtol=1e-14)


def test_eta3_limit_is_two_over_the_top_scaled_eigenvalue_at_delta_eps():
  """Regime.eta3_limit = 2/λ_max(D^{-1/2} H D^{-1/2}) at the boundary Δ = Δ_ε (docstring),
  recomputed here from lj.risk.moments.moments_fn on the language's two token groups at
  α = (Δ_ε on the letters, 0 elsewhere) (only score differences matter) and numpy's eigvalsh.
  Both are exact quadratures (error < 1e-15) on different grids; an eigenvalue of a
  well-conditioned 2 × 2 matrix: rtol 1e-10.
  Kills: H taken at Δ_ε / direction (α = ±2Δ_ε instead of ±Δ_ε/2)."""
  from lagjax.analysis import regimes
  from lagjax.risk import moments
  lang = lj.occurrence(20)
  regime = regimes.three_phase_regime(lang, 0.01)
  partition = lj.partition.of_language(lang)
  letters = np.isin(np.arange(lang.d), lang.margin_letters())
  alpha = partition.group(np.where(letters, regime.delta_eps, 0.0))
  hessian, _ = jax.jit(moments.moments_fn(lang, partition))({"alpha": jnp.asarray(alpha)})
  root = np.sqrt(partition.sizes)
  top = np.linalg.eigvalsh(np.asarray(hessian) / root[:, None] / root[None, :])[-1]
  np.testing.assert_allclose(regime.eta3_limit, 2.0 / top, rtol=1e-10)


def test_limit_risk_is_the_least_squares_minimum():
  """regimes.limit_risk(lang)(α) = min_β R(α, β) = ½ - ½ gᵀH⁻¹g for per-token α of any
  leading shape (here (2, 2, d): the result is (2, 2)), against (H, g) from
  lj.risk.moments.moments_fn and a numpy solve at d = 4. Both exact quadratures (< 1e-15)
  on different grids, H well conditioned at these α: atol 1e-10.
  Kills: alpha.reshape(-2, d) (jnp refuses a -2 dimension)."""
  from lagjax.analysis import regimes
  from lagjax.risk import moments
  lang = lj.occurrence(4)
  alpha = np.array([[[0.0, 0.0, 0.0, 0.0], [1.0, -0.5, 0.2, 0.3]],
                    [[-1.0, 0.5, 0.0, 2.0], [0.3, 0.3, -0.7, 0.1]]])
  got = np.asarray(regimes.limit_risk(lang)(alpha))
  assert got.shape == (2, 2)
  moments_of = jax.jit(moments.moments_fn(lang))
  for index in np.ndindex(2, 2):
    hessian, target = (np.asarray(x) for x in moments_of({"alpha": jnp.asarray(alpha[index])}))
    expected = 0.5 - 0.5 * target @ np.linalg.solve(hessian, target)
    assert abs(got[index] - expected) < 1e-10


# --- experiments/table1_protocol.py: the selection step of run_task -------------------------

class _FakeRun(NamedTuple):
  test_loss: np.ndarray    # (R, records)
  test_metric: np.ndarray  # (R, records)
  diverged: np.ndarray     # (R,)


def _fake_runner_factory(diverge_above):
  """make_runner stand-in: a run's held-out metric is its largest step size (so a larger η is
  better), and a run diverges when that η exceeds `diverge_above`. No compilation."""

  def make_runner(task, model, slots, **options):
    def runner(keys, data):
      eta = np.asarray(data.etas).max(axis=1)  # runs (seeds, plans): make_grid_runner's form
      records = np.broadcast_to(np.stack([np.zeros_like(eta), eta], axis=1),
                                (keys.shape[0],) + eta.shape + (2,))
      diverged = np.broadcast_to(eta > diverge_above, records.shape[:2])
      return _FakeRun(np.zeros_like(records), records, diverged)
    return runner

  return make_runner


@pytest.mark.parametrize("metric_name", ["accuracy", "risk"])
def test_table1_selection_picks_the_best_non_diverged_candidate(metric_name):
  """run_task chooses, per row, the candidate with the best mean validation metric, and a
  diverged candidate scores worst. Metric: accuracy = η (higher is better) or risk = -η (lower
  is better), so both directions pick the largest η that does not diverge. Exact: the fake
  metric values are distinct floats, so ties and tolerances play no part.
  Kills: -np.inf -> np.inf for diverged runs (with accuracy a diverged candidate would win);
  also the missing sign flip for higher-is-better metrics."""
  from experiments import table1_protocol as protocol
  from experiments.configs import table1 as table1_configs

  config = table1_configs.get_config()
  protocol.quick(config)
  config.validation_seeds, config.num_seeds = 2, 2
  config.attention_multipliers = (1.0, 10.0)
  config.task_settings["occurrence"].eta_grid = (0.1, 0.3, 1.0, 3.0)
  config.task_settings["occurrence"].select_by = "metric"  # every loss is 0 here
  sign = 1.0 if metric_name == "accuracy" else -1.0
  diverge_above = 2.0
  base = _fake_runner_factory(diverge_above)

  def make_runner(*args, **options):
    runner = base(*args, **options)
    return lambda keys, data: runner(keys, data)._replace(
        test_metric=sign * runner(keys, data).test_metric)

  task = types.SimpleNamespace(metric_name=metric_name)
  selected, results = protocol.run_task(config, "occurrence", (task, None), jax.random.key(0),
                                        jax.random.key(1), make_runner=make_runner)
  found = protocol.candidates(config, "occurrence")
  assert set(results) == set(protocol.table_rows(config))
  for row, run in results.items():
    chosen = selected.chosen[row]
    competing = [c for c in found if row in c.rows]
    ok = [c for c in competing if max(c.etas().values()) <= diverge_above]
    expected = max(ok, key=lambda c: max(c.etas().values()))
    assert chosen == expected, (row, chosen, expected)
    np.testing.assert_array_equal(np.asarray(run.test_metric)[:, -1],
                                  sign * max(expected.etas().values()))
