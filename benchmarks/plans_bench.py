"""Timing of training plans (docs/theory.md section 5).

Times, after compilation, on occurrence(50):
  1. the three-phase plan (η = 50, 2500, 1; T = 10^4) in closed form, for one
     configuration and vmapped over random step sizes (also as lax.map in
     chunks of 64, which keeps the quadrature intermediates in cache);
  2. step-by-step exact population GD (joint plan, η = 1) on the 2 tied groups;
  3. the same on all 50 tokens (singletons, no tying);
  4. the eager entry point lj.closed_form.three_phase_outcome: its first call (setup and
     compilation) and then repeated calls with new random η and T (finite or ∞),
     which reuse the compiled function;
and, as the baseline measured in the same run, what one writes without lagjax:
a numpy loop of minibatch SGD on sampled strings for the same three-phase plan
(same step sizes, fresh batch of 256 strings per step), run until its exact
population risk is within 1e-2 of the closed-form plan's final risk. The exact
step sizes are stable with batches of 256 (≈ 200 steps to the threshold), so
no smaller steps were needed; the risk is checked every 5 steps outside the
timer, and a run gives up after 60 s of timed work.

Usage (from the repo root):
  python -m benchmarks.plans_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks.harness import interleaved_times, median_time  # noqa: E402
from lagjax.dynamics.train import make_runner  # noqa: E402

D = 50
ETAS = (50.0, 2500.0, 1.0)
OUTPUT_STEPS = 10**4
GD_ETA = 1.0  # joint plan; η = 10 already oscillates (period 3) at d = 50
BATCH = 256
RISK_GAP = 1e-2
CAP_SECONDS = 60.0
CHUNK = 64  # configurations per lax.map chunk (intermediates stay in cache)
CHECK_EVERY = 5  # SGD steps between (untimed) exact risk evaluations


def random_etas(rng: np.random.Generator, n: int):
  """η1 ~ U[1, 100], η2 log-uniform on [10, 1e4], η3 ~ U[0.1, 1.5]; shape (n, 3)."""
  return jnp.asarray(np.stack([rng.uniform(1, 100, n), 10 ** rng.uniform(1, 4, n),
                               rng.uniform(0.1, 1.5, n)], axis=1))


def closed_form_cases(lang: lj.Language, n_configs: int, repeats: int) -> dict:
  """Case 1: the closed-form three-phase plan, single and vmapped (per configuration).

  Also times the same sweep as lax.map over chunks of CHUNK configurations, and
  reads XLA's cost analysis of the vmapped sweep (per configuration).
  """
  simulate = lj.closed_form.make_simulator(lang, lj.plans.three_phase(*ETAS, OUTPUT_STEPS))
  single, batched = jax.jit(simulate), jax.jit(jax.vmap(simulate))
  chunked = jax.jit(lambda etas: jax.lax.map(simulate, etas, batch_size=CHUNK))
  etas = jnp.asarray(ETAS)
  sweep = random_etas(np.random.default_rng(0), n_configs)
  batched = batched.lower(sweep).compile()
  cost = batched.cost_analysis()
  return {"single": median_time(single, etas, repeats=repeats),
          "vmap": median_time(batched, sweep, repeats=repeats) / n_configs,
          "chunked": median_time(chunked, sweep, repeats=repeats) / n_configs,
          "cost": {k: cost[k] / n_configs for k in ("flops", "transcendentals", "bytes accessed")},
          "final_risk": float(single(etas)[1]),
          "vmap_finite": int(jnp.isfinite(batched(sweep)[1]).sum())}


def eager_three_phase_case(lang: lj.Language, repeats: int) -> dict:
  """Case 4: lj.closed_form.three_phase_outcome, first call vs repeated calls with new numbers.

  Each repeated call draws η as random_etas does and alternates T = 10^4 and T = ∞;
  it includes the exact 0-1 error and the conversion of the result to floats.
  """
  rng = np.random.default_rng(1)
  first = harness.timed(lj.closed_form.three_phase_outcome, lang, *ETAS, OUTPUT_STEPS)
  times = []
  for k in range(repeats):
    etas = [float(x) for x in random_etas(rng, 1)[0]]
    steps = OUTPUT_STEPS if k % 2 else math.inf
    times.append(harness.timed(lj.closed_form.three_phase_outcome, lang, *etas, steps))
  return {"first": first, "repeat": float(np.median(times))}


def gd_case(lang: lj.Language, partition, steps: int, repeats: int) -> dict:
  """Cases 2-3: exact population GD per step, as the median of (t(2T) - t(T)) / T.

  record_every = T, so each run records twice (θ0 and θ_T); a record also
  evaluates the 0-1 error (lattice when tied, a 20k-string sample when not).
  The difference removes that fixed cost, reported as `overhead`: the time of
  a one-step run (2 records + 1 step).
  """
  theta0 = {"alpha": jnp.zeros(partition.num_groups), "beta": jnp.zeros(partition.num_groups)}
  calls = []
  for total in (1, steps, 2 * steps):
    plan = lj.plans.joint(GD_ETA, total)
    runner = jax.jit(make_runner(lang, plan.slots(), partition, num_steps=total,
                                 record_every=total))
    calls.append((runner, (theta0, jax.random.key(0), plan.data())))
  times = interleaved_times(calls, repeats)
  run = calls[1][0](*calls[1][1])
  return {"steps": steps, "per_step": float(np.median(times[:, 2] - times[:, 1])) / steps,
          "overhead": float(np.median(times[:, 0])), "final_risk": float(run.risk[-1]),
          "diverged": bool(run.diverged)}


def sample_counts(rng: np.random.Generator, lang: lj.Language, batch: int):
  """Counts (batch, d) of fresh strings (geometric lengths, uniform tokens) and labels ±1."""
  lengths = rng.geometric(lang.length.p, batch)
  tokens = rng.integers(lang.d, size=lengths.sum())
  string = np.repeat(np.arange(batch), lengths)
  counts = np.bincount(string * lang.d + tokens, minlength=batch * lang.d).reshape(batch, lang.d)
  return counts, np.where(counts[:, lang.letters[0]] > 0, 1.0, -1.0)


def sgd_gradients(alpha, beta, counts, labels):
  """Minibatch gradients of ½(f - y)², f = Σ c e^α β / Σ c e^α, w.r.t. α and β (by hand).

  With w = c e^α / Σ c e^α: ∂f/∂β = w and ∂f/∂α = w (β - f).
  """
  weights = counts * np.exp(alpha - alpha.max())
  weights /= weights.sum(axis=1, keepdims=True)
  f = weights @ beta
  residual = (f - labels)[:, None] * weights
  return (residual * (beta - f[:, None])).mean(axis=0), residual.mean(axis=0)


def numpy_sgd(lang: lj.Language, threshold: float, seed: int) -> dict:
  """The baseline: three-phase minibatch SGD from θ0 = 0 until R(θ) <= threshold.

  Output 1 step (η1), attention 1 step (η2), then output steps (η3) with the
  exact plan's step sizes; the exact risk (lj.population_risk) is checked every
  CHECK_EVERY steps and not timed. Gives up after CAP_SECONDS of timed work.
  """
  rng = np.random.default_rng(seed)
  alpha, beta = np.zeros(lang.d), np.zeros(lang.d)
  eta1, eta2, eta3 = ETAS
  start = time.perf_counter()
  beta -= eta1 * sgd_gradients(alpha, beta, *sample_counts(rng, lang, BATCH))[1]
  alpha -= eta2 * sgd_gradients(alpha, beta, *sample_counts(rng, lang, BATCH))[0]
  seconds, steps = time.perf_counter() - start, 2
  while seconds < CAP_SECONDS:
    start = time.perf_counter()
    for _ in range(CHECK_EVERY):
      beta -= eta3 * sgd_gradients(alpha, beta, *sample_counts(rng, lang, BATCH))[1]
    seconds, steps = seconds + time.perf_counter() - start, steps + CHECK_EVERY
    risk = float(lj.population_risk(lang, {"alpha": alpha, "beta": beta}))
    if risk <= threshold:
      break
  return {"seconds": seconds, "steps": steps, "risk": risk, "reached": risk <= threshold}


def run(quick: bool) -> dict:
  """Runs every case; returns rows of the table and diagnostics."""
  info = harness.machine()
  repeats = 5 if quick else 15
  n_configs = 1024 if quick else 4096
  lang = lj.occurrence(D)
  closed = closed_form_cases(lang, n_configs, repeats)
  eager = eager_three_phase_case(lang, 4 * repeats)
  tied = gd_case(lang, lj.partition.of_language(lang), 1000, repeats)
  full = gd_case(lang, lj.partition.singletons(D), 200 if quick else 1000, repeats)
  threshold = closed["final_risk"] + RISK_GAP
  baselines = [numpy_sgd(lang, threshold, seed) for seed in range(5)]
  reached = [b for b in baselines if b["reached"]]
  sgd = statistics.median(b["seconds"] for b in reached) if reached else None
  sgd_step = statistics.median(b["seconds"] / b["steps"] for b in baselines)
  plan = f"three-phase η={ETAS}, T=10^4"
  rows = [
      (f"closed form {plan}, d=50 tied, one config", closed["single"], 2e-3, sgd),
      (f"closed form {plan}, vmap {n_configs} random η (per config)", closed["vmap"], 100e-6, sgd),
      (f"same sweep as lax.map, batch_size {CHUNK} (per config)", closed["chunked"], 100e-6, sgd),
      ("lj.closed_form.three_phase_outcome eager call, new random η, T = 10^4 or ∞ "
       "(after the first)",
       eager["repeat"], 10e-3, sgd),
      (f"exact population GD step, joint η={GD_ETA:g}, d=50 tied (2 groups)", tied["per_step"],
       100e-6, sgd_step),
      (f"exact population GD step, joint η={GD_ETA:g}, d=50 full (50 groups)", full["per_step"],
       1.5e-3, sgd_step),
      (f"baseline: numpy SGD (batch {BATCH}) three-phase until R ≤ R_closed + {RISK_GAP:g}, "
       f"median of {len(reached)}/{len(baselines)} seeds", sgd, None, None),
      (f"baseline: numpy SGD step (batch {BATCH})", sgd_step, None, None),
  ]
  return {
      "machine": info, "quick": quick, "repeats": repeats,
      "rows": harness.timing_rows(rows),
      "vmap_cost_per_config": closed["cost"],
      "checks": {"closed_form_final_risk": closed["final_risk"],
                 "vmap_finite_risks": closed["vmap_finite"], "n_configs": n_configs,
                 "three_phase_first_call": eager["first"],
                 "gd_tied": tied, "gd_full": full, "numpy_sgd": baselines},
  }


def format_seconds(seconds) -> str:
  """harness.format_seconds; None (the baseline gave up) as 'not reached in CAP_SECONDS s'."""
  if seconds is None:
    return f"not reached in {CAP_SECONDS:g} s"
  return harness.format_seconds(seconds)


def table(results: dict) -> str:
  """The Markdown table with the machine, the fixed costs and sanity checks."""
  lines = harness.timing_table(results["rows"], format_seconds)
  info, checks = results["machine"], results["checks"]
  tied, full, sgd = checks["gd_tied"], checks["gd_full"], checks["numpy_sgd"]
  cost = results["vmap_cost_per_config"]
  return "\n".join([
      harness.machine_line(info),
      f"repeats per case: {results['repeats']} after compilation (numpy baseline: 5 seeds); "
      "float64",
      "", *lines, "",
      "ratios (> 1: lagjax is faster): closed-form rows against the numpy run to R_closed + 1e-2; "
      "GD-step rows against one numpy SGD step.",
      "GD per step = median (t(2T) − t(T)) / T; fixed cost = a 1-step run (2 records with the "
      f"0-1 error): tied {format_seconds(tied['overhead'])}, "
      f"full {format_seconds(full['overhead'])}.",
      f"XLA cost analysis of the vmapped sweep, per config: {cost['flops']:.3g} flops, "
      f"{cost['transcendentals']:.3g} transcendentals, {cost['bytes accessed'] / 1e3:.0f} kB "
      "accessed.",
      f"lj.closed_form.three_phase_outcome first call (setup, compilation): "
      f"{format_seconds(checks['three_phase_first_call'])}.",
      f"checks: closed-form final R = {checks['closed_form_final_risk']:.3e}; finite vmapped "
      f"risks {checks['vmap_finite_risks']}/{checks['n_configs']}; GD R_T tied "
      f"{tied['final_risk']:.6e} (T={tied['steps']}, diverged {tied['diverged']}), full "
      f"{full['final_risk']:.6e} (T={full['steps']}, diverged {full['diverged']}); "
      f"numpy SGD steps to threshold {[b['steps'] for b in sgd]}, final R "
      f"{[round(b['risk'], 5) for b in sgd]}.",
  ])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "5 repeats, 1024 vmapped configs, T = 200 for full-d GD",
               argv)


if __name__ == "__main__":
  main()
