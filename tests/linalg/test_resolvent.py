"""The geometric resolvent calculus of lagjax/linalg/resolvent.py (docs/theory.md §3d)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.linalg import resolvent


def test_left_solve_derivatives_equal_those_of_the_elimination():
  """left_solve's own rule, d(a M⁻¹) = (da - y dM) M⁻¹ (docs/theory.md §3d), against JAX
  differentiating the Gauss-Jordan elimination itself: gradient in (a, M) and the
  second derivative in M along a random direction, at 3 × 3 matrices on a batch of 4.

  Tolerance 1e-13: both are exact derivatives of the same ε-accurate inverse (condition
  number below 2 here, strictly dominant diagonal), so they differ by a few ε times the
  entries (≤ 10). Transposing dM in the rule fails by 0.5; cutting the rule's own dependence
  on M (a stop_gradient on y) fails the second derivative by 0.2."""
  rng = np.random.default_rng(3)
  matrix = jnp.asarray(0.2 * rng.normal(size=(3, 3, 4)) + 3.0 * np.eye(3)[..., None])
  rows = jnp.asarray(rng.normal(size=(2, 3, 4)))

  def by_rule(a, m):
    return jnp.sum(jnp.sin(resolvent.left_solve(a, m)))

  def by_elimination(a, m):
    return jnp.sum(jnp.sin(resolvent.batched_dot(a, resolvent.diagonally_dominant_inverse(m))))

  direction = jnp.asarray(rng.normal(size=matrix.shape))

  @functools.partial(jax.jit, static_argnums=0)
  def derivatives(f):
    """∇f in (a, M), and the second derivative in M along one random direction."""
    _, second = jax.jvp(lambda m: jax.grad(f, 1)(rows, m), (matrix,), (direction,))
    return jax.grad(f, (0, 1))(rows, matrix) + (second,)

  for mine, theirs in zip(derivatives(by_rule), derivatives(by_elimination)):
    assert np.abs(np.asarray(mine - theirs)).max() <= 1e-13
