"""The Rodas5P solver of lj.flow (lagjax/dynamics/rosenbrock.py; docs/theory.md §5c).

Oracles independent of it: scipy's DOP853 at rtol 1e-13 on a small nonlinear ODE (its
error, ~1e-13, sits far below the errors measured here, 1e-12 at the finest step), the
exact solution of a linear stiff ODE, and diffrax's Kvaerno5 on a flow.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import lagjax as lj
from lagjax.dynamics import rosenbrock


def vector_field(y):
  """A nonlinear, mildly stiff field with no closed-form solution."""
  return jnp.array([-y[0] ** 2 + 0.3 * jnp.sin(y[1]), -5.0 * (y[1] - jnp.cos(y[0])),
                    -0.5 * y[2] * y[0]])


def field(t, y):
  del t
  return jnp.sum(y), vector_field(y)


Y0 = np.array([1.0, 0.2, 0.7])


@pytest.fixture(scope="module")
def reference():
  return solve_ivp(lambda t, y: np.asarray(vector_field(jnp.asarray(y))), (0.0, 2.0), Y0,
                   method="DOP853", rtol=1e-13, atol=1e-14, dense_output=True).sol


@jax.jit
def fixed_steps(h, num_steps):
  """num_steps Rodas5P steps of size h from Y0, and the dense output at 0.3 of the last."""
  def one(i, carry):
    y, _ = carry
    y1, _, dense = rosenbrock.step(field, 0.0, y, h, vector_field(y),
                                   jax.jacfwd(vector_field)(y))
    s = 0.3
    return y1, (1 - s) * y + s * (y1 + (1 - s) * (dense[0] + s * (dense[1] + s * dense[2])))

  return jax.lax.fori_loop(0, num_steps, one, (jnp.asarray(Y0), jnp.asarray(Y0)))


def test_the_method_has_order_five(reference):
  """Halving h divides the global error at t = 2 by 2^5 (fitted order 5 ± 0.3)."""
  errors = []
  for num_steps in (10, 20, 40, 80):
    y, _ = fixed_steps(2.0 / num_steps, num_steps)
    errors.append(np.abs(np.asarray(y) - reference(2.0)).max())
  orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
  np.testing.assert_allclose(orders, 5.0, atol=0.3)


def test_the_dense_output_has_order_four(reference):
  """One step from the exact state: the dense output at 0.3 of the step errs by O(h^5)
  (an order-4 interpolant), halving h divides it by about 2^5 (fitted above 4.5; an
  order-3 interpolant would give 4)."""
  errors = []
  for h in (0.1, 0.05, 0.025):
    _, middle = fixed_steps(h, 1)
    errors.append(np.abs(np.asarray(middle) - reference(0.3 * h)).max())
  orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
  assert np.all(orders > 4.5), orders


@pytest.mark.parametrize("vmap_columns", [8, 0], ids=["vmapped", "one_loop"])
def test_adaptive_solve_meets_its_tolerance_and_lands_on_jumps(reference, monkeypatch,
                                                              vmap_columns):
  """rtol 1e-8: the end state and the dense output within 1e-8 (local error 1e-8 per step,
  a contracting field); the jump time 0.5 is a step end exactly. Both ways of evaluating
  (the Jacobian vmapped, or every evaluation in one loop as above VMAP_COLUMNS)."""
  monkeypatch.setattr(rosenbrock, "VMAP_COLUMNS", vmap_columns)
  solution = jax.jit(lambda: rosenbrock.solve(
      field, jnp.asarray(Y0), 2.0, jnp.array([0.5]), lambda value, f, y: False, rtol=1e-8,
      atol=1e-10, max_steps=1000))()
  assert int(solution.result) == rosenbrock.COMPLETED and float(solution.t_final) == 2.0
  steps = np.asarray(solution.ts[:int(solution.num_accepted) + 1])
  assert 0.5 in steps.tolist() and steps[-1] == 2.0
  np.testing.assert_allclose(np.asarray(solution.y_final), reference(2.0), atol=1e-8)
  times = np.linspace(0.0, 2.0, 37)
  dense = np.array([solution.evaluate(t) for t in times])
  np.testing.assert_allclose(dense, reference(times).T, atol=1e-8)
  # The end state was evaluated (value_final, f_final), for the run's status.
  np.testing.assert_allclose(np.asarray(solution.f_final),
                             np.asarray(vector_field(solution.y_final)), rtol=1e-14)


def test_stiff_linear_decay_is_damped_in_one_step():
  """y' = -λ (y - y*) at hλ = 1e10: one step multiplies y0 - y* by the stability function
  R(-1e10), which is O(1/z) for an L-stable method (about -12.5/z here); an A-stable method
  without L-stability (the trapezoidal rule: R(-∞) = -1) would keep all of it."""
  rate, equilibrium = 1e10, 1e-10

  def linear(t, y):
    del t
    return jnp.sum(y), -rate * (y - equilibrium)

  y0 = jnp.array([1.0])
  y1, _, _ = rosenbrock.step(linear, 0.0, y0, 1.0, linear(0.0, y0)[1], jnp.array([[-rate]]))
  damping = (float(y1[0]) - equilibrium) / (1.0 - equilibrium)
  assert abs(damping) < 100 / rate, damping


def test_stop_ends_the_solve_at_a_step_start():
  """stop fires at the first step start where y0 < 0.5: result STOPPED there, and the
  state before it was above 0.5."""
  def decay(t, y):
    del t
    return y[0], -y

  solution = rosenbrock.solve(decay, jnp.array([1.0]), 10.0, jnp.zeros(0),
                              lambda value, f, y: value < 0.5, rtol=1e-8, atol=1e-10,
                              max_steps=1000)
  accepted = int(solution.num_accepted)
  assert int(solution.result) == rosenbrock.STOPPED
  assert float(solution.y_final[0]) < 0.5 < float(solution.ys[accepted - 1][0])
  np.testing.assert_allclose(float(solution.y_final[0]), np.exp(-float(solution.t_final)),
                             rtol=1e-7)


@pytest.mark.parametrize("vmap_columns", [8, 0], ids=["vmapped", "one_loop"])
def test_stop_at_the_start_and_at_the_end(monkeypatch, vmap_columns):
  """stop true at y0: the solve ends at t = 0 with no step; stop never true: the end state's
  value and field are evaluated (value_final, f_final)."""
  monkeypatch.setattr(rosenbrock, "VMAP_COLUMNS", vmap_columns)

  def decay(t, y):
    del t
    return y[0], -y

  at_once = rosenbrock.solve(decay, jnp.array([1.0]), 10.0, jnp.zeros(0),
                             lambda value, f, y: True, rtol=1e-8, atol=1e-10, max_steps=100)
  assert int(at_once.result) == rosenbrock.STOPPED and float(at_once.t_final) == 0.0
  assert int(at_once.num_accepted) == 0 and float(at_once.value_final) == 1.0
  to_end = rosenbrock.solve(decay, jnp.array([1.0]), 10.0, jnp.zeros(0),
                            lambda value, f, y: False, rtol=1e-8, atol=1e-10, max_steps=100)
  assert int(to_end.result) == rosenbrock.COMPLETED and float(to_end.t_final) == 10.0
  np.testing.assert_allclose(float(to_end.value_final), np.exp(-10.0), rtol=1e-7)
  np.testing.assert_allclose(float(to_end.f_final[0]), -float(to_end.y_final[0]), rtol=1e-15)


@pytest.mark.slow
def test_rodas5p_flow_agrees_with_kvaerno5():
  """The same flow (even pairs would take minutes: occurrence d = 3, joint, to t = 10⁴) by
  both solvers at rtol 1e-8: risks within 1e-6 relative (each within ~1e-7 of the flow)."""
  plan = lj.plans.joint(1.0, 10_000)
  rodas = lj.flow(lj.occurrence(3), plan, num_records=8)
  kvaerno = lj.flow(lj.occurrence(3), plan, num_records=8, solver="kvaerno5")
  assert rodas.solver == "rodas5p" and kvaerno.solver == "kvaerno5"
  np.testing.assert_allclose(np.asarray(rodas.risk), np.asarray(kvaerno.risk), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(rodas.alpha), np.asarray(kvaerno.alpha), atol=1e-6)
