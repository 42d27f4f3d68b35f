"""Marion et al.'s single-location-regression model (docs/theory.md §7b).

    T(X) = Σ_ℓ erf(λ⟨X_ℓ, k⟩)⟨X_ℓ, v⟩,   k (attention group), v (output group)

with k and v unit vectors, trained by projected GD on the sphere. Its exact
population risk on the SLR task is lagjax.risk.erf_gaussian.erf_population_risk.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

PARAM_GROUPS = {"k": "attention", "v": "output"}


def project_to_sphere(params):
  """Each leaf x ↦ x/‖x‖ (the projection step of projected GD, docs/theory.md §7b); a zero
  leaf stays zero.

  Args:
    params: a pytree of vectors, e.g. {"k": (m,), "v": (m,)}.

  Returns:
    The same pytree with unit (or zero) leaves.

  Example:
    >>> unit = lj.models.erf_slr.project_to_sphere({"k": jnp.array([3.0, 4.0]),
    ...                                             "v": jnp.zeros(2)})
    >>> np.round(np.asarray(unit["k"]), 6).tolist(), unit["v"].tolist()
    ([0.6, 0.8], [0.0, 0.0])
  """
  def project(x):
    norm = jnp.linalg.norm(x)
    return x / jnp.where(norm > 0, norm, 1.0)

  return jax.tree_util.tree_map(project, params)


def tangent_gradients(params, grads):
  """Each gradient leaf g at x ↦ g - ⟨g, x⟩x, for unit x: the Riemannian gradient on the sphere
  (docs/theory.md §7b).

  Marion et al.'s projected GD steps along this and then applies project_to_sphere;
  stepping along the Euclidean gradient and projecting is a different map.

  Args:
    params: the point, a pytree of unit vectors.
    grads: the Euclidean gradient, the same pytree.

  Returns:
    The tangent part of grads, the same pytree.

  Example:
    >>> tangent = lj.models.erf_slr.tangent_gradients({"k": jnp.array([1.0, 0.0])},
    ...                                               {"k": jnp.array([2.0, 3.0])})
    >>> tangent["k"].tolist()  # the radial part 2 is removed
    [0.0, 3.0]
  """
  return jax.tree_util.tree_map(lambda x, g: g - jnp.vdot(g, x) * x, params, grads)


def apply(params, inputs, mask, lam):
  """T(X) = Σ_ℓ erf(λ⟨X_ℓ,k⟩)⟨X_ℓ,v⟩ over real positions, for inputs X (..., L, m)
  (docs/theory.md §7b).

  Args:
    params: {"k": (m,), "v": (m,)}.
    inputs: X, shape (..., L, m).
    mask: boolean (..., L), True at real positions.
    lam: λ.

  Returns:
    (...,) outputs.

  Example:
    >>> params = {"k": jnp.array([1.0, 0.0]), "v": jnp.array([0.0, 1.0])}
    >>> inputs = jnp.array([[1.0, 2.0], [3.0, 4.0]])  # the second position is padding
    >>> T = lj.models.erf_slr.apply(params, inputs, jnp.array([True, False]), 1.0)
    >>> round(float(T), 6)  # erf(1)·2
    1.685402
  """
  terms = jax.scipy.special.erf(lam * (inputs @ params["k"])) * (inputs @ params["v"])
  return jnp.where(mask, terms, 0.0).sum(-1)
