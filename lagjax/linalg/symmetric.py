"""Symmetric eigendecompositions in plain array operations (docs/theory.md §5, numerics).

jaxlib 0.10.2's CPU LAPACK kernels split a batch of matrices into tasks on XLA's intra-op
thread pool and block until they finish. When two such kernels run at once (XLA runs
independent operations concurrently) on a pool of two threads, both threads block and
the process hangs (docs/decisions/no-batched-lapack.md). The closed forms take
eigendecompositions of G × G Hessians and Gram matrices, batched under vmap, so they use
`symmetric_eigh`: Jacobi rotations, a fixed number of sweeps, no LAPACK, for every G.
Up to MAX_SIZE the rotations run in cyclic order, one pair at a time; above it, in
round-robin order, G/2 disjoint pairs at a time, in static slices (`_round_robin_eigh`).
The transfer route's resolvent avoids LAPACK the same way (linalg.resolvent.left_solve).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

SWEEPS = 10   # Jacobi converges quadratically: 10 sweeps leave off-diagonals ~ε (G ≤ 512 measured)
MAX_SIZE = 16  # the largest G in cyclic order (one rotation at a time); above, round-robin


def _rotation(app, aqq, apq):
  """(c, s) of the Jacobi rotation that zeroes a_pq, with the stable angle
  t = sign(τ)/(abs(τ) + √(1 + τ²)), τ = (a_qq - a_pp)/(2 a_pq); the identity where a_pq = 0."""
  safe = jnp.where(apq == 0.0, 1.0, apq)
  tau = (aqq - app) / (2.0 * safe)
  t = jnp.where(tau >= 0.0, 1.0, -1.0) / (jnp.abs(tau) + jnp.sqrt(1.0 + tau * tau))
  t = jnp.where(apq == 0.0, 0.0, t)
  c = 1.0 / jnp.sqrt(1.0 + t * t)
  return c, t * c


def _cyclic_eigh(matrix):
  """(diagonal, V) after SWEEPS cyclic sweeps over the pairs (p, q), p < q, one at a time."""
  size = matrix.shape[-1]
  pairs = [(p, q) for p in range(size) for q in range(p + 1, size)]
  identity = jnp.eye(size, dtype=matrix.dtype)

  def rotate(p, q, a, v):
    c, s = _rotation(a[p, p], a[q, q], a[p, q])
    rotation = identity.at[p, p].set(c).at[q, q].set(c).at[p, q].set(s).at[q, p].set(-s)
    return rotation.T @ a @ rotation, v @ rotation

  def sweep(_, state):
    a, v = state
    for p, q in pairs:
      a, v = rotate(p, q, a, v)
    return 0.5 * (a + a.T), v

  a, v = jax.lax.fori_loop(0, SWEEPS, sweep, (matrix, identity))
  return jnp.diagonal(a), v


def _round_robin_eigh(matrix):
  """(diagonal, V) after SWEEPS sweeps in round-robin order (Brent and Luk's parallel
  ordering): the matrix, padded to even size m with a zero row and column (never rotated,
  as its off-diagonal stays 0), is kept in the order of the tournament's seats, whose
  pairs are (i, m-1-i); each round rotates those m/2 disjoint pairs at once and moves the
  seats (the first stays, the last comes second), so that m - 1 rounds meet every pair
  once and bring the seats back. Everything is a static slice: no gather, O(m²) a round."""
  size = matrix.shape[-1]
  m = size + size % 2
  half = m // 2
  if m != size:
    matrix = jnp.pad(matrix, ((0, 1), (0, 1)))

  def rotate_rows(x, c, s):
    """Rows i and m-1-i rotated by (c_i, s_i) as rotationᵀ·x does, then the seats moved."""
    top, bottom = x[:half], x[half:][::-1]
    new_top, new_bottom = c * top - s * bottom, (s * top + c * bottom)[::-1]
    return jnp.concatenate([new_top[:1], new_bottom[-1:], new_top[1:], new_bottom[:-1]])

  def one_round(_, state):
    a, v = state
    diagonal = jnp.diagonal(a)
    c, s = _rotation(diagonal[:half], diagonal[half:][::-1], jnp.diagonal(a[:, ::-1])[:half])
    c, s = c[:, None], s[:, None]
    a = rotate_rows(rotate_rows(a, c, s).T, c, s).T
    return a, rotate_rows(v.T, c, s).T

  def sweep(_, state):
    a, v = jax.lax.fori_loop(0, m - 1, one_round, state)
    return 0.5 * (a + a.T), v

  a, v = jax.lax.fori_loop(0, SWEEPS, sweep, (matrix, jnp.eye(m, dtype=matrix.dtype)))
  return jnp.diagonal(a)[:size], v[:size, :size]


def symmetric_eigh(matrix):
  """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of a symmetric matrix,
  as jnp.linalg.eigh, by Jacobi rotations in plain array operations, never LAPACK (§5,
  numerics).

  Each rotation zeroes one off-diagonal entry with the stable angle
  t = sign(τ)/(abs(τ) + √(1 + τ²)), τ = (a_qq - a_pp)/(2 a_pq); SWEEPS sweeps over every pair
  bring the off-diagonal mass to roundoff (quadratic convergence). Up to MAX_SIZE the pairs
  are taken one at a time in cyclic order; larger matrices take G/2 disjoint pairs at a time
  in round-robin order, O(G³) a sweep.

  Args:
    matrix: a symmetric (G, G) array.

  Returns:
    (eigenvalues (G,), eigenvectors (G, G)), eigenvalues in ascending order.

  Example:
    >>> values, vectors = lj.linalg.symmetric_eigh(jnp.array([[2.0, 1.0], [1.0, 2.0]]))
    >>> values.round(12).tolist(), bool(jnp.allclose(vectors @ jnp.diag(values) @ vectors.T,
    ...                                             jnp.array([[2.0, 1.0], [1.0, 2.0]])))
    ([1.0, 3.0], True)
    >>> big = jnp.diag(jnp.arange(20.0, 0.0, -1.0)) + 0.1   # 20 > MAX_SIZE: round-robin
    >>> values, vectors = lj.linalg.symmetric_eigh(big)
    >>> bool(jnp.allclose(vectors @ jnp.diag(values) @ vectors.T, big, atol=1e-13))
    True
  """
  if matrix.shape[-1] > MAX_SIZE:
    values, v = _round_robin_eigh(matrix)
  else:
    values, v = _cyclic_eigh(matrix)
  order = jnp.argsort(values)
  return values[order], v[:, order]


__all__ = ["MAX_SIZE", "SWEEPS", "symmetric_eigh"]
