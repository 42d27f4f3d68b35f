"""Closed-form output phases and O(1)-in-T plans (THEORY.md section 5).

At fixed α the squared risk is R(β) = ½ βᵀHβ - gᵀβ + ½ with H = E[W Wᵀ],
g = E[y W] (laplace.attention_moments). Gradient descent with the per-token
gradient on tied groups of sizes k (metric D = diag(k)) is
    β_{t+1} = β_t - η D^{-1} (H β_t - g).
In z = Qᵀ D^{1/2} β, with D^{-1/2} H D^{-1/2} = Q Λ Qᵀ and b = Qᵀ D^{-1/2} g,
each coordinate evolves alone:
    z_T = (1 - ηλ)^T z_0 + η b S_T(λ),   S_T(λ) = Σ_{s<T} (1 - ηλ)^s,
with S_T = (1 - (1-ηλ)^T)/(ηλ) and S_T → T as ηλ → 0; T = ∞ gives the
minimizer on the range of H when every |1 - ηλ| < 1.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import languages, plans
from lagjax import partition as partition_lib
from lagjax.risk import laplace, lattice

SMALL_RATE = 1e-9


def output_gd(hessian, target, sizes, beta0, eta, steps):
  """β after `steps` GD steps of size η on ½βᵀHβ - gᵀβ in the metric diag(sizes).

  Args:
    hessian: H (G, G); target: g (G,); sizes: group sizes k (G,) (1 for CLS).
    beta0: initial β (G,); eta: step size; steps: number of steps (may be jnp.inf).

  Returns:
    β_T (G,). Non-finite when some |1 - ηλ| > 1 (the run diverges).
  """
  root = jnp.sqrt(sizes)
  eigenvalues, basis = jnp.linalg.eigh(hessian / root[:, None] / root[None, :])
  z0 = basis.T @ (root * beta0)
  b = basis.T @ (target / root)
  rate = eta * jnp.maximum(eigenvalues, 0.0)
  contraction = 1.0 - rate
  power = jnp.where(rate > 0, jnp.abs(contraction) ** steps * jnp.sign(contraction) ** (
      jnp.where(jnp.isinf(steps), 0.0, steps)), 1.0)
  # (1 - ηλ)^∞ is 0 on the contracting directions; a non-contracting one diverges.
  power = jnp.where(jnp.isinf(steps) & (rate > 0) & (jnp.abs(contraction) < 1), 0.0, power)
  geometric_sum = jnp.where(rate > SMALL_RATE, (1.0 - power) / jnp.where(rate > SMALL_RATE,
                                                                           rate, 1.0), steps)
  geometric_sum = jnp.where((rate <= SMALL_RATE) & (jnp.abs(b) == 0), 0.0, geometric_sum)
  z = power * z0 + eta * b * geometric_sum
  return (basis @ z) / root


def quadratic_risk(hessian, target, beta):
  """R(β) = ½ βᵀHβ - gᵀβ + ½ at fixed α."""
  return 0.5 * beta @ hessian @ beta - target @ beta + 0.5


def _check_closed_form_plan(plan: plans.Plan):
  for i, phase in enumerate(plan.phases):
    if not isinstance(phase.objective, plans.Population):
      raise ValueError(f"closed form needs population objectives; phase {i} has "
                       f"{phase.objective!r}.")
    if phase.group == "both":
      raise ValueError(f"closed form simulates output and attention phases; phase {i} trains "
                       "'both' (use lj.train).")
    if phase.group == "output" and (callable(phase.eta) or phase.optimizer is not
                                    plans.optax.sgd):
      raise ValueError(f"closed-form output phases need plain SGD with a constant step size; "
                       f"phase {i} has eta={phase.eta!r}, optimizer={phase.optimizer!r}.")


def make_simulator(lang: languages.Language, plan: plans.Plan, *, cls: bool = False,
                   partition: partition_lib.Partition | None = None):
  """Builds simulate(etas, steps_override=None) -> (grouped params, final risk) from θ0 = 0.

  Output phases are done in closed form (O(1) in their length); attention
  phases take exact Laplace-gradient steps. etas (#phases,) may be traced and
  vmapped. The risk is exact (squared loss, Laplace route).
  """
  _check_closed_form_plan(plan)
  partition = partition or partition_lib.of_language(lang)
  sizes = jnp.asarray(partition.sizes)
  metric = jnp.concatenate([sizes, jnp.ones(1)]) if cls else sizes
  route = laplace.build(lang, partition, cls=cls)
  moments = laplace.attention_moments(lang, partition, cls=cls)
  attention_grad = jax.grad(route.risk)

  def split(params):
    beta = params["beta"]
    return jnp.concatenate([beta, params["beta_cls"][None]]) if cls else beta

  def join(params, beta_all):
    groups = sizes.shape[0]
    new = dict(params, beta=beta_all[:groups])
    if cls:
      new["beta_cls"] = beta_all[groups]
    return new

  def simulate(etas):
    groups = sizes.shape[0]
    params = {"alpha": jnp.zeros(groups), "beta": jnp.zeros(groups)}
    if cls:
      params.update(alpha_cls=jnp.zeros(()), beta_cls=jnp.zeros(()))
    for i, phase in enumerate(plan.phases):
      if phase.group == "output":
        hessian, target = moments(params)
        params = join(params, output_gd(hessian, target, metric, split(params), etas[i],
                                        phase.steps))
      else:
        def attention_step(params, _, eta=etas[i]):
          grads = attention_grad(params)
          new = dict(params, alpha=params["alpha"] - eta * grads["alpha"] / sizes)
          if cls:
            new["alpha_cls"] = params["alpha_cls"] - eta * grads["alpha_cls"]
          return new, None
        params, _ = jax.lax.scan(attention_step, params, None, length=phase.steps)
    return params, route.risk(params)

  return simulate


def three_phase(lang: languages.Language, eta1: float, eta2: float, eta3: float,
                steps: int | float, *, cls: bool = False) -> dict:
  """The three-phase plan from zero in closed form; steps may be math.inf.

  Returns a dict with the final per-token params, the exact squared risk and the
  exact 0-1 error (lattice, with its certified bound).
  """
  finite_steps = 1 if math.isinf(steps) else steps
  plan = plans.three_phase(eta1, eta2, eta3, finite_steps)
  partition = partition_lib.of_language(lang)
  simulate = make_simulator(lang, plan, cls=cls, partition=partition)
  etas = jnp.asarray([eta1, eta2, eta3], dtype=jnp.float64)
  if math.isinf(steps):
    params, _ = simulate(etas.at[2].set(0.0))
    hessian, target = laplace.attention_moments(lang, partition, cls=cls)(params)
    metric = jnp.concatenate([jnp.asarray(partition.sizes), jnp.ones(1)]) if cls else \
        jnp.asarray(partition.sizes)
    beta_all = output_gd(hessian, target, metric, jnp.zeros(metric.shape[0]), eta3, jnp.inf)
    params = dict(params, beta=beta_all[:partition.num_groups])
    if cls:
      params["beta_cls"] = beta_all[-1]
  else:
    params, _ = jax.jit(simulate)(etas)
  report = lattice.build(lang, partition).report(params) if lattice.num_count_vectors(
      partition.num_groups, lattice.lengths_lib.truncation_length(lang.length, 1e-12)) <= \
      lattice.MAX_VECTORS else {}
  token_params = dict(params, alpha=partition.expand(params["alpha"]),
                      beta=partition.expand(params["beta"]))
  return {"params": token_params, "risk": float(laplace.build(lang, partition, cls=cls).risk(
      params)), "error": float(report["error"]) if report else float(np.nan)}
