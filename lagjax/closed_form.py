"""Closed-form output phases and O(1)-in-T plans (docs/theory.md section 5).

At fixed α the squared risk is R(β) = ½ βᵀHβ - gᵀβ + ½ with H = E[W Wᵀ],
g = E[y W] (laplace.attention_moments). Gradient descent with the per-token
gradient on tied groups of sizes k (metric D = diag(k)) is
    β_{t+1} = β_t - η D^{-1} (H β_t - g).
In z = Qᵀ D^{1/2} β, with D^{-1/2} H D^{-1/2} = Q Λ Qᵀ and b = Qᵀ D^{-1/2} g,
each coordinate evolves alone:
    z_T = (1 - ηλ)^T z_0 + η b S_T(λ),   S_T(λ) = Σ_{s<T} (1 - ηλ)^s,
with S_T = (1 - (1-ηλ)^T)/(ηλ) (computed with log1p/expm1, accurate for tiny
ηλ) and S_T = T at ηλ = 0; T = ∞ gives the minimizer on the range of H when
every |1 - ηλ| < 1. There, directions with λ <= NULL_RTOL·λ_max count as the null
space of H: in exact arithmetic g has no component there, so the computed one is
roundoff, and b/λ would turn it into garbage (NaN at a CLS score spread of 50).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import languages, plans
from lagjax import partition as partition_lib
from lagjax.risk import laplace, lattice

NULL_RTOL = 1e-12


def output_gd(hessian, target, sizes, beta0, eta, steps):
  """β after `steps` GD steps of size η on ½βᵀHβ - gᵀβ in the metric diag(sizes).

  Args:
    hessian: H (G, G); target: g (G,); sizes: group sizes k (G,) (1 for CLS).
    beta0: initial β (G,); eta: step size; steps: number of steps (may be jnp.inf).

  Returns:
    β_T (G,). Non-finite or huge when some |1 - ηλ| > 1 (the run diverges).
  """
  return output_gd_path(hessian, target, sizes, beta0, eta, jnp.asarray(steps)[None])[0]


def output_gd_path(hessian, target, sizes, beta0, eta, steps):
  """β_t for every t in `steps` (R,), from one eigendecomposition; returns (R, G)."""
  root = jnp.sqrt(sizes)
  eigenvalues, basis = jnp.linalg.eigh(hessian / root[:, None] / root[None, :])
  z0 = basis.T @ (root * beta0)
  b = basis.T @ (target / root)
  rate = eta * jnp.maximum(eigenvalues, 0.0)                       # ηλ per direction, (G,)
  t = jnp.asarray(steps, dtype=jnp.float64)[:, None]               # (R, 1)
  # (1 - ηλ)^t = sign · exp(t log|1 - ηλ|), with log1p for small ηλ so that slow
  # directions keep full precision; t = ∞ gives 0 (contracting) or ∞ (not).
  contracting = rate < 1.0
  log_abs = jnp.where(contracting, jnp.log1p(-jnp.where(contracting, rate, 0.0)),
                      jnp.log(jnp.abs(1.0 - jnp.where(contracting, 2.0, rate))))
  finite_t = jnp.where(jnp.isinf(t), 0.0, t)
  sign = jnp.where(~contracting & (jnp.mod(finite_t, 2) == 1), -1.0, 1.0)
  exponent = jnp.where(rate == 0, 0.0, t * log_abs)                 # no ∞·0
  power = jnp.where(t == 0, 1.0, sign * jnp.exp(exponent))
  # (1 - ηλ)^∞ oscillates without decay when ηλ = 2: call it divergent.
  power = jnp.where(jnp.isinf(t) & (rate == 2.0), jnp.inf, power)
  # S_t = Σ_{s<t} (1 - ηλ)^s = (1 - power)/(ηλ), via expm1 when contracting, t when ηλ = 0.
  geometric_sum = jnp.where(
      rate == 0, t,
      jnp.where(contracting, -jnp.expm1(exponent), 1.0 - power) / jnp.where(rate == 0, 1.0, rate))
  drive = eta * b
  null = jnp.isinf(t) & (eigenvalues <= NULL_RTOL * eigenvalues[-1])  # (R, G)
  z = jnp.where(null, z0, power * z0 + jnp.where(drive == 0, 0.0, drive * geometric_sum))
  return (z @ basis.T) / root


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
  """Builds simulate(etas) -> (grouped params, final risk) from θ0 = 0.

  The final state of `make_trajectory` with records only at 0 and T: output
  phases in closed form (O(1) in their length), attention phases by exact
  Laplace-gradient steps. etas (#phases,) may be traced and vmapped.
  """
  trajectory = make_trajectory(lang, plan, num_records=1, cls=cls, partition=partition)

  def simulate(etas):
    run = trajectory(etas)
    return run.params, run.risk[-1]

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


class Trajectory(NamedTuple):
  """A plan simulated in closed form, recorded at `steps` (see make_trajectory)."""

  params: dict           # grouped params at the last finite record
  steps: jax.Array       # (R,) recorded global steps
  risk: jax.Array        # (R,) exact squared risk
  alpha: jax.Array       # (R, G[+1]) grouped α (with α_cls last)
  beta: jax.Array        # (R, G[+1]) grouped β (with β_cls last)
  diverged: jax.Array
  diverged_step: jax.Array


def record_steps(total_steps: int, num_records: int) -> np.ndarray:
  """Recorded global steps: round(k T / K) for k = 0…K (uniform, for the lag metrics)
  joined with round(T^(k/K)) (geometric, for risk curves on a log axis); sorted, unique."""
  uniform = np.round(np.linspace(0, total_steps, num_records + 1))
  geometric = np.round(np.geomspace(1, total_steps, num_records))
  return np.unique(np.concatenate([uniform, geometric])).astype(np.int64)


def uniform_records(total_steps: int, num_records: int) -> np.ndarray:
  """Mask of the uniformly spaced records among record_steps(total_steps, num_records)."""
  uniform = np.round(np.linspace(0, total_steps, num_records + 1)).astype(np.int64)
  return np.isin(record_steps(total_steps, num_records), uniform)


def make_trajectory(lang: languages.Language, plan: plans.Plan, *, num_records: int = 64,
                    cls: bool = False, partition: partition_lib.Partition | None = None,
                    max_risk: float = 1e8):
  """Builds trajectory(etas) -> Trajectory from θ0 = 0, exact at every record.

  Output phases are evaluated in closed form at their record steps (the risk is
  the quadratic ½βᵀHβ - gᵀβ + ½ of the phase's fixed α); attention phases take
  exact Laplace steps. While α is still 0, H and g are constants, and the
  attention gradient ∂R/∂α_g = E[(f - y) W_g (β_g - f)] is a quadratic form in β
  with zero constant term, Bβ + ½ C[β, β], whose coefficients are computed once
  by differentiating the Laplace route at θ = 0; so the three-phase plan's
  attention step costs O(G³). A record whose risk is non-finite or above max_risk marks
  the run diverged at that record's step (located to the record spacing); the
  final values are those of the last finite record.
  """
  _check_closed_form_plan(plan)
  partition = partition or partition_lib.of_language(lang)
  groups = partition.num_groups
  metric = jnp.asarray(np.concatenate([partition.sizes, [1.0]]) if cls else partition.sizes)
  route = laplace.build(lang, partition, cls=cls)
  moments = laplace.attention_moments(lang, partition, cls=cls)
  value_and_grad = jax.value_and_grad(route.risk)
  steps = record_steps(plan.total_steps, num_records)
  bounds = plan.boundaries
  # Each record belongs to the phase running at its step (the last one to the end).
  owner = np.minimum(np.searchsorted(bounds[1:], steps, side="right"), len(plan.phases) - 1)

  def stack(params, name):
    value = params[name]
    return jnp.concatenate([value, params[name + "_cls"][None]]) if cls else value

  def unstack(params, name, value):
    new = dict(params, **{name: value[:groups]})
    if cls:
      new[name + "_cls"] = value[groups]
    return new

  zero = {"alpha": jnp.zeros(groups), "beta": jnp.zeros(groups)}
  if cls:
    zero.update(alpha_cls=jnp.zeros(()), beta_cls=jnp.zeros(()))
  zero_hessian, zero_target = (np.asarray(m) for m in jax.jit(moments)(zero))

  def attention_gradient_at_zero(beta_all):
    return stack(jax.grad(route.risk)(unstack(zero, "beta", beta_all)), "alpha")

  origin = jnp.zeros(metric.shape[0])
  linear = np.asarray(jax.jit(jax.jacfwd(attention_gradient_at_zero))(origin))
  quadratic = np.asarray(jax.jit(jax.jacfwd(jax.jacfwd(attention_gradient_at_zero)))(origin))
  scale = metric

  def trajectory(etas):
    params = zero
    alpha_is_zero = True  # static: no attention phase has run yet
    risks, alphas, betas = [], [], []
    for i, phase in enumerate(plan.phases):
      local = jnp.asarray(steps[owner == i] - bounds[i])
      if phase.group == "output":
        hessian, target = (zero_hessian, zero_target) if alpha_is_zero else moments(params)
        path = output_gd_path(hessian, target, metric, stack(params, "beta"), etas[i],
                              jnp.concatenate([local, jnp.asarray([phase.steps])]))
        risks.append(jax.vmap(lambda b, h=hessian, g=target: quadratic_risk(h, g, b))(path[:-1]))
        alphas.append(jnp.broadcast_to(stack(params, "alpha"), (local.shape[0], metric.shape[0])))
        betas.append(path[:-1])
        params = unstack(params, "beta", path[-1])
      else:
        def attention_step(params, _, eta=etas[i]):
          risk, grads = value_and_grad(params)
          new = unstack(params, "alpha", stack(params, "alpha") - eta * stack(grads, "alpha")
                        / scale)
          return new, (risk, stack(params, "alpha"))
        start_beta = stack(params, "beta")
        remaining = phase.steps
        if alpha_is_zero:
          first_risk = quadratic_risk(zero_hessian, zero_target, start_beta)
          gradient = linear @ start_beta + 0.5 * jnp.einsum("gij,i,j->g", quadratic, start_beta,
                                                            start_beta)
          params = unstack(params, "alpha", -etas[i] * gradient / scale)
          remaining -= 1
        params, (risk_path, alpha_path) = jax.lax.scan(attention_step, params, None,
                                                       length=remaining)
        if alpha_is_zero:
          risk_path = jnp.concatenate([first_risk[None], risk_path])
          alpha_path = jnp.concatenate([origin[None], alpha_path])
        alpha_is_zero = False
        risks.append(risk_path[local])
        alphas.append(alpha_path[local])
        betas.append(jnp.broadcast_to(start_beta, (local.shape[0], metric.shape[0])))
    risk = jnp.concatenate(risks)
    alpha, beta = jnp.concatenate(alphas), jnp.concatenate(betas)
    bad = ~jnp.isfinite(risk) | (risk > max_risk) | ~jnp.all(jnp.isfinite(alpha), 1) | \
        ~jnp.all(jnp.isfinite(beta), 1)
    diverged = bad.any()
    first_bad = jnp.argmax(bad)
    last_good = jnp.where(diverged, jnp.maximum(first_bad - 1, 0), risk.shape[0] - 1)
    keep = jnp.arange(risk.shape[0]) <= last_good
    risk = jnp.where(keep, risk, risk[last_good])
    alpha = jnp.where(keep[:, None], alpha, alpha[last_good])
    beta = jnp.where(keep[:, None], beta, beta[last_good])
    final = unstack(unstack(params, "alpha", alpha[-1]), "beta", beta[-1])
    return Trajectory(final, jnp.asarray(steps), risk, alpha, beta, diverged,
                      jnp.where(diverged, jnp.asarray(steps)[first_bad], -1))

  return trajectory
