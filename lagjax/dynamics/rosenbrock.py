"""A linearly implicit (Rosenbrock) solver for the gradient flow (docs/theory.md §5c).

The flow dθ/dt = f(θ) = -r ⊙ ∇̃R(θ) is stiff late in training, where the Hessian's spread
grows with the scores. A Rosenbrock method is implicit through one exact Jacobian per step,
J = ∂f/∂θ (the Hessian, scaled by the rates and group sizes: a few dozen parameters at
most), and linear solves with W = I/(hγ) - J: no Newton iterations, so no step is lost to
a Newton iteration that fails to converge, and a rejected step reuses J (only W's LU, a
few microseconds, is redone for the new h).

The method is Rodas5P (Steinebach 2023; the coefficients of OrdinaryDiffEq.jl's
Rodas5PTableau): eight stages, order 5, an embedded order-4 solution whose difference
(the last stage's increment) is the error estimate, L-stable and stiffly accurate, with a
dense output of order 4 from the stages alone. In Hairer & Wanner's form (IV.7), with
k_i the stage increments,

    (I/(hγ) - J) k_i = f(y0 + Σ_j a_ij k_j) + Σ_j (C_ij / h) k_j,   y1 = y0 + Σ_j m_j k_j.

The step size follows a PI controller on the RMS norm of the error scaled by
atol + rtol·max(abs(y0), abs(y1)), as diffrax's PIDController does; steps end exactly on the
given jump times (phase boundaries), where the vector field changes.

Everything runs in one `lax.while_loop`, one step per iteration: the Jacobian by
`jax.linearize` at the step's start (its primal is the first stage's f, its columns the
Jacobian-vector products, vmapped for a few parameters and looped for more), then the
seven further stages in a `fori_loop`. So the vector field is traced twice (linearised
and plain), and its compiled program stays small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

# Rodas5P (Steinebach 2023), as OrdinaryDiffEq.jl's Rodas5PTableau writes it.
GAMMA = 0.21193756319429014
_A6 = (-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
       0.030198172008377946)
# Stage arguments y0 + Σ_j A[i, j] k_j; the last three stages add k6, k7 in turn and
# y1 adds k8 (stiff accuracy).
A = np.zeros((8, 8))
A[1, 0] = 3.0
A[2, :2] = (2.849394379747939, 0.45842242204463923)
A[3, :3] = (-6.954028509809101, 2.489845061869568, -10.358996098473584)
A[4, :4] = (2.8029986275628964, 0.5072464736228206, -0.3988312541770524,
            -0.04721187230404641)
A[5, :5] = _A6
A[6, :6] = (*_A6, 1.0)
A[7, :7] = (*_A6, 1.0, 1.0)
WEIGHTS = np.array([*_A6, 1.0, 1.0, 1.0])
C = np.zeros((8, 8))
C[1, 0] = -14.155112264123755
C[2, :2] = (-17.97296035885952, -2.859693295451294)
C[3, :3] = (147.12150275711716, -1.41221402718213, 71.68940251302358)
C[4, :4] = (165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306)
C[5, :5] = (24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125,
            -0.6610691825249471)
C[6, :6] = (30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783,
            -19.097331116725623, -28.087943162872662)
C[7, :7] = (37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047,
            -40.06618937091002, -54.66780262877968, -9.48861652309627)
# The dense output: y(s) = (1 - s) y0 + s (y1 + (1 - s)(d1 + s (d2 + s d3))), d = DENSE @ k.
DENSE = np.array([
    [25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204,
     0.524948541321073, 1.1241088310450404, 0.4272876194431874, -0.17202221070155493],
    [-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796,
     20.176138334709044, 15.98066361424651, -6.789040303419874, -6.710236069923372],
    [11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643,
     -52.072871366152654, -59.78993625266729, -0.15582684282751913, 4.883087185713722]])
NUM_STAGES = 8
# The error estimate is O(h^5) (the embedded solution has order 4).
ERROR_ORDER = 5

# Step-size control: factor = SAFETY · err^-(P + I)/q · err_prev^(P/q), q = ERROR_ORDER,
# clipped to [FACTOR_MIN, FACTOR_MAX] (and below SAFETY after a rejection). The integral
# (I) controller: on the flows to t = 10⁶ of benchmarks/flow_bench.py it took 552 steps
# (1 rejected) on even pairs and 344 (3) on occurrence d = 50, against 704 (0) and 444 (0)
# for the PI coefficients 0.3 / 0.4 that suit Kvaerno5 (a rejected step costs no Jacobian
# here); R(t) within 5e-9 of a run at rtol 1e-11 either way.
PCOEFF, ICOEFF = 0.0, 1.0
SAFETY, FACTOR_MIN, FACTOR_MAX = 0.9, 0.2, 10.0
# Above this many parameters the Jacobian's columns are computed in a loop (one JVP program
# compiled) instead of vmapped (a batched program that compiles slower).
VMAP_COLUMNS = 8

# Why the solve ended (Solution.result).
COMPLETED, STOPPED, FAILED = 0, 1, 2


class Solution(NamedTuple):
  """The accepted steps of a Rodas5P solve and their dense output (docs/theory.md §5c).

  Attributes:
    ts: (M + 1,) 0 and the end of each accepted step, +inf past the last.
    ys: (M + 1, n) the states there.
    dense: (M, 3, n) each step's dense-output vectors.
    num_accepted, num_rejected: the steps.
    t_final, y_final: the end.
    value_final, f_final: field's values at the end (the solver evaluates the end state,
      t1 reached or stopped; after a failure, the last step's start).
    result: COMPLETED (t1 reached), STOPPED (`stop` fired at t_final) or FAILED (max_steps
      reached or the step size collapsed).

  Example:
    >>> from lagjax.dynamics import rosenbrock
    >>> solution = rosenbrock.solve(lambda t, y: (y[0], -y), jnp.ones(1), 1.0, jnp.zeros(0),
    ...                             lambda value, f, y: False, rtol=1e-8, atol=1e-10,
    ...                             max_steps=64)
    >>> round(float(solution.evaluate(0.5)[0]), 7) == round(float(np.exp(-0.5)), 7)
    True
  """
  ts: jax.Array
  ys: jax.Array
  dense: jax.Array
  num_accepted: jax.Array
  num_rejected: jax.Array
  t_final: jax.Array
  y_final: jax.Array
  value_final: jax.Array
  f_final: jax.Array
  result: jax.Array

  def evaluate(self, t):
    """θ(t) for t in [0, t_final] (scalar t) by the step's dense output (order 4, §5c)."""
    last = jnp.maximum(self.num_accepted - 1, 0)
    index = jnp.clip(jnp.searchsorted(self.ts, t, side="right") - 1, 0, last)
    t0, t1 = self.ts[index], self.ts[index + 1]
    width = t1 - t0
    s = jnp.where(width > 0, (t - t0) / jnp.where(width > 0, width, 1.0), 0.0)
    s = jnp.clip(s, 0.0, 1.0)
    d1, d2, d3 = self.dense[index]
    y0, y1 = self.ys[index], self.ys[index + 1]
    state = (1 - s) * y0 + s * (y1 + (1 - s) * (d1 + s * (d2 + s * d3)))
    return jnp.where(self.num_accepted > 0, state, self.ys[0])


