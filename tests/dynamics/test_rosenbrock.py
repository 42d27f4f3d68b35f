"""Rodas5P's error control (lagjax/dynamics/rosenbrock.py; docs/theory.md §5c): the tests
that the mutation pass of docs/results/mutation/rosenbrock.md added, beside
test_flow_rosenbrock.py's accuracy oracles. A wrong error estimate (another stage's
increment, of order 4), a step accepted with its error up to 10× the tolerance, or a step
shortened to land on a jump time whose stages divide by the unshortened h, still meets those
oracles at rtol 1e-8 (the controller only spends more or fewer steps), so these check the
estimate's order and the controller's decisions directly.
"""

import jax
import jax.numpy as jnp
import numpy as np

from lagjax.dynamics import rosenbrock


def vector_field(y):
  """test_flow_rosenbrock.py's nonlinear, mildly stiff field."""
  return jnp.array([-y[0] ** 2 + 0.3 * jnp.sin(y[1]), -5.0 * (y[1] - jnp.cos(y[0])),
                    -0.5 * y[2] * y[0]])


def rate(t):
  """The rate of a two-phase plan: 1 before t = 0.5, 40 after (the flow's phase boundary,
  where the step size of the slow phase is too long for the fast one and steps are
  rejected)."""
  return jnp.where(t < 0.5, 1.0, 40.0)


def field(t, y):
  """The field of the phase holding t (rosenbrock.solve passes the step's start)."""
  return jnp.sum(y), rate(t) * vector_field(y)


Y0 = jnp.array([1.0, 0.2, 0.7])


@jax.jit
def one_step(t, y, h):
  """One Rodas5P step of size h from (t, y): (y1, error estimate)."""
  def phase_field(z):
    return field(t, z)[1]

  y1, error, _ = rosenbrock.step(field, t, y, h, phase_field(y), jax.jacfwd(phase_field)(y))
  return y1, error


def test_the_error_estimate_is_of_order_five():
  """The estimate y1 - ŷ1 is the local error of the embedded order-4 solution, O(h^5):
  halving h divides it by about 2^5 (fitted 5 ± 0.3 at h = 0.0125 … 0.003125, where it is
  1e-10 … 1e-13, far above roundoff). Another stage's increment (k7, O(h^4)) fits 4."""
  sizes = (0.0125, 0.00625, 0.003125)
  estimates = [np.abs(np.asarray(one_step(0.0, Y0, h)[1])).max() for h in sizes]
  orders = np.log2(np.array(estimates[:-1]) / np.array(estimates[1:]))
  np.testing.assert_allclose(orders, 5.0, atol=0.3)


def solve(rtol, atol, vmap_columns, monkeypatch):
  monkeypatch.setattr(rosenbrock, "VMAP_COLUMNS", vmap_columns)
  return jax.jit(lambda: rosenbrock.solve(
      field, Y0, 2.0, jnp.array([0.5, 0.7]), lambda value, f, y: False, rtol=rtol, atol=atol,
      max_steps=500))()


def test_every_accepted_step_meets_the_tolerance(monkeypatch):
  """Each accepted step, redone from its start with its size, has a scaled RMS error
  estimate ≤ 1 (rtol 1e-6, atol 1e-8): the acceptance test, checked from outside the
  solver's loop, on a run where the rate's jump at t = 0.5 makes the controller reject
  steps (a solver that accepted errors up to 10 took steps of error 5 here)."""
  rtol, atol = 1e-6, 1e-8
  solution = solve(rtol, atol, 8, monkeypatch)
  assert int(solution.result) == rosenbrock.COMPLETED and int(solution.num_rejected) >= 1
  accepted = int(solution.num_accepted)
  ts, ys = np.asarray(solution.ts), np.asarray(solution.ys)
  norms = []
  for i in range(accepted):
    y1, error = one_step(ts[i], jnp.asarray(ys[i]), ts[i + 1] - ts[i])
    np.testing.assert_allclose(np.asarray(y1), ys[i + 1], rtol=1e-12, atol=1e-14)
    scale = atol + rtol * np.maximum(np.abs(ys[i]), np.abs(np.asarray(y1)))
    norms.append(np.sqrt(np.mean((np.asarray(error) / scale) ** 2)))
  assert max(norms) <= 1.0, max(norms)
  # The controller works near the bound (else the test would say nothing about it).
  assert max(norms) > 0.1, max(norms)


def test_both_ways_of_evaluating_take_the_same_steps(monkeypatch):
  """The Jacobian vmapped (≤ VMAP_COLUMNS parameters) and every evaluation in one loop
  (above it) are the same method: the same accepted and rejected steps at the same times
  (to roundoff, 1e-12), also the steps shortened to land on the jump times 0.5 and 0.7 and
  on t1 (rtol 1e-5, atol 1e-7)."""
  vmapped = solve(1e-5, 1e-7, 8, monkeypatch)
  one_loop = solve(1e-5, 1e-7, 0, monkeypatch)
  accepted = int(vmapped.num_accepted)
  assert int(one_loop.num_accepted) == accepted
  assert int(one_loop.num_rejected) == int(vmapped.num_rejected)
  times = np.asarray(vmapped.ts[:accepted + 1])
  assert {0.5, 0.7, 2.0} <= set(times.tolist())
  np.testing.assert_allclose(np.asarray(one_loop.ts[:accepted + 1]), times, rtol=1e-12)
  np.testing.assert_allclose(np.asarray(one_loop.ys[:accepted + 1]),
                             np.asarray(vmapped.ys[:accepted + 1]), rtol=1e-12, atol=1e-14)
