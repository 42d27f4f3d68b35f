"""Small symmetric eigendecompositions in plain array operations (docs/theory.md §5, numerics).

jaxlib 0.10.2's CPU LAPACK kernels split a batch of matrices into tasks on XLA's intra-op
thread pool and block until they finish. When two such kernels run at once (XLA runs
independent operations concurrently) on a pool of two threads, both threads block and
the process hangs (BUILD_NOTES.md, "A deadlock in batched eigh"). The closed forms take
eigendecompositions of small G × G Hessians and Gram matrices, batched under vmap, so
they use `symmetric_eigh`: cyclic Jacobi rotations, a fixed number of sweeps, no LAPACK.
The transfer route's resolvent avoids LAPACK the same way (linalg.resolvent.left_solve).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

SWEEPS = 10   # Jacobi converges quadratically: 10 sweeps leave off-diagonals ~ε for G ≤ 16
MAX_SIZE = 16  # larger matrices take LAPACK (never batched by lagjax's own closed forms)


def symmetric_eigh(matrix):
  """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a symmetric matrix,
  as jnp.linalg.eigh, by cyclic Jacobi rotations in plain array operations (§5, numerics).

  Each rotation zeroes one off-diagonal entry with the stable angle
  t = sign(τ)/(abs(τ) + √(1 + τ²)), τ = (a_qq - a_pp)/(2 a_pq); SWEEPS sweeps over every pair
  bring the off-diagonal mass to roundoff (quadratic convergence). Larger than MAX_SIZE,
  jnp.linalg.eigh.

  Args:
    matrix: a symmetric (G, G) array.

  Returns:
    (eigenvalues (G,), eigenvectors (G, G)), eigenvalues in ascending order.

  Example:
    >>> values, vectors = lj.linalg.symmetric_eigh(jnp.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> values.round(12).tolist(), bool(jnp.allclose(vectors @ jnp.diag(values) @ vectors.T,
    ...                                             jnp.array([[2.0, 1.0], [1.0, 2.0]])))
    ([1.0, 3.0], True)
  """
  size = matrix.shape[-1]
  if size > MAX_SIZE:
    return jnp.linalg.eigh(matrix)
  pairs = [(p, q) for p in range(size) for q in range(p + 1, size)]
  identity = jnp.eye(size, dtype=matrix.dtype)

  def rotate(p, q, a, v):
    apq = a[p, q]
    safe = jnp.where(apq == 0.0, 1.0, apq)
    tau = (a[q, q] - a[p, p]) / (2.0 * safe)
    t = jnp.where(tau >= 0.0, 1.0, -1.0) / (jnp.abs(tau) + jnp.sqrt(1.0 + tau * tau))
    t = jnp.where(apq == 0.0, 0.0, t)
    c = 1.0 / jnp.sqrt(1.0 + t * t)
    s = t * c
    rotation = identity.at[p, p].set(c).at[q, q].set(c).at[p, q].set(s).at[q, p].set(-s)
    return rotation.T @ a @ rotation, v @ rotation

  def sweep(_, state):
    a, v = state
    for p, q in pairs:
      a, v = rotate(p, q, a, v)
    return 0.5 * (a + a.T), v

  a, v = jax.lax.fori_loop(0, SWEEPS, sweep, (matrix, identity))
  values = jnp.diagonal(a)
  order = jnp.argsort(values)
  return values[order], v[:, order]


__all__ = ["MAX_SIZE", "SWEEPS", "symmetric_eigh"]
