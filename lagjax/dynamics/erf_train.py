"""Exact projected GD of Marion et al.'s erf model on the SLR task (docs/theory.md §7b).

`train_erf` runs any plan through the one training loop (lagjax.dynamics.runner) on
the exact population objective of lagjax.risk.erf_gaussian, keeping k and v on the unit
sphere (lagjax.models.erf_slr). Its run is the one run record, a Trajectory
(lagjax/dynamics/trajectory.py), with k as the attention group and v as the output group.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from lagjax import models
from lagjax.dynamics import runner
from lagjax.dynamics.trajectory import Trajectory
from lagjax.models import erf_slr
from lagjax.risk import erf_gaussian as erf_risk
from lagjax.tasks import base


def train_erf(task: base.Task, plan, lam, params0, *, record_every: int = 1,
              riemannian: bool = True, max_risk: float = runner.MAX_VALUE) -> Trajectory:
  """Runs `plan` on the erf model with exact population gradients (docs/theory.md §7b).

  Projected GD on the sphere through the one training loop (lagjax.dynamics.runner): each step
  moves along the Riemannian gradient g - ⟨g, x⟩x (Marion et al.; riemannian=False: the
  Euclidean gradient) and projects back onto the unit sphere.

  Args:
    task: the SLR task.
    plan: a lj.plans.Plan (groups: k attention, v output).
    lam: λ > 0.
    params0: {"k": (m,), "v": (m,)} unit vectors.
    record_every: record every this many steps (and at the end).
    riemannian: step along the tangent (default) or the Euclidean gradient.
    max_risk: a risk above this marks the run diverged.

  Returns:
    A Trajectory with records at every record_every steps and at the end: risk (R,) the
    exact risk E[(T - y)²] (no ½; the noise σ² included), alpha (R, m) the attention
    direction k, beta (R, m) the output direction v, records k_overlap ⟨k, k*⟩ and
    v_overlap ⟨v, v*⟩ (R,); params the final {"k", "v"}, unit vectors.

  Example:
    >>> task = lj.tasks.get_task("slr", m=3)  # Fixed(10) lengths, γ = 1, σ = 0.1
    >>> start = {"k": jnp.array([1.0, 0.0, 0.0]), "v": jnp.array([0.0, 1.0, 0.0])}
    >>> plan = lj.plans.three_phase(0.01, 0.01, 0.01, 1)
    >>> run = lj.dynamics.erf_train.train_erf(task, plan, 1.0, start)
    >>> run.steps.tolist()
    [0, 1, 2, 3]
    >>> np.round(np.linalg.norm(np.asarray(run.alpha), axis=-1), 12).tolist()  # on the sphere
    [1.0, 1.0, 1.0, 1.0]
    >>> bool(jnp.all(run.alpha[1] == run.alpha[0]))  # the first step trains v only
    True
    >>> bool(jnp.all(jnp.diff(run.risk) < 0))
    True
  """
  record_every, max_risk = runner.check_run_options(plan, record_every, max_risk)
  m = erf_risk._check_slr_task(task, "train_erf").options["m"]
  params0 = {name: erf_risk._check_direction(name, params0[name], m) for name in ("k", "v")}
  objective = erf_risk.make_erf_objective(task, lam)
  risk = erf_risk._erf_risk_fn(task)  # records need the value only, not its gradient
  k_star, v_star = (jnp.asarray(task.extras[name]) for name in ("k_star", "v_star"))

  def step_objective(params, step, phase):
    value, grads = objective(params, step, phase)
    return value, erf_slr.tangent_gradients(params, grads) if riemannian else grads

  def record(params):
    return {"risk": risk(params["k"], params["v"], lam), "alpha": params["k"],
            "beta": params["v"],
            "k_overlap": params["k"] @ k_star, "v_overlap": params["v"] @ v_star}

  loop = runner.make_loop(plan.slots(), functools.partial(models.group_labels,
                                                            erf_slr.PARAM_GROUPS),
                            lambda key: step_objective, record,
                            num_steps=plan.total_steps, record_every=record_every,
                            max_value=max_risk, constrain=erf_slr.project_to_sphere)
  return jax.jit(loop)(params0, jax.random.key(0), plan.data())