def _rms(x):
  return jnp.sqrt(jnp.mean(x * x))


def step(field: Callable, t, y, h, f0, jacobian):
  """One Rodas5P step of size h from (t, y) (docs/theory.md §5c).

  Args:
    field: (t0, y) -> (value, f), the vector field f of the step (see `solve`).
    t: the step's start, passed to field.
    y: the state (n,).
    h: the step size.
    f0: f(y).
    jacobian: ∂f/∂y at y, (n, n).

  Returns:
    (y1, the error estimate y1 - ŷ1 of the embedded order-4 solution, the dense vectors
    (3, n)).

  Example:
    >>> from lagjax.dynamics import rosenbrock
    >>> y1, error, _ = rosenbrock.step(lambda t, y: (y[0], -y), 0.0, jnp.ones(1), 0.1,
    ...                                -jnp.ones(1), -jnp.eye(1))
    >>> abs(float(y1[0]) - float(np.exp(-0.1))) < 1e-9, abs(float(error[0])) < 1e-6
    (True, True)
  """
  n = y.shape[0]
  a, c, weights, dense_matrix = (jnp.asarray(m, y.dtype) for m in (A, C, WEIGHTS, DENSE))
  lu = jax.scipy.linalg.lu_factor(jnp.eye(n, dtype=y.dtype) / (h * GAMMA) - jacobian)
  ks = jnp.zeros((NUM_STAGES, n), y.dtype).at[0].set(jax.scipy.linalg.lu_solve(lu, f0))

  def stage(i, ks):
    _, f = field(t, y + a[i] @ ks)
    return ks.at[i].set(jax.scipy.linalg.lu_solve(lu, f + (c[i] @ ks) / h))

  ks = jax.lax.fori_loop(1, NUM_STAGES, stage, ks)
  return y + weights @ ks, ks[-1], dense_matrix @ ks


