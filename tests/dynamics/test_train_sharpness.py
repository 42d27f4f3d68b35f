"""lj.train(sharpness=k): the top Hessian eigenvalues along a run (issue 36 item 2, §5d).

The oracle is independent of the code under test: jax.hessian of the per-token risk over
the flattened per-token parameters, restricted to the tied directions by an explicit
orthonormal basis (indicator of a token group / √k_g) and to the groups the step trains,
decomposed by numpy's eigvalsh. Both sides are exact to roundoff (the lattice route
enumerates; dense Jacobi and LAPACK eigensolvers agree to ~1e-15 on 8×8 matrices of
entries O(1)), so 1e-10 leaves five orders of margin.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.dynamics import train

TOL = 1e-10
ROUTE = "lattice"  # exact enumeration: no quadrature grid on either side


def per_token_hessian(lang, alpha, beta):
  """∇² of the per-token risk over (α, β) flattened, (2d, 2d)."""
  risk = lj.risk_fn(lang, route=ROUTE).risk
  d = lang.d
  flat = jnp.concatenate([jnp.asarray(alpha), jnp.asarray(beta)])
  return np.asarray(jax.hessian(lambda x: risk({"alpha": x[:d], "beta": x[d:]}))(flat))


def tied_basis(partition, trains=(True, True)):
  """Orthonormal columns spanning the tied (α, β) directions, and whether each column's
  group (attention, output) is trained."""
  d = partition.d
  columns, trained = [], []
  for which, group_trained in enumerate(trains):
    for block in partition.blocks:
      column = np.zeros(2 * d)
      column[which * d + np.asarray(block)] = 1.0 / np.sqrt(len(block))
      columns.append(column)
      trained.append(group_trained)
  return np.stack(columns, axis=1), np.asarray(trained, np.float64)


def oracle(lang, partition, alpha, beta, trains, k):
  """Top k eigenvalues of M Bᵀ∇²B M: the trained block's, and a 0 per held direction."""
  basis, mask = tied_basis(partition, trains)
  restricted = basis.T @ per_token_hessian(lang, alpha, beta) @ basis
  masked = mask[:, None] * restricted * mask[None, :]
  return np.sort(np.linalg.eigvalsh(0.5 * (masked + masked.T)))[::-1][:k]


@pytest.fixture(scope="module")
def untied_run():
  """Joint GD on every token of occurrence(3) (6 parameters), η past 2/λ_max(θ0)."""
  return lj.train(lj.occurrence(3), lj.plans.joint(8.0, 6), route=ROUTE, tied=False,
                  sharpness=3)


def test_untied_sharpness_equals_the_dense_hessian(untied_run):
  lang = lj.occurrence(3)
  singletons = lj.partition.singletons(3)
  records = untied_run.records["sharpness"]
  assert records.shape == (7, 3)
  for r in (0, 3, 6):
    expected = oracle(lang, singletons, untied_run.alpha[r], untied_run.beta[r], (True, True),
                      3)
    np.testing.assert_allclose(records[r], expected, rtol=0, atol=TOL)


@pytest.mark.slow  # ~30 s of compilation: kept out of the quick loop
def test_tied_sharpness_is_the_per_token_hessian_on_the_trained_groups():
  """Three-phase on occurrence(4), groups {0}, {1, 2, 3}: records at the output, attention
  and output phases take the β, α and β blocks of the per-token Hessian in the tied
  directions."""
  lang = lj.occurrence(4)
  plan = lj.plans.three_phase(2.0, 50.0, 1.0, 4)  # output 1 step, attention 1, output 4
  run = lj.train(lang, plan, route=ROUTE, sharpness=2)
  partition = lj.partition.of_language(lang)
  assert run.tied and run.records["sharpness"].shape == (7, 2)
  for r, trains in ((0, (False, True)), (1, (True, False)), (2, (False, True)),
                    (6, (False, True))):
    expected = oracle(lang, partition, run.alpha[r], run.beta[r], trains, 2)
    np.testing.assert_allclose(run.records["sharpness"][r], expected, rtol=0, atol=TOL)
  # The attention step moved α, so the β block at the last record differs from θ0's.
  assert abs(run.records["sharpness"][6, 0] - run.records["sharpness"][0, 0]) > 1e-6


def test_summary_reads_the_records_and_the_step_sizes(untied_run):
  top = np.asarray(untied_run.records["sharpness"][:, 0])
  steps = np.asarray(untied_run.steps)
  unstable = 8.0 * top > 2.0
  assert unstable.any()  # η = 8 is past 2/λ_max(θ0) = 6 (λ_max(θ0) = 1/3 on occurrence(3))
  np.testing.assert_allclose(float(untied_run.max_sharpness), top.max(), rtol=0, atol=0)
  np.testing.assert_allclose(float(untied_run.end_sharpness), top[-1], rtol=0, atol=0)
  assert int(untied_run.first_unstable_step) == steps[np.argmax(unstable)]


def test_stable_run_has_no_unstable_step():
  summary = lj.metrics.sharpness_summary(jnp.array([0.1, 0.5, 0.3]), jnp.arange(3), 1.0)
  assert int(summary["first_unstable_step"]) == -1
  assert float(summary["max_sharpness"]) == 0.5 and float(summary["end_sharpness"]) == 0.3


def test_record_step_sizes_follow_the_phases():
  plan = lj.plans.three_phase(1.0, 2.0, 3.0, 2)
  sizes = train.record_step_sizes(plan.slots(), plan.data(), jnp.arange(5))
  assert sizes.tolist() == [1.0, 2.0, 3.0, 3.0, 3.0]


@pytest.mark.parametrize("k", [5, -1, 1.5, True])
def test_bad_k_fails_in_one_line_naming_k(k):
  with pytest.raises(ValueError, match=r"^sharpness \(k, .*\[0, 4\].*got") as error:
    lj.train(lj.occurrence(3), lj.plans.joint(1.0, 2), sharpness=k)  # 4 tied parameters
  assert "\n" not in str(error.value)

