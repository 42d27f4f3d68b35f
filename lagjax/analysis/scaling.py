"""Exact joint gradient descent on tied groups, fast, and its outcome classes (docs/theory.md §9).

From θ0 = 0 on an occurrence-family language with uniform π, joint GD keeps the
tie on the groups of `partition.of_language` (docs/theory.md §3b), so a run is a
walk in 2G numbers (G = 2 for occurrence and OR, 3 for AND) whatever d is. Each
step evaluates the Laplace risk of docs/theory.md §3a and its gradient once, and
steps with the per-token gradient (tied gradient / group size).

`make_joint_gd` builds run(η) that stops at τ_ε (the first step with R(θ_t) <= ε,
docs/theory.md §6b), at divergence, or at the step cap, and returns the one run record,
a Trajectory (lagjax/dynamics/trajectory.py), optionally recording R(θ_t), α_t, β_t at
every step so that half-times are exact steps. It is a loop of its own beside
runner.make_loop: docs/decisions/joint-gd-loop.md says why. `outcome`
sorts a run into the classes of the joint-GD regime diagram, `eta_max` finds by
bisection the largest η that reaches ε within the cap, and `edge_of_stability`
gives 2/λ_max of the Hessian at θ0 in the per-token metric, the classical
stability limit, for comparison.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import risk as risk_lib
from lagjax import validation
from lagjax.data import languages
from lagjax.data import partition as partition_lib
from lagjax.dynamics import runner
from lagjax.dynamics.trajectory import Trajectory
from lagjax.models import direct

CHUNK = 512
OUTCOMES = ("reaches", "trapped_reversed", "stalled", "diverged")


def check_language(lang) -> languages.Language:
  """A Language with uniform π, for which tied joint GD from zero is exact (docs/theory.md §9a).

  Under uniform π the tokens of each token group (§3b) are interchangeable, so joint GD
  from θ0 = 0 keeps the tie at every step.

  Args:
    lang: the language to check.

  Returns:
    `lang` itself.

  Raises:
    ValueError: when `lang` is not a Language or its π is not uniform.

  Example:
    >>> lang = lj.occurrence(4)
    >>> lj.scaling.check_language(lang) is lang
    True
    >>> lj.scaling.check_language(lj.occurrence(3, pi=(0.2, 0.4, 0.4)))
    Traceback (most recent call last):
    ...
    ValueError: tied joint GD needs the uniform token law π ...
  """
  languages.check_language(lang, "lj.scaling")
  if np.ptp(lang.pi_array) != 0:
    raise ValueError("tied joint GD needs the uniform token law π (each group's tokens "
                     "interchangeable); got a non-uniform π.")
  return lang


def make_joint_gd(lang: languages.Language, *, epsilon: float, max_steps: int,
                  record: bool = True, stop_at_epsilon: bool = True, chunk: int = CHUNK,
                  max_risk: float = runner.MAX_VALUE):
  """Builds run(η) -> Trajectory: exact joint GD from θ0 = 0 until τ_ε, divergence or the cap.

  A walk in 2G numbers on the tied token groups (docs/theory.md §9a), each step one
  evaluation of the Laplace risk (§3a) and its gradient, with the divergence rule of §5
  and τ_ε of §6b. Parameters are tied on the G token groups of partition.of_language
  (§3b; G = 2 for occurrence and OR, 3 for AND) and stepped with the per-token gradient.

  Args:
    lang: an occurrence-family language with uniform π.
    epsilon: the risk level ε of τ_ε, in (0, R(0)) = (0, ½).
    max_steps: the step cap (the largest; run(η, cap) may stop earlier at a traced cap).
    record: whether to record R(θ_t), α_t, β_t at every step t = 0…max_steps.
    stop_at_epsilon: whether the run stops at τ_ε (False: it runs on to the cap, as
      a fixed-horizon run does; τ_ε is still reported).
    chunk: steps per scan between stop checks (the run may compute up to chunk - 1
      steps past its stop; those do not change the reported stop state).
    max_risk: a risk above this marks the run diverged.

  Returns:
    run(eta, cap=max_steps) -> Trajectory, jittable and vmappable over η; one compiled
    function serves every η and every cap <= max_steps. On the token groups (partition),
    with params the last state evaluated, and:

    - steps, risk, alpha, beta: with `record`, t = 0…max_steps and R(θ_t), α_t, β_t (NaN
      after the stop); without, the stop state alone (steps = (steps_run,));
    - summary: tau_eps, the first step t with R(θ_t) <= ε (-1 if none before the stop);
      steps_run, the last step whose state was evaluated (the run stops at τ_ε,
      divergence or the cap); final_risk, R there; margin, the attention margin
      min_{a∈L} α_a - max_{σ∉L} α_σ there (models.direct.attention_margin; < 0:
      attention reversed).

  Example:
    >>> run = jax.jit(lj.scaling.make_joint_gd(lj.occurrence(4), epsilon=0.1, max_steps=20))
    >>> result = run(1.0)
    >>> result
    Trajectory: 21 records, steps 0…20, not diverged
      risk 0.5 → nan; alpha (21, 2), beta (21, 2) on 2 token groups
      summary: final_risk, margin, steps_run, tau_eps
    >>> int(result.tau_eps), bool(result.diverged), int(result.steps_run)
    (12, False, 12)
    >>> float(result.risk[0]), bool(jnp.isnan(result.risk[13]))  # R(θ0) = ½; none after τ_ε
    (0.5, True)
    >>> run = jax.jit(lj.scaling.make_joint_gd(lj.occurrence(4), epsilon=0.1, max_steps=50,
    ...                                        record=False))
    >>> result = run(1.0, 50)
    >>> int(result.tau_eps), result.params["alpha"].shape   # α: one number per token group
    (12, (2,))
    >>> capped = run(1.0, 5)                      # the same compiled run, capped at 5 steps
    >>> int(capped.tau_eps), int(capped.steps_run)
    (-1, 5)
    >>> lj.scaling.OUTCOMES[int(lj.scaling.outcome(capped))]
    'stalled'
  """
  validation.require_float64("lj.scaling.make_joint_gd")
  check_language(lang)
  epsilon = validation.check_risk_threshold("epsilon (ε)", epsilon)
  max_steps = validation.check_int("max_steps", max_steps, 1)
  chunk = validation.check_int("chunk", chunk, 1)
  partition = partition_lib.of_language(lang)
  value_and_grad = jax.value_and_grad(risk_lib.risk_fn(lang, route="laplace",
                                                       partition=partition).risk)
  sizes = jnp.asarray(partition.sizes)
  groups = partition.num_groups
  letters = lang.margin_letters()
  num_chunks = -(-(max_steps + 1) // chunk)
  length = num_chunks * chunk

  def margin(alpha):
    return direct.attention_margin({"alpha": partition.expand(alpha)}, letters)

  def run(eta, cap=max_steps):
    cap = jnp.minimum(cap, max_steps)

    def step(carry, t):
      params, risk, tau, diverged, diverged_step, last = carry
      value, grads = value_and_grad(params)                       # R(θ_t) and its gradient
      new = {k: params[k] - eta * grads[k] / sizes for k in params}
      live = (t <= cap) & ~diverged & ((tau < 0) | (not stop_at_epsilon))
      finite = runner.step_is_finite(value, max_risk, new)
      bad = live & ~finite
      reached = live & finite & (value <= epsilon) & (tau < 0)
      # θ_{t+1} is taken only below the cap and before the stop.
      advance = live & finite & ~(reached & stop_at_epsilon) & (t < cap)
      out = jax.tree_util.tree_map(lambda a, b: jnp.where(advance, a, b), new, params)
      carry = (out, jnp.where(live & finite, value, risk), jnp.where(reached, t, tau),
               diverged | bad, jnp.where(bad, t, diverged_step),
               jnp.where(live & finite, t, last))
      recorded = (jnp.where(live & finite, value, jnp.nan),
                  jnp.where(live & finite, params["alpha"], jnp.nan),
                  jnp.where(live & finite, params["beta"], jnp.nan))
      return carry, recorded if record else None

    def body(state):
      index, carry, buffers = state
      carry, recorded = jax.lax.scan(step, carry, index * chunk + jnp.arange(chunk))
      if record:
        buffers = tuple(jax.lax.dynamic_update_slice_in_dim(b, r, index * chunk, 0)
                        for b, r in zip(buffers, recorded))
      return index + 1, carry, buffers

    def cond(state):
      index, carry, _ = state
      running = (carry[2] < 0) | (not stop_at_epsilon)
      return (index < num_chunks) & (index * chunk <= cap) & running & ~carry[3]

    zero = {"alpha": jnp.zeros(groups), "beta": jnp.zeros(groups)}
    carry = (zero, jnp.asarray(jnp.nan), jnp.asarray(-1), jnp.asarray(False), jnp.asarray(-1),
             jnp.asarray(-1))
    buffers = (jnp.full(length, jnp.nan), jnp.full((length, groups), jnp.nan),
               jnp.full((length, groups), jnp.nan)) if record else ()
    _, carry, buffers = jax.lax.while_loop(cond, body, (jnp.asarray(0), carry, buffers))
    params, risk, tau, diverged, diverged_step, last = carry
    if record:
      steps = jnp.arange(max_steps + 1)
      risks, alphas, betas = (b[:max_steps + 1] for b in buffers)
    else:
      steps, risks, alphas, betas = (x[None] for x in (last, risk, params["alpha"],
                                                      params["beta"]))
    return Trajectory(params=params, steps=steps, risk=risks, alpha=alphas, beta=betas,
                      diverged=diverged, diverged_step=diverged_step,
                      summary={"tau_eps": tau, "steps_run": last, "final_risk": risk,
                               "margin": margin(params["alpha"])},
                      partition=partition)

  return run


def outcome(run: Trajectory) -> jax.Array:
  """The outcome class of a joint-GD run (docs/theory.md §9a), as an index into OUTCOMES.

  reaches ε (τ_ε ≥ 0); trapped with attention reversed (margin < 0); stalled otherwise
  (at the cap); diverged. Divergence is checked after reaching ε, then before the margin.

  Args:
    run: a make_joint_gd run (or a batch of them, from a vmapped run): its tau_eps,
      diverged and margin.

  Returns:
    An int array of the shape of run.tau_eps: 0 reaches, 1 trapped_reversed, 2 stalled,
    3 diverged.

  Example:
    >>> def stop_state(tau_eps=-1, diverged=False, margin=-0.3):  # as run(η) reports it
    ...   return lj.Trajectory(params={}, steps=jnp.array([100]), risk=jnp.array([0.45]),
    ...                        alpha=jnp.zeros((1, 2)), beta=jnp.zeros((1, 2)),
    ...                        diverged=diverged, diverged_step=-1,
    ...                        summary={"tau_eps": tau_eps, "margin": margin})
    >>> runs = [stop_state(), stop_state(tau_eps=7), stop_state(margin=0.2),
    ...         stop_state(diverged=True)]
    >>> [lj.scaling.OUTCOMES[int(lj.scaling.outcome(run))] for run in runs]
    ['trapped_reversed', 'reaches', 'stalled', 'diverged']
  """
  return jnp.where(run.tau_eps >= 0, 0, jnp.where(run.diverged, 3, jnp.where(
      run.margin < 0, 1, 2)))


def edge_of_stability(lang: languages.Language) -> float:
  """2/λ_max of the Hessian of R at θ0 = 0 on the tied subspace, in the per-token metric.

  The classical stability limit of GD at θ0 (docs/theory.md §9b). With D = diag(k, k)
  (group sizes k), the tied per-token GD step is θ -= η D^{-1}∇R, so its linearisation at
  θ0 has the eigenvalues of D^{-1/2} ∇²R D^{-1/2}. For occurrence, OR and AND it equals
  2d. The Hessian is taken eagerly (seconds).

  Args:
    lang: an occurrence-family language with uniform π.

  Returns:
    2/λ_max, a float.

  Example:
    >>> round(lj.scaling.edge_of_stability(lj.occurrence(3)), 6)   # 2d
    6.0
  """
  validation.require_float64("lj.scaling.edge_of_stability")
  check_language(lang)
  partition = partition_lib.of_language(lang)
  risk = risk_lib.risk_fn(lang, route="laplace", partition=partition).risk
  groups = partition.num_groups

  def flat_risk(theta):
    return risk({"alpha": theta[:groups], "beta": theta[groups:]})

  # Jitted: one compilation, not one per eager op of the Hessian (18.7 s -> 3.2 s CPU at d = 3).
  hessian = np.asarray(jax.jit(jax.hessian(flat_risk))(jnp.zeros(2 * groups)))
  root = np.sqrt(np.concatenate([partition.sizes, partition.sizes]))
  return float(2.0 / np.linalg.eigvalsh(hessian / root[:, None] / root[None, :]).max())


def eta_max(run, start: float, *, iterations: int = 12, max_expansions: int = 5) -> dict:
  """Largest η at which run(η) reaches ε (within the cap, without diverging), by bisection.

  Brackets from `start` (halving until a run reaches ε, doubling while it does),
  then bisects in log η. The boundary found is one where "reaches" switches to
  "does not reach"; joint GD is not monotone in η (traps, docs/theory.md §9b), so
  the regime diagram shows the whole η axis.

  Args:
    run: η -> Trajectory, e.g. a jitted make_joint_gd run with its cap fixed.
    start: first η tried (e.g. a fraction of edge_of_stability).
    iterations: bisection steps; the bracket ratio shrinks to 2^(2^-iterations).
    max_expansions: most halvings or doublings of the bracket.

  Returns:
    {"eta_max": lo, "eta_fail": hi, "probes": number of runs}; eta_max is NaN when no
    η reaches ε within max_expansions halvings. When every doubling reaches ε, no failing
    η was found and eta_fail = eta_max = start·2^max_expansions.

  Example:
    >>> run = jax.jit(lj.scaling.make_joint_gd(lj.occurrence(4), epsilon=0.1, max_steps=50,
    ...                                        record=False))
    >>> found = lj.scaling.eta_max(lambda eta: run(eta, 50), 1.0, iterations=3)
    >>> # η = 1, 2, 4, 8 reach ε and 16 does not; 3 bisections of [8, 16] in log η
    >>> round(found["eta_max"], 6), round(found["eta_fail"], 6), found["probes"]
    (11.313708, 12.337687, 8)
  """
  probes = 0

  def reaches(eta):
    nonlocal probes
    probes += 1
    return int(run(eta).tau_eps) >= 0

  lo = hi = float(start)
  if reaches(lo):
    for _ in range(max_expansions):
      hi *= 2.0
      if not reaches(hi):
        break
      lo = hi
  else:
    for _ in range(max_expansions):
      lo /= 2.0
      if reaches(lo):
        break
      hi = lo
    else:
      return {"eta_max": math.nan, "eta_fail": hi, "probes": probes}
  for _ in range(iterations):
    mid = math.sqrt(lo * hi)
    lo, hi = (mid, hi) if reaches(mid) else (lo, mid)
  return {"eta_max": lo, "eta_fail": hi, "probes": probes}
