"""Sharpness along a gradient flow (docs/theory.md §5c, §5d): lj.flow(sharpness=k)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj


@pytest.mark.slow
def test_flow_records_the_top_eigenvalues_of_the_per_token_hessian():
  """At every record, λ_1 ≥ λ_2 equal the top eigenvalues of D^-1/2 ∇²R D^-1/2 on the token
  groups (D: group sizes, the metric in which the tied flow is plain flow), computed here by
  jax.hessian and numpy from the recorded per-token α and β, to 1e-10."""
  lang = lj.occurrence(3)
  partition = lj.partition.of_language(lang)
  run = lj.flow(lang, lj.plans.joint(1.0, 20), num_records=4, sharpness=2)
  risk = lj.risk_fn(lang, partition=partition).risk
  root = np.sqrt(np.tile(np.asarray(partition.sizes, float), 2))
  assert run.records["sharpness"].shape == (run.time.shape[0], 2)
  for r in range(run.time.shape[0]):
    grouped = {"alpha": partition.group(run.alpha[r]), "beta": partition.group(run.beta[r])}
    flat, unravel = jax.flatten_util.ravel_pytree(grouped)
    hessian = np.asarray(jax.hessian(lambda x, unravel=unravel: risk(unravel(x)))(flat))
    expected = np.linalg.eigvalsh(hessian / np.outer(root, root))[::-1][:2]
    np.testing.assert_allclose(np.asarray(run.records["sharpness"][r]), expected, rtol=0,
                               atol=1e-10)
  assert float(run.summary["max_sharpness"]) == float(jnp.max(run.records["sharpness"][:, 0]))
  assert float(run.summary["end_sharpness"]) == float(run.records["sharpness"][-1, 0])


def test_flow_refuses_a_sharpness_beyond_the_parameter_count():
  with pytest.raises(ValueError, match=r"sharpness \(k, the number of top Hessian eigenvalues\)"):
    lj.flow(lj.occurrence(3), lj.plans.joint(1.0, 20), sharpness=5)
