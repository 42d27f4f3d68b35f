"""The Jacobi eigendecomposition of lagjax/linalg/symmetric.py at every size, and no LAPACK
in the programs that batch it (docs/theory.md §5, numerics; docs/decisions/no-batched-lapack.md).

The sizes up to MAX_SIZE (cyclic order) are tested in tests/dynamics/test_closed_form.py
(test_symmetric_eigh_equals_lapack); these are the sizes above it (round-robin order), which
took LAPACK's eigh before."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lagjax.dynamics import output_phase
from lagjax.linalg import symmetric

LARGE_SIZES = (17, 18, 33, 50)


def _matrices(size, rng):
  """10 symmetric matrices: random ones, and the zero matrix, a multiple of I, a repeated
  eigenvalue and the all-ones matrix (every pair already diagonal, or rank one)."""
  matrices = rng.normal(size=(10, size, size))
  matrices = matrices + np.swapaxes(matrices, 1, 2)
  matrices[0], matrices[1], matrices[3] = 0.0, 3.0 * np.eye(size), 1.0
  matrices[2] = np.diag(np.r_[np.ones(size - 1), 2.0])
  return matrices


def _worst_errors(matrices):
  """Eigenvalue error against numpy's eigvalsh relative to the largest entry, and the
  errors of V Λ Vᵀ = A (relative) and VᵀV = I."""
  values, vectors = map(np.asarray, jax.jit(jax.vmap(symmetric.symmetric_eigh))(
      jnp.asarray(matrices)))
  scale = max(1.0, np.abs(matrices).max())
  rebuilt = vectors @ (values[..., None] * np.swapaxes(vectors, 1, 2))
  return (np.abs(values - np.linalg.eigvalsh(matrices)).max() / scale,
          np.abs(rebuilt - matrices).max() / scale,
          np.abs(np.swapaxes(vectors, 1, 2) @ vectors - np.eye(matrices.shape[-1])).max())


@pytest.mark.parametrize("size", LARGE_SIZES)
def test_round_robin_eigh_equals_lapack_above_max_size(size):
  """Above MAX_SIZE (round-robin Jacobi), odd sizes padded by one: the same bounds as the
  cyclic sizes' test, 1e-13 relative to the largest entry for the eigenvalues, V Λ Vᵀ = A
  and VᵀV = I (measured ≤ 2e-14 at G = 50; LAPACK's own error is of that order)."""
  errors = _worst_errors(_matrices(size, np.random.default_rng(size)))
  assert max(errors) <= 1e-13, errors


def test_round_robin_eigh_needs_its_sweeps(monkeypatch):
  """The bound above is not met by chance: with 2 sweeps instead of SWEEPS the eigenvalues
  of 50 × 50 random matrices are off by far more than 1e-13."""
  monkeypatch.setattr(symmetric, "SWEEPS", 2)
  errors = _worst_errors(_matrices(50, np.random.default_rng(50)))
  assert errors[0] > 1e-6, errors


def _custom_calls(function, *args):
  return [line for line in jax.jit(function).lower(*args).as_text().splitlines()
          if "custom_call" in line]


def test_no_lapack_in_batched_closed_forms_on_many_groups():
  """No deadlock by construction (docs/decisions/no-batched-lapack.md): the output phase and
  the Gram risk of the closed forms on 50 token groups, vmapped over step sizes (two
  independent eigendecompositions in one program, as in the regimes bisection), compile to a
  program without any custom call (LAPACK kernels are custom calls). The old fallback to
  jnp.linalg.eigh above MAX_SIZE puts an eigh custom call there and fails this."""
  groups = 50
  rng = np.random.default_rng(0)
  half = rng.normal(size=(groups, groups)) / groups
  hessian = jnp.asarray(half @ half.T + np.eye(groups) / groups)
  target = jnp.asarray(rng.normal(size=groups) / groups)
  sizes = jnp.ones(groups)

  def final_risk(eta):
    beta = output_phase.output_gd(hessian, target, sizes, jnp.zeros(groups), eta, 100)
    return output_phase.quadratic_risk(hessian, target, beta)

  etas = jnp.array([0.5, 1.0, 2.0])
  assert _custom_calls(jax.vmap(final_risk), etas) == []
  assert _custom_calls(jax.vmap(jnp.linalg.eigh), jnp.stack([hessian] * 3)) != []  # the probe
