"""Sharpness: the top eigenvalues of the risk's Hessian at θ (docs/theory.md section 5d).

λ_max(∇²R(θ)) decides the stability of GD at θ: a step of size η is stable along the top
eigendirection iff η·λ_max < 2. Parameter counts here are small, so up to
`DENSE_MAX_PARAMS` parameters the Hessian is formed by automatic differentiation and
decomposed exactly (Jacobi rotations, lagjax/linalg/symmetric.py, never batched LAPACK);
above, Lanczos with full reorthogonalisation reads it through Hessian-vector products
only, ∇²R(θ)·v = d/dε ∇R(θ + εv), one forward-over-reverse pass each.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from lagjax import validation
from lagjax.linalg import symmetric_eigh

DENSE_MAX_PARAMS = 64       # up to this many parameters, the dense Hessian (O(P³) Jacobi)
LANCZOS_ITERATIONS = 64     # Krylov dimension above it (capped at the parameter count)
METHODS = ("auto", "dense", "lanczos")


def hessian_vector_product(risk: Callable, params) -> Callable:
  """v ↦ ∇²R(θ)·v on flat vectors, by forward-over-reverse differentiation (§5d).

  Args:
    risk: params -> scalar R.
    params: the point θ (any pytree).

  Returns:
    hvp(v (P,)) -> (P,), with P the number of parameters in the order of
    `jax.flatten_util.ravel_pytree(params)`.

  Example:
    >>> risk = lambda p: 0.5 * (3.0 * p["a"] ** 2 + p["b"] ** 2).sum()
    >>> hvp = lj.dynamics.sharpness.hessian_vector_product(risk, {"a": 1.0, "b": 2.0})
    >>> hvp(jnp.array([1.0, 1.0])).tolist()
    [3.0, 1.0]
  """
  flat, unravel = ravel_pytree(params)
  gradient = jax.grad(lambda x: risk(unravel(x)))
  return lambda v: jax.jvp(gradient, (flat,), (v,))[1]


def dense_hessian(risk: Callable, params):
  """The Hessian ∇²R(θ) as a (P, P) matrix over `ravel_pytree(params)`, symmetrised (§5d).

  Args:
    risk: params -> scalar R.
    params: the point θ.

  Returns:
    (P, P) array.

  Example:
    >>> risk = lambda p: (p[0] * p[1]) ** 2
    >>> lj.dynamics.sharpness.dense_hessian(risk, jnp.array([1.0, 2.0])).tolist()
    [[8.0, 8.0], [8.0, 2.0]]
  """
  flat, unravel = ravel_pytree(params)
  hessian = jax.hessian(lambda x: risk(unravel(x)))(flat)
  return 0.5 * (hessian + hessian.T)


def _lanczos(hvp: Callable, size: int, iterations: int, key):
  """Ritz values (ascending) of `iterations` Lanczos steps with full reorthogonalisation."""
  start = jax.random.normal(key, (size,))
  basis = jnp.zeros((iterations + 1, size)).at[0].set(start / jnp.linalg.norm(start))

  def step(carry, j):
    basis, alphas, betas = carry
    v = basis[j]
    w = hvp(v)
    alpha = v @ w
    # Full reorthogonalisation, twice ("twice is enough"): the Krylov basis stays
    # orthonormal to roundoff, so no ghost copies of λ_max appear among the Ritz values.
    used = (jnp.arange(iterations + 1) <= j)[:, None]
    for _ in range(2):
      w = w - (basis * used).T @ ((basis * used) @ w)
    beta = jnp.linalg.norm(w)
    # An invariant subspace was found (β = 0): the rest of the basis stays zero.
    next_v = jnp.where(beta > 0.0, w / jnp.where(beta > 0.0, beta, 1.0), 0.0)
    basis = basis.at[j + 1].set(next_v)
    return (basis, alphas.at[j].set(alpha), betas.at[j].set(beta)), None

  carry = (basis, jnp.zeros(iterations), jnp.zeros(iterations))
  (_, alphas, betas), _ = jax.lax.scan(step, carry, jnp.arange(iterations))
  tridiagonal = (jnp.diag(alphas) + jnp.diag(betas[:-1], 1) + jnp.diag(betas[:-1], -1))
  return symmetric_eigh(tridiagonal)[0]


def top_eigenvalues(risk: Callable, params, k: int = 1, *, method: str = "auto",
                    iterations: int | None = None, key=None):
  """The k largest eigenvalues of ∇²R(θ), largest first (docs/theory.md §5d).

  "dense" forms the Hessian by `jax.hessian` and decomposes it exactly (Jacobi); "lanczos"
  runs `iterations` Lanczos steps with full reorthogonalisation on Hessian-vector products
  and returns the top Ritz values, which converge to the extreme eigenvalues first; "auto"
  takes "dense" up to DENSE_MAX_PARAMS parameters. Jittable for fixed k, method and
  iterations.

  Args:
    risk: params -> scalar R (a route's risk, or any twice-differentiable function).
    params: the point θ (any pytree).
    k: how many eigenvalues, 1 ≤ k ≤ the number of parameters.
    method: "auto", "dense" or "lanczos".
    iterations: the Krylov dimension of "lanczos" (default min(P, LANCZOS_ITERATIONS));
      at least k.
    key: PRNG key of Lanczos' start vector (default key 0).

  Returns:
    (k,) eigenvalues, in decreasing order; λ_max is the first.

  Raises:
    ValueError: k outside [1, P], an unknown method, or iterations < k.

  Example:
    GD at step η is stable along the top direction iff η·λ_max < 2:

    >>> risk = lambda p: 0.5 * (jnp.array([5.0, 2.0, 1.0]) * p ** 2).sum()
    >>> lj.dynamics.sharpness.top_eigenvalues(risk, jnp.zeros(3), k=2).tolist()
    [5.0, 2.0]
    >>> lj.dynamics.sharpness.top_eigenvalues(risk, jnp.zeros(3), k=4)
    Traceback (most recent call last):
    ...
    ValueError: k must be an integer in [1, 3] (the number of parameters); got 4.
  """
  flat, _ = ravel_pytree(params)
  size = flat.shape[0]
  if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= size:
    raise ValueError(f"k must be an integer in [1, {size}] (the number of parameters); "
                     f"got {k!r}.")
  validation.check_choice("method", method, METHODS)
  if method == "auto":
    method = "dense" if size <= DENSE_MAX_PARAMS else "lanczos"
  if method == "dense":
    values = symmetric_eigh(dense_hessian(risk, params))[0]
  else:
    iterations = min(size, LANCZOS_ITERATIONS) if iterations is None else iterations
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < k:
      raise ValueError(f"iterations must be an integer ≥ k = {k}; got {iterations!r}.")
    key = jax.random.key(0) if key is None else key
    values = _lanczos(hessian_vector_product(risk, params), size, iterations, key)
  return values[::-1][:k]


def first_unstable(sharpness, etas):
  """Index of the first record where η·λ_max > 2 (GD is unstable along the top direction
  there), or -1 if there is none (docs/theory.md §5d).

  Args:
    sharpness: (R,) λ_max at the records.
    etas: the step size at the records, (R,) or a scalar.

  Returns:
    An int array, the record index or -1.

  Example:
    >>> int(lj.dynamics.sharpness.first_unstable(jnp.array([1.0, 1.5, 2.5, 1.0]), 1.0))
    2
  """
  unstable = jnp.asarray(etas) * jnp.asarray(sharpness) > 2.0
  return jnp.where(unstable.any(), jnp.argmax(unstable), -1)


__all__ = ["DENSE_MAX_PARAMS", "LANCZOS_ITERATIONS", "METHODS", "dense_hessian",
           "first_unstable", "hessian_vector_product", "top_eigenvalues"]
