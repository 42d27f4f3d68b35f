"""lagjax/dynamics/output_phase.py: the linear phase under gradient flow (docs/theory.md §5),
dβ/dt = -r D^{-1}(Hβ - g) at fixed α, against independent routes.

- scipy.linalg.expm of the augmented generator [[-rD^{-1}H, rD^{-1}g], [0, 0]] acting on
  (β0, 1): no eigendecomposition, no β*. Both are float64 evaluations of the same linear
  map; expm's scaling and squaring is accurate to ~1e-15·‖e^{At}‖ and the Jacobi route to
  ~cond(H)·1e-16 (cond <= 40 for these seeds), times |β| = O(1): measured differences are
  <= 4e-15, and 1e-10 leaves four orders of margin.
- GD in closed form (output_gd) at η → 0 with ηT = t: its error is first order in η
  (Euler's global error), so halving η halves it; the fitted order must be 1 ± 0.05.
- t = ∞ on a singular H: the limit solves Hβ = g and keeps the null-space part of β0 (in the
  metric D), which characterizes it uniquely.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from lagjax.dynamics import output_phase

TOL = 1e-10
# One compilation per problem size (a handful): eagerly, the solver's ~100 primitives
# would compile one by one.
output_flow_path = jax.jit(output_phase.output_flow_path)
output_gd = jax.jit(output_phase.output_gd)


def random_problem(seed, rank=None):
  """Moments of a finite population: H = E[W Wᵀ], g = E[yW] (y = ±1), W in a rank-`rank`
  subspace, so that g lies in H's range and R >= 0 (docs/theory.md §3a); sizes and β0."""
  rng = np.random.default_rng(seed)
  size = int(rng.integers(2, 7))
  rank = size if rank is None else rank
  basis = np.linalg.qr(rng.normal(size=(size, size)))[0][:, :rank]
  features = rng.normal(size=(3 * size, rank)) @ basis.T            # W, one row per string
  weights = rng.dirichlet(np.ones(3 * size))
  labels = rng.choice([-1.0, 1.0], 3 * size)
  hessian = (weights[:, None] * features).T @ features
  target = (weights * labels) @ features
  sizes = rng.integers(1, 10, size).astype(np.float64)
  beta0 = rng.normal(size=size)
  return hessian, target, sizes, beta0


def expm_flow(hessian, target, sizes, beta0, rate, time):
  """β(t) from the matrix exponential of the affine flow's augmented generator."""
  size = len(beta0)
  generator = np.zeros((size + 1, size + 1))
  generator[:size, :size] = -rate * hessian / sizes[:, None]
  generator[:size, size] = rate * target / sizes
  return (scipy.linalg.expm(generator * time) @ np.append(beta0, 1.0))[:size]


@pytest.mark.parametrize("seed", range(4))
def test_flow_equals_matrix_exponential(seed):
  """β(t) and R(β(t)) = the matrix exponential's, at t = 0, 0.5, 3 and 20."""
  hessian, target, sizes, beta0 = random_problem(seed)
  rate, times = 0.7, np.array([0.0, 0.5, 3.0, 20.0])
  beta, risk = output_flow_path(hessian, target, sizes, beta0, rate, times)
  for row, time in enumerate(times):
    want = expm_flow(hessian, target, sizes, beta0, rate, time)
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(np.asarray(beta[row]), want, rtol=0, atol=TOL * scale)
    want_risk = 0.5 * want @ hessian @ want - target @ want + 0.5
    np.testing.assert_allclose(float(risk[row]), want_risk, rtol=0, atol=TOL * scale**2)


def test_flow_is_gd_limit():
  """GD with step η for t/η steps tends to the flow at t, with error O(η) (order 1 ± 0.05)."""
  hessian, target, sizes, beta0 = random_problem(7)
  rate, time = 0.3, 5.0
  want, _ = output_flow_path(hessian, target, sizes, beta0, rate, jnp.array([time]))
  etas = np.array([0.02, 0.01, 0.005])  # rate·η: the GD step of the flow form is η·rate
  errors = np.array([
      np.abs(np.asarray(output_gd(hessian, target, sizes, beta0, rate * eta, time / eta))
             - np.asarray(want[0])).max() for eta in etas])
  order = np.polyfit(np.log(etas), np.log(errors), 1)[0]
  assert abs(order - 1.0) < 0.05, (errors, order)
  assert errors[-1] < 1e-2


@pytest.mark.parametrize("seed", range(3))
def test_infinite_time_on_a_singular_hessian(seed):
  """β(∞) solves Hβ = g and keeps β0's null-space part; finite t converges to it."""
  hessian, target, sizes, beta0 = random_problem(seed, rank=1 + seed % 2)
  root = np.sqrt(sizes)
  eigenvalues, vectors = np.linalg.eigh(hessian / root[:, None] / root[None, :])
  null = vectors[:, eigenvalues < 1e-10 * eigenvalues.max()]
  assert null.shape[1] >= 1
  beta, _ = output_flow_path(hessian, target, sizes, beta0, 1.3,
                             jnp.array([1e4, jnp.inf]))
  limit = np.asarray(beta[1])
  np.testing.assert_allclose(hessian @ limit, target, rtol=0, atol=TOL)
  np.testing.assert_allclose(null.T @ (root * limit), null.T @ (root * beta0), rtol=0, atol=TOL)
  np.testing.assert_allclose(np.asarray(beta[0]), limit, rtol=0, atol=TOL)


def test_rate_zero_and_time_zero_stay_put():
  """r = 0, or t = 0, leaves β0 unchanged (also at t = ∞ when r = 0)."""
  hessian, target, sizes, beta0 = random_problem(3)
  still, _ = output_flow_path(hessian, target, sizes, beta0, 0.0, jnp.array([0.0, 5.0, jnp.inf]))
  np.testing.assert_allclose(np.asarray(still), np.broadcast_to(beta0, still.shape), atol=1e-14)
  start, _ = output_flow_path(hessian, target, sizes, beta0, 2.0, jnp.array([0.0]))
  np.testing.assert_allclose(np.asarray(start[0]), beta0, atol=1e-14)
