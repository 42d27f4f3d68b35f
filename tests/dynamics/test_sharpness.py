"""Sharpness (docs/theory.md §5d): the exact top Hessian eigenvalues, dense and by Lanczos."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from lagjax.dynamics import sharpness


def _occurrence_risk():
  """The Laplace route on occurrence(4), every token its own group, with the CLS token: 10
  parameters at a random θ (a cheap exact route; the transfer route's Hessian compiles for
  a minute)."""
  lang = lj.occurrence(4)
  theta = lj.init_params(lang.d, cls=True)
  theta = jax.tree.map(
      lambda x: x + 0.3 * jax.random.normal(jax.random.key(x.size), x.shape), theta)
  return lj.risk_fn(lang, cls=True).risk, theta


@pytest.mark.slow  # compiles an exact route's Hessian (or 10⁵ per-string gradients)
def test_dense_top_eigenvalues_match_numpy_on_an_exact_route():
  """λ_max and λ_2 of ∇²R on occurrence(4) with the CLS token against numpy's eigvalsh of
  jax.hessian, to 1e-10 (Jacobi leaves off-diagonals at roundoff, ~1e-15 · ‖H‖)."""
  risk, theta = _occurrence_risk()
  flat, unravel = jax.flatten_util.ravel_pytree(theta)
  expected = np.linalg.eigvalsh(np.asarray(jax.hessian(lambda x: risk(unravel(x)))(flat)))
  got = sharpness.top_eigenvalues(risk, theta, k=2)
  np.testing.assert_allclose(np.asarray(got), expected[::-1][:2], rtol=0, atol=1e-10)
  assert got[0] >= got[1]


@pytest.mark.slow
def test_lanczos_matches_the_dense_value_on_500_parameters():
  """Lanczos (64 steps, full reorthogonalisation) against the dense eigendecomposition on a
  500-parameter non-quadratic problem, to 1e-8."""
  a = jax.random.normal(jax.random.key(1), (500, 500)) / 30
  matrix = a @ a.T + jnp.diag(jnp.linspace(0.0, 3.0, 500))
  risk = lambda x: 0.5 * x @ matrix @ x + 0.1 * jnp.sum(x**4)
  x0 = 0.3 * jax.random.normal(jax.random.key(2), (500,))
  dense = np.linalg.eigvalsh(np.asarray(sharpness.dense_hessian(risk, x0)))[-1]
  lanczos = jax.jit(lambda x: sharpness.top_eigenvalues(risk, x, method="lanczos"))(x0)
  assert abs(float(lanczos[0]) - dense) <= 1e-8
  assert sharpness.top_eigenvalues(risk, x0).shape == (1,)  # "auto" picks Lanczos above 64


def test_hessian_vector_product_is_the_hessian_times_v():
  risk = lambda p: jnp.sum(p["a"] ** 3) + p["a"][0] * p["b"] ** 2
  params = {"a": jnp.array([1.0, 2.0]), "b": jnp.array(3.0)}
  v = jnp.array([0.5, -1.0, 2.0])
  # Jitted: two programs instead of ~80 single-operation compiles.
  expected = jax.jit(lambda theta: sharpness.dense_hessian(risk, theta))(params) @ v
  product = jax.jit(lambda theta, u: sharpness.hessian_vector_product(risk, theta)(u))
  np.testing.assert_allclose(product(params, v), expected, rtol=1e-14)


def test_first_unstable_record():
  lam = jnp.array([1.0, 1.9, 2.0, 2.1, 1.0])
  assert int(sharpness.first_unstable(lam, 1.0)) == 3       # η·λ = 2 exactly is not > 2
  assert int(sharpness.first_unstable(lam, 0.5)) == -1


@pytest.mark.parametrize("k, message", [(0, "k must be an integer in [1, 3]"),
                                        (4, "k must be an integer in [1, 3]"),
                                        (1.0, "k must be an integer in [1, 3]")])
def test_k_outside_the_parameter_count_is_refused(k, message):
  with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
    sharpness.top_eigenvalues(lambda x: jnp.sum(x**2), jnp.zeros(3), k=k)


def test_unknown_method_and_short_krylov_space_are_refused():
  with pytest.raises(ValueError, match="method"):
    sharpness.top_eigenvalues(lambda x: jnp.sum(x**2), jnp.zeros(3), method="power")
  with pytest.raises(ValueError, match="iterations must be an integer ≥ k = 2"):
    sharpness.top_eigenvalues(lambda x: jnp.sum(x**2), jnp.zeros(3), k=2, method="lanczos",
                              iterations=1)
