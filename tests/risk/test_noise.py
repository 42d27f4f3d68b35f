"""Exact gradient noise (docs/theory.md §3f) against sampled per-string gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.models import direct

NUM_SAMPLES = 100_000


def _theta(groups, seed):
  key_a, key_b = jax.random.split(jax.random.key(seed))
  return {"alpha": jax.random.normal(key_a, (groups,)), "beta": jax.random.normal(key_b, (groups,))}


def _sampled_moments(lang, params, partition):
  """Per-string gradients of fresh strings, drawn by count vectors (data/sampling.py), on the
  token groups: an estimate independent of the lattice's enumeration and weights."""
  counts, labels = lj.data.sampling.sample_counts(jax.random.key(7), lang, NUM_SAMPLES)
  grouped = jnp.stack([counts[:, list(block)].sum(1) for block in partition.blocks], 1)
  flat, unravel = jax.flatten_util.ravel_pytree(params)

  def gradient(c, y):
    return jax.grad(lambda x: 0.5 * (direct.forward_counts(unravel(x), c[None])[0] - y) ** 2)(flat)

  grads = np.asarray(jax.jit(jax.vmap(gradient))(grouped, labels))
  centred = grads - grads.mean(0)
  products = centred[:, :, None] * centred[:, None, :]
  return (grads.mean(0), grads.std(0, ddof=1) / np.sqrt(NUM_SAMPLES),
          products.mean(0), products.std(0, ddof=1) / np.sqrt(NUM_SAMPLES))


@pytest.mark.slow  # compiles an exact route's Hessian (or 10⁵ per-string gradients)
@pytest.mark.parametrize("lang", [lj.occurrence(3), lj.all_of(4, (0, 1))],
                         ids=["occurrence", "and"])
def test_exact_covariance_within_four_standard_errors_of_10e5_strings(lang):
  partition = lj.partition.of_language(lang)
  params = _theta(partition.num_groups, 3)
  noise = lj.gradient_noise(lang, params, partition=partition)
  mean, mean_se, covariance, covariance_se = _sampled_moments(lang, params, partition)
  assert noise.exact and noise.mass_left_out <= 1e-12
  # 4 standard errors entrywise; 1e-12 absorbs entries that are exactly zero in both.
  assert np.all(np.abs(np.asarray(noise.mean) - mean) <= 4 * mean_se + 1e-12)
  assert np.all(np.abs(np.asarray(noise.covariance) - covariance) <= 4 * covariance_se + 1e-12)


@pytest.mark.slow  # compile-heavy: in the full suite, out of the quick loop
def test_the_mean_is_the_exact_population_gradient():
  lang = lj.occurrence(4)
  partition = lj.partition.of_language(lang)
  params = _theta(partition.num_groups, 5)
  noise = lj.gradient_noise(lang, params, partition=partition)
  route = lj.risk.ROUTES["laplace"].build(lang, partition)
  expected = jax.flatten_util.ravel_pytree(jax.grad(route.risk)(params))[0]
  np.testing.assert_allclose(np.asarray(noise.mean), np.asarray(expected), rtol=0, atol=1e-12)
  eigenvalues = np.linalg.eigvalsh(np.asarray(noise.covariance))
  assert eigenvalues.min() >= -1e-14          # a covariance is positive semidefinite


def test_sampled_method_on_a_regular_language_gives_standard_errors():
  pairs = lj.data.regular_builtins.tomita(4)  # no CountLabels (even pairs has them: exact)
  params = lj.init_params(pairs.d, positions="first_last")
  params = jax.tree.map(lambda x: x + 0.5, params)
  noise = lj.gradient_noise(pairs, params, num_samples=4000)
  assert not noise.exact and noise.num_samples == 4000
  assert noise.standard_error.shape == noise.covariance.shape
  assert np.all(np.isfinite(np.asarray(noise.covariance)))


def test_bad_input_is_named():
  pairs = lj.data.regular_builtins.tomita(4)
  with pytest.raises(ValueError, match="method 'exact' enumerates count vectors"):
    lj.gradient_noise(pairs, lj.init_params(2), method="exact")
  with pytest.raises(ValueError, match="method"):
    lj.gradient_noise(lj.occurrence(3), lj.init_params(3), method="lattice")
  with pytest.raises(ValueError, match=r"tol must lie in \(0, 1\)"):
    lj.gradient_noise(lj.occurrence(3), lj.init_params(3), tol=0.0)
