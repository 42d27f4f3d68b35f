"""The geometric resolvent calculus of the transfer route (docs/theory.md §3d).

Under a geometric length law Σ_n P(n) a·C(s)ⁿ·b is a row vector through one resolvent
(I - q C)⁻¹; its s-derivatives follow by differentiating y (I - q C) = a, so every order
takes the one resolvent, applied to row vectors only. Both the length law's
matrix_pgf_derivatives (lagjax/data/lengths.py) and the transfer route's block path
(lagjax/risk/transfer.py) call `resolvent_series`: the one copy of this calculus. The
matrices are small and batched along a trailing axis of quadrature nodes, so the inverse is
Gauss-Jordan elimination in plain array operations, never the batched LAPACK kernels.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp


def batched_dot(a, b):
  """a · b over a's second-to-last and b's first axis, for arrays whose last axis is a batch
  axis they share (docs/theory.md §3d): (..., K, N) · (K, ..., N) -> (..., ..., N).

  Written as a broadcast product and a sum, so XLA fuses it into one loop along the batch
  axis; a batched dot of small matrices costs CPU a library call per batch entry.

  Args:
    a: an array (..., K, N).
    b: an array (K, ..., N).

  Returns:
    The contraction, (..., ..., N).

  Example:
    >>> a, b = jnp.arange(12.0).reshape(2, 3, 2), jnp.arange(24.0).reshape(3, 4, 2)
    >>> product = lj.linalg.batched_dot(a, b)
    >>> product.shape, bool(jnp.all(product[..., 1] == a[..., 1] @ b[..., 1]))
    ((2, 4, 2), True)
  """
  a = a.reshape(a.shape[:-1] + (1,) * (b.ndim - 2) + a.shape[-1:])
  return jnp.sum(a * b, axis=a.ndim - b.ndim)


def diagonally_dominant_inverse(matrix):
  """The inverse of strictly row-diagonally-dominant (Q, Q) matrices, by Gauss-Jordan
  elimination without pivoting (stable there: no pivot is smaller than the margin of
  dominance). Trailing axes are batch axes, and the elimination is plain array operations
  along them: a batch of small systems never calls the batched LAPACK kernels, which on CPU
  can deadlock XLA's thread pool (docs/decisions/no-batched-lapack.md). The
  resolvent (I - qT)⁻¹ of the transfer route (§3d) is such a matrix; left_solve gives
  products with it their cheap derivative.

  Args:
    matrix: (Q, Q, ...), strictly diagonally dominant by rows.

  Returns:
    The inverse (Q, Q, ...).

  Example:
    >>> inverse = lj.linalg.diagonally_dominant_inverse(jnp.array([[2.0, 1.0], [1.0, 3.0]]))
    >>> (inverse * 5).round(12).tolist()
    [[3.0, -1.0], [-1.0, 2.0]]
  """
  size = matrix.shape[0]
  shape = (size, size) + (1,) * (matrix.ndim - 2)
  row_index, column_index = (jax.lax.broadcasted_iota(jnp.int32, shape, axis) for axis in (0, 1))
  for k in range(size):  # Q is small and static: unrolled, every step one fused loop
    # In place: row k is divided by the pivot, the other rows lose multiples of it, and
    # column k, eliminated, stores the inverse's column k.
    pivot = 1.0 / matrix[k, k]
    row, column = matrix[k] * pivot, matrix[:, k]
    matrix = jnp.where(row_index == k, jnp.where(column_index == k, pivot, row[None]),
                       jnp.where(column_index == k, -column[:, None] * pivot,
                                 matrix - column[:, None] * row[None]))
  return matrix


@jax.custom_jvp
def left_solve(rows, matrix):
  """rows · M⁻¹ at every entry of a trailing batch axis N, for strictly row-diagonally-
  dominant M, by diagonally_dominant_inverse. Its derivative, d(a M⁻¹) = (da - y dM) M⁻¹ with
  y = a M⁻¹, takes only row vectors through M⁻¹, so reverse mode gives M a rank-one
  cotangent per solve instead of two Q × Q × Q products (the transfer route's resolvent, §3d).

  Args:
    rows: (..., Q, N), contracted over the axis before the batch axis, as batched_dot.
    matrix: (Q, Q, N), strictly diagonally dominant by rows at every n.

  Returns:
    rows · M⁻¹, shaped like rows.

  Example:
    >>> matrix = jnp.array([[2.0, 1.0], [1.0, 3.0]])[..., None]  # N = 1
    >>> lj.linalg.left_solve(jnp.array([[5.0], [0.0]]), matrix)[:, 0].round(12).tolist()
    [3.0, -1.0]
  """
  return batched_dot(rows, diagonally_dominant_inverse(matrix))


@left_solve.defjvp
def _left_solve_jvp(primals, tangents):
  (rows, matrix), (d_rows, d_matrix) = primals, tangents
  solved = left_solve(rows, matrix)
  return solved, left_solve(d_rows - batched_dot(solved, d_matrix), matrix)


def resolvent_series(rows, columns, system, q, times):
  """G, G', G'' at s = 0 of G(s) = y(s)·b(s) with y(s) = a(s)(I - q C(s))⁻¹, for
  X(s) = X0 + s X1 + ½ s² X2 (X = a, b, C), at every entry of a trailing batch axis N (§3d).

  Differentiating y (I - q C) = a twice gives every order by the one resolvent
  R = (I - q C0)⁻¹, applied to row vectors only (left_solve):
  y0 = a0 R, y1 = (a1 + q y0 C1) R, y2 = (a2 + 2q y1 C1 + q y0 C2) R; then
  G = y0 b0, G' = y1 b0 + y0 b1, G'' = y2 b0 + 2 y1 b1 + y0 b2.

  Args:
    rows: (a0, a1, a2), each (Q, N).
    columns: (b0, b1, b2) stacked, (3, Q, J, N); or b0 alone, (1, Q, J, N) (b1 = b2 = 0).
      N may be 1 (a column shared by every entry).
    system: I - q C0, (Q, Q, N), strictly diagonally dominant by rows.
    q: the scalar q.
    times: (y -> y C1, y -> y C2) on rows (Q, N); C1 and C2 need never be formed.

  Returns:
    (G, G', G''), each (J, N).

  Example:
    Q = J = N = 1, a ≡ 1, b ≡ 1 and C(s) = s: G(s) = 1/(1 - q s), so G' = q and G'' = 2q²:

    >>> one, zero = jnp.ones((1, 1)), jnp.zeros((1, 1))
    >>> series = lj.linalg.resolvent_series(
    ...     (one, zero, zero), one[None, ..., None], one[..., None], 0.5,
    ...     (lambda y: y, lambda y: 0 * y))
    >>> [round(float(each[0, 0]), 6) for each in series]
    [1.0, 0.5, 0.5]
  """
  a0, a1, a2 = rows
  times_c1, times_c2 = times
  y0 = left_solve(a0, system)
  y1 = left_solve(a1 + q * times_c1(y0), system)
  y2 = left_solve(a2 + 2.0 * q * times_c1(y1) + q * times_c2(y0), system)
  # Leibniz: G^(k) = Σ_i C(k, i) y_{k-i}·b_i, one product over the stacked b_i (a reshape of
  # columns) for all k at once; y_j for j < 0 is zero. No indexing, so no padded cotangents.
  orders, size = columns.shape[0], y0.shape[0]
  ys, zero = (y0, y1, y2), jnp.zeros_like(y0)
  leibniz = jnp.stack([jnp.concatenate([math.comb(k, i) * ys[k - i] if i <= k else zero
                                        for i in range(orders)]) for k in range(3)])
  return jnp.unstack(batched_dot(leibniz, columns.reshape((orders * size,) + columns.shape[2:])))


__all__ = ["batched_dot", "diagonally_dominant_inverse", "left_solve", "resolvent_series"]