def solve(field: Callable, y0, t1, jump_ts, stop: Callable, *, rtol: float, atol: float,
          max_steps: int) -> Solution:
  """Integrates dy/dt = field(t0, y)[1] from 0 to t1 by Rodas5P (docs/theory.md §5c).

  Args:
    field: (t0, y) -> (value, f): the vector field f of the phase holding t0 (the step's
      start: the field may change only at jump_ts), and a scalar `value` (the risk) that
      `stop` reads.
    y0: the initial state (n,).
    t1: the end time (traced).
    jump_ts: the times (traced, rising, possibly empty) where the field changes; steps end
      on them exactly.
    stop: (value, f, y) -> bool, checked at every step's start: True ends the solve there
      (result STOPPED).
    rtol, atol: the local error per step is held at rtol·abs(y) + atol (RMS over coordinates).
    max_steps: the budget of attempted steps (accepted or rejected); the dense output holds
      this many.

  Returns:
    The Solution.

  Example:
    >>> from lagjax.dynamics import rosenbrock
    >>> solution = rosenbrock.solve(lambda t, y: (y[0], -y), jnp.ones(1), 10.0,
    ...                             jnp.array([5.0]), lambda value, f, y: False, rtol=1e-8,
    ...                             atol=1e-10, max_steps=256)
    >>> int(solution.result) == rosenbrock.COMPLETED, float(solution.t_final)
    (True, 10.0)
    >>> 5.0 in np.asarray(solution.ts).tolist()  # a jump time is a step's end
    True
  """
  n = y0.shape[0]
  dtype = y0.dtype
  jump_ts = jnp.asarray(jump_ts, dtype)
  ends = jnp.concatenate([jump_ts, jnp.reshape(jnp.asarray(t1, dtype), (1,))])
  eye = jnp.eye(n, dtype=dtype)

  def linearised(t, y):
    """value, f(y) and J = ∂f/∂y at the step's start."""
    (value, f), jvp = jax.linearize(lambda z: field(t, z), y)
    if n <= VMAP_COLUMNS:
      columns = jax.vmap(lambda v: jvp(v)[1])(eye)
    else:
      columns = jax.lax.map(lambda v: jvp(v)[1], eye)
    return value, f, columns.T

  def merged_step(t, y, h, fresh, value, f0, jacobian, step_size, ending):
    """One step with every evaluation of the field in one loop and one program, the
    Jacobian-vector products of its n columns (tangent e_j, at y; skipped after a rejected
    step) and then the seven stages (tangent 0): one copy of the route in the compiled
    program instead of two, for the cost of a tangent where a stage needs none (about one
    gradient's time here)."""
    a, c = jnp.asarray(A, dtype), jnp.asarray(C, dtype)
    total = n + NUM_STAGES - 1

    def solver_of(f0, jacobian, h):
      h, h_step = step_size(h, f0)
      lu = jax.scipy.linalg.lu_factor(eye / (h_step * GAMMA) - jacobian)
      return h_step, lambda rhs: jax.scipy.linalg.lu_solve(lu, rhs)

    def go_on(carry):
      j, *_, ended = carry
      # After the first evaluation the stop test is known: an ending solve needs no more.
      return (j < total) & ~ended

    def evaluate(carry):
      j, value, f0, columns, ks, ended = carry
      stage = j - n + 1
      h_step, solve = solver_of(f0, columns.T, h)
      ks = jnp.where(j == n, ks.at[0].set(solve(f0)), ks)
      point = jnp.where(j < n, y, y + a[jnp.maximum(stage, 0)] @ ks)
      tangent = jnp.where(j < n, eye[jnp.minimum(j, n - 1)], 0.0)
      (value_j, f_j), (_, column) = jax.jvp(lambda z: field(t, z), (point,), (tangent,))
      first = j == 0
      value, f0 = jnp.where(first, value_j, value), jnp.where(first, f_j, f0)
      columns = jnp.where(j < n, columns.at[jnp.minimum(j, n - 1)].set(column), columns)
      k = solve(f_j + (c[jnp.maximum(stage, 0)] @ ks) / h_step)
      ks = jnp.where(j >= n, ks.at[jnp.maximum(stage, 0)].set(k), ks)
      # The stop test once a step, after the first evaluation (it reads the grid's needs).
      ended = jax.lax.cond(first, lambda: ending(fresh, value, f0)[1], lambda: ended)
      return j + 1, value, f0, columns, ks, ended

    start = jnp.where(fresh, 0, n)
    ks = jnp.zeros((NUM_STAGES, n), dtype)
    _, value, f0, columns, ks, _ = jax.lax.while_loop(
        go_on, evaluate, (start, value, f0, jacobian.T, ks, jnp.array(False)))
    jacobian = columns.T
    stopping, finishing = ending(fresh, value, f0)
    h, h_step = step_size(h, f0)
    y1 = jnp.where(finishing, y, y + jnp.asarray(WEIGHTS, dtype) @ ks)
    error = jnp.where(finishing, 0.0, ks[-1])
    step_dense = jnp.asarray(DENSE, dtype) @ ks
    return value, f0, jacobian, stopping, finishing, h, h_step, y1, error, step_dense

  def body(state):
    (t, y, h, inv_error, value, f0, jacobian, fresh, accepted, rejected, ts, ys, dense,
     result) = state
    next_end = ends[jnp.argmax(ends > t)]

    def step_size(h, f0):
      """The step from (t, y): h, the first time (h NaN) Hairer & Wanner's guess
      0.01·‖y0‖/‖f(y0)‖ as diffrax's, ending at the next jump time or t1 if it passes it."""
      scale = atol + rtol * jnp.abs(y)
      d0, d1 = _rms(y / scale), _rms(f0 / scale)
      h = jnp.where(jnp.isnan(h), jnp.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1),
                    h)
      return h, jnp.minimum(h, next_end - t)

    def ending(fresh, value, f0):
      """(stop fired at a new step's start, the solve ends here)."""
      stopping = fresh & stop(value, f0, y)
      return stopping, stopping | (t >= ends[-1])

    if n <= VMAP_COLUMNS:
      # A new step's start: the Jacobian there (a rejected step keeps it), and the stop
      # test; at t1 the last Jacobian only evaluates the end state (value_final, f_final).
      value, f0, jacobian = jax.lax.cond(
          fresh, lambda: linearised(t, y), lambda: (value, f0, jacobian))
      stopping, finishing = ending(fresh, value, f0)
      h, h_step = step_size(h, f0)
      y1, error, step_dense = jax.lax.cond(
          finishing, lambda: (y, jnp.zeros_like(y), jnp.zeros((3, n), dtype)),
          lambda: step(field, t, y, h_step, f0, jacobian))
    else:
      (value, f0, jacobian, stopping, finishing, h, h_step, y1, error,
       step_dense) = merged_step(t, y, h, fresh, value, f0, jacobian, step_size, ending)
    lands = h >= next_end - t
    scaled = error / (atol + rtol * jnp.maximum(jnp.abs(y), jnp.abs(y1)))
    error_norm = _rms(scaled)
    error_norm = jnp.where(jnp.isfinite(error_norm) & jnp.all(jnp.isfinite(y1)),
                           error_norm, jnp.inf)
    keep = (error_norm <= 1.0) & ~finishing
    inv = 1.0 / jnp.maximum(error_norm, 1e-10)
    factor = SAFETY * inv ** ((PCOEFF + ICOEFF) / ERROR_ORDER) * inv_error ** (
        -PCOEFF / ERROR_ORDER)
    factor = jnp.clip(factor, FACTOR_MIN, jnp.where(keep, FACTOR_MAX, SAFETY))
    factor = jnp.where(jnp.isfinite(factor), factor, FACTOR_MIN)
    t_new = jnp.where(lands, next_end, t + h_step)
    index = accepted + 1
    # In-place writes (a rejected step rewrites the slot with its old content).
    ts = ts.at[index].set(jnp.where(keep, t_new, ts[index]))
    ys = ys.at[index].set(jnp.where(keep, y1, ys[index]))
    dense = dense.at[accepted].set(jnp.where(keep, step_dense, dense[accepted]))
    rejected = rejected + (~keep & ~finishing)
    collapsed = h_step * factor <= 1e-14 * jnp.maximum(1.0, jnp.abs(t))
    result = jnp.select(
        [stopping, finishing, (accepted + rejected + keep >= max_steps) | (~keep & collapsed)],
        [STOPPED, COMPLETED, FAILED], -1)
    return (jnp.where(keep, t_new, t), jnp.where(keep, y1, y),
            jnp.where(finishing, h, h_step * factor), jnp.where(keep, inv, inv_error), value,
            f0, jacobian, keep, accepted + keep, rejected, ts, ys, dense, result)

  ts = jnp.full((max_steps + 1,), jnp.inf, dtype).at[0].set(0.0)
  ys = jnp.zeros((max_steps + 1, n), dtype).at[0].set(y0)
  dense = jnp.zeros((max_steps, 3, n), dtype)
  zero = jnp.zeros((), dtype)
  state = (zero, y0, jnp.array(jnp.nan, dtype), jnp.ones((), dtype), zero,
           jnp.zeros_like(y0), jnp.zeros((n, n), dtype), jnp.array(True),
           jnp.array(0), jnp.array(0), ts, ys, dense, jnp.array(-1))
  final = jax.lax.while_loop(lambda state: state[-1] < 0, body, state)
  t, y, _, _, value, f, _, _, accepted, rejected, ts, ys, dense, result = final
  return Solution(ts=ts, ys=ys, dense=dense, num_accepted=accepted, num_rejected=rejected,
                  t_final=t, y_final=y, value_final=value, f_final=f, result=result)
