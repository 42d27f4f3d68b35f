"""Marion et al.'s single-location-regression model (docs/theory.md §7b).

    T(X) = Σ_ℓ erf(λ⟨X_ℓ, k⟩)⟨X_ℓ, v⟩,   k (attention group), v (output group)

with k and v unit vectors, trained by projected GD on the sphere. Its exact
population risk on the SLR task is lagjax.risk.erf_slr.erf_population_risk.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

GROUPS = {"k": "attention", "v": "output"}


def project_to_sphere(params):
  """Each leaf x ↦ x/‖x‖ (the projection step of projected GD); a zero leaf stays zero."""
  def project(x):
    norm = jnp.linalg.norm(x)
    return x / jnp.where(norm > 0, norm, 1.0)

  return jax.tree_util.tree_map(project, params)


def tangent_gradients(params, grads):
  """Each gradient leaf g at x ↦ g - ⟨g, x⟩x, for unit x: the Riemannian gradient on the sphere.

  Marion et al.'s projected GD steps along this and then applies project_to_sphere;
  stepping along the Euclidean gradient and projecting is a different map.
  """
  return jax.tree_util.tree_map(lambda x, g: g - jnp.vdot(g, x) * x, params, grads)


def apply(params, inputs, mask, lam):
  """T(X) = Σ_ℓ erf(λ⟨X_ℓ,k⟩)⟨X_ℓ,v⟩ over real positions, for inputs X (..., L, m).

  Args:
    params: {"k": (m,), "v": (m,)}.
    inputs: X, shape (..., L, m).
    mask: boolean (..., L), True at real positions.
    lam: λ.

  Returns:
    (...,) outputs.
  """
  terms = jax.scipy.special.erf(lam * (inputs @ params["k"])) * (inputs @ params["v"])
  return jnp.where(mask, terms, 0.0).sum(-1)
