"""Exact population GD of a plan of output and attention phases on any layout, its output
phases in closed form (docs/theory.md §5, §10).

At fixed attention parameters the model's output f is linear in the output parameters b
(β, β_cls, β^F, β^L; §2b), so the squared risk is the quadratic R(b) = ½ bᵀHb - gᵀb + ½ with
H = ∇²_b R and g = -∇_b R at b = 0, taken here by automatic differentiation of the exact
route on a grid that covers the fixed scores (risk/coverage.py). GD on b at step size η,
per token (metric 1), is then output_phase's closed form (`output_gd_solver`): an output
phase of T steps costs one Hessian and one eigendecomposition, whatever T, and its risk is
the sum of squares `gram_risk`. Attention phases are stepped by lj.train (its grid re-size
and divergence rule), except a phase whose attention gradient is exactly 0 at its start:
GD maps θ to θ - η·0 = θ, so the phase stays there (attention training from b = 0, where
f ≡ 0 makes ∂R/∂α = 0; §4).

`train(lang, plan, theta0)` returns what lj.train(lang, plan, theta0, record_every=k,
zero_one=False) returns, the same states to roundoff (tests/dynamics/test_hybrid.py checks
1e-10), with the divergence rule of §5 applied at every step: the atlas's GD runs of the
mixed plans (three_phase, attention_first, output_only, attention_only; §10) take it, 10⁴
steps each at the cost of a few.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from lagjax import validation
from lagjax.data import languages
from lagjax.dynamics import closed_form, plans, runner
from lagjax.dynamics import train as train_lib
from lagjax.dynamics import trajectory as trajectory_lib
from lagjax.dynamics.output_phase import gram_factors, gram_risk, output_gd_solver
from lagjax.models import direct
from lagjax.risk import coverage, registry

# R(b = 0) = ½ E[y²] = ½ for labels y = ±1 (gram_factors assumes it); a route that gives
# anything else beyond roundoff is not this quadratic, and the plan runs through lj.train.
HALF_TOL = 1e-12


def supports(plan: plans.Plan, loss="squared") -> str | None:
  """None if `train` simulates `plan` exactly, else what is missing (one line; §5).

  Args:
    plan: the plan.
    loss: the loss; only "squared" makes the output phase a quadratic.

  Returns:
    None, or the reason.

  Example:
    >>> lj.dynamics.hybrid.supports(lj.plans.three_phase(1.0, 10.0, 1.0, 20)) is None
    True
    >>> lj.dynamics.hybrid.supports(lj.plans.joint(1.0, 20))
    "the closed form simulates output and attention phases; phase 0 trains 'both' (use lj.train)"
  """
  if loss != "squared":
    return f"the hybrid engine needs loss 'squared'; got {loss!r}"
  return closed_form.phases_support(plan)


def _split(theta: dict) -> tuple[dict, dict]:
  """(attention part, output part) of per-token params, by direct.PARAM_GROUPS."""
  attention = {k: v for k, v in theta.items() if direct.PARAM_GROUPS[k] == "attention"}
  return attention, {k: v for k, v in theta.items() if direct.PARAM_GROUPS[k] == "output"}


@functools.lru_cache(maxsize=32)
def _compiled(lang, layout, num_points):
  """Jitted (risk, quadratic, attention_gradient) of the exact route on `num_points` nodes."""
  options = {} if num_points is None else {"num_points": num_points}
  route = registry.risk_fn(lang, **layout._asdict(), **options)

  def quadratic(attention, output):
    flat, unravel = ravel_pytree(output)

    def risk_of(b):
      return route.risk({**attention, **unravel(b)})

    zero = jnp.zeros_like(flat)
    value, gradient = jax.value_and_grad(risk_of)(zero)
    return jax.hessian(risk_of)(zero), -gradient, value

  def attention_gradient(attention, output):
    return jax.grad(lambda a: route.risk({**a, **output}))(attention)

  return jax.jit(route.risk), jax.jit(quadratic), jax.jit(attention_gradient)


def _grid_for(lang, layout, theta):
  """The route's num_points covering θ's scores (None: not a quadrature route), or False
  where no grid of the ladder covers them (risk/coverage.py)."""
  if not train_lib.build_route_spec(lang, "squared", "auto", layout).quadrature:
    return None
  windows = coverage.windows(lang.d, layout)
  return coverage.size_covering(lang, coverage.needed(lang, theta), windows) or False


@functools.partial(jax.jit, static_argnums=(4,))
def _output_path(hessian, target, flat0, eta, steps):
  """(b_t (steps+1, P), R(b_t) (steps+1,)) of GD on the quadratic, t = 0…steps (§5)."""
  path = output_gd_solver(hessian, target, jnp.ones_like(flat0), flat0, eta)(
      jnp.arange(steps + 1, dtype=jnp.float64))
  return path, gram_risk(gram_factors(hessian, target), path)


_step_is_finite = jax.jit(runner.step_is_finite)  # one program, not one per operation


@jax.jit
def _taken_and_betas(risk, path, attention, output, max_risk):
  """Along an output path b_t with risks R(b_t): whether each step t -> t+1 passes the
  divergence rule of §5 (runner.step_is_finite on R(b_t) and b_{t+1}), and β_t."""
  _, unravel = ravel_pytree(output)
  taken = jax.vmap(lambda value, new: runner.step_is_finite(value, max_risk, new))(
      risk[:-1], path[1:])
  betas = jax.vmap(lambda b: direct.output_vector({**attention, **unravel(b)}))(path)
  return taken, betas


def _phase_states(lang, layout, theta, phase, max_risk):
  """The states of one phase from θ: (risk (k+1,), alpha (k+1, ·), beta (k+1, ·),
  params at each step as a function of the index, diverged_step or -1); the record k is
  the state after the phase, and a diverged phase's states stop at its step. None when the
  phase is not the quadratic or the grid cannot cover θ (the caller runs lj.train)."""
  attention, output = _split(theta)
  size = _grid_for(lang, layout, theta)
  if size is False:
    return None
  risk_at, quadratic, attention_gradient = _compiled(lang, layout, size)
  steps = phase.steps
  alpha0, beta0 = direct.attention_vector(theta), direct.output_vector(theta)
  if phase.group == "attention":
    gradient = attention_gradient(attention, output)
    if all(not np.any(np.asarray(leaf)) for leaf in jax.tree_util.tree_leaves(gradient)):
      value = float(risk_at(theta))
      risk = np.full(steps + 1, value)
      # The divergence rule of §5 on the step θ -> θ (runner.step_is_finite).
      stopped = -1 if bool(_step_is_finite(value, max_risk, theta)) else 0
      return (risk, np.broadcast_to(alpha0, (steps + 1, alpha0.size)),
              np.broadcast_to(beta0, (steps + 1, beta0.size)), lambda i: theta, stopped)
    run = train_lib.train(lang, plans.Plan((phase,), "phase"), theta, record_every=1,
                          zero_one=False)
    step = int(run.diverged_step)
    return (np.asarray(run.risk), np.asarray(run.alpha), np.asarray(run.beta),
            lambda i: run.params, step)
  hessian, target, value = quadratic(attention, output)
  if not abs(float(value) - 0.5) <= HALF_TOL:
    return None
  flat0, unravel = ravel_pytree(output)
  path, risk = _output_path(hessian, target, flat0, float(phase.eta), steps)
  taken, betas = (np.asarray(x) for x in _taken_and_betas(risk, path, attention, output,
                                                           max_risk))
  path, risk = np.asarray(path), np.asarray(risk)
  stopped = int(np.argmin(taken)) if not taken.all() else -1
  return (risk, np.broadcast_to(alpha0, (steps + 1, alpha0.size)), betas,
          lambda i: {**attention, **unravel(jnp.asarray(path[i]))}, stopped)


def train(lang: languages.Language, plan: plans.Plan, theta0=None, *, record_every: int = 1,
          max_risk: float = runner.MAX_VALUE) -> trajectory_lib.Trajectory:
  """Runs a plan of output and attention phases by exact population GD from θ0, its output
  phases in closed form (module docstring; docs/theory.md §5).

  Args:
    lang: the language.
    plan: a Plan that `supports` accepts.
    theta0: per-token initial parameters of any layout; None is θ0 = 0 (no CLS).
    record_every: record every this many steps (and at T), as lj.train.
    max_risk: an objective above this marks the run diverged (§5).

  Returns:
    The Trajectory of lj.train(lang, plan, theta0, record_every=record_every,
    zero_one=False): per-token risk, alpha, beta, the final params and the divergence rule,
    with info engine "hybrid" (or lj.train's own run where an output phase is not the
    quadratic or no grid covers θ).

  Raises:
    ValueError: one line, when `supports` refuses the plan.

  Example:
    Output-only GD on even pairs for 10⁴ steps costs one Hessian:

    >>> lang = lj.languages.from_spec("even_pairs")
    >>> run = lj.dynamics.hybrid.train(lang, lj.plans.output_only(1.0, 10_000))
    >>> run.risk.shape, run.info
    ((10001,), (('engine', 'hybrid'),))
  """
  validation.require_float64("lj.dynamics.hybrid.train")
  languages.check_language(lang, "lj.dynamics.hybrid.train")
  reason = supports(plan)
  if reason is not None:
    raise ValueError(f"{reason}.")
  record_every, max_risk = runner.check_run_options(plan, record_every, max_risk)
  theta = direct.init_params(lang.d) if theta0 is None else theta0
  direct.check_params(theta, lang.d)
  layout = direct.layout(theta)
  risks, alphas, betas = [], [], []
  diverged_step = -1
  for offset, phase in zip(plan.boundaries[:-1], plan.phases):
    states = _phase_states(lang, layout, theta, phase, max_risk)
    if states is None:
      return train_lib.train(lang, plan, theta0, record_every=record_every,
                             max_risk=max_risk, zero_one=False)
    risk, alpha, beta, params_at, stopped = states
    if stopped >= 0:  # the run stays at θ_t from the step t that was not taken on (§5)
      risks.append(risk[:stopped + 1])
      alphas.append(alpha[:stopped + 1])
      betas.append(beta[:stopped + 1])
      diverged_step, theta = int(offset) + stopped, params_at(stopped)
      break
    risks.append(risk[:-1])
    alphas.append(alpha[:-1])
    betas.append(beta[:-1])
    theta = params_at(phase.steps)
  total = plan.total_steps
  if diverged_step < 0:  # the state after the last step, which no step judges
    risks.append(risk[-1:])
    alphas.append(alpha[-1:])
    betas.append(beta[-1:])
  risk, alpha, beta = (np.concatenate(parts) for parts in (risks, alphas, betas))
  # A diverged run holds θ_{t*} from t* on (records after it repeat it, as in the runner).
  padding = total + 1 - risk.size
  risk, alpha, beta = (np.concatenate([x, np.repeat(x[-1:], padding, axis=0)])
                       for x in (risk, alpha, beta))
  steps = np.unique(np.concatenate([np.arange(0, total, record_every), [total]]))
  return trajectory_lib.Trajectory(
      params=jax.tree_util.tree_map(jnp.asarray, theta), steps=jnp.asarray(steps),
      risk=jnp.asarray(risk[steps]), alpha=jnp.asarray(alpha[steps]),
      beta=jnp.asarray(beta[steps]), diverged=jnp.asarray(diverged_step >= 0),
      diverged_step=jnp.asarray(diverged_step), cls=bool(layout.cls),
      info=(("engine", "hybrid"),))


__all__ = ["supports", "train"]
