"""Timing of exact tied joint GD and of count-vector sampling (docs/theory.md section 9).

Measures, after compilation:
  1. lagjax.analysis.scaling.make_joint_gd: one run of T exact joint-GD steps from θ0 = 0
     (stop_at_epsilon=False, so exactly T steps), per step, for occurrence and AND
     at d = 8, 64, 1024, recording every step and not recording; target ≤ 10 µs/step;
  2. as the baseline in the same run, lj.train's tied path (lax.scan, records every
     T steps) on the same joint plan, per step;
  3. sampling.sample_counts_poisson against sampling.sample_counts (chained
     binomials) for N = 4096 strings at d = 64 and 512;
  4. why joint GD keeps its own loop: a run to τ_ε (the scaling protocol's unit of work,
     every step recorded) by make_joint_gd, which stops at τ_ε, against the same plan
     through the one training loop (lj.train, record_every=1), which has no stop rule
     and so runs and records to the step cap.
Both wall and process CPU seconds are given: on a shared machine CPU time is the
closer measure of the work.

Usage (from the repo root):
  python -m benchmarks.scaling_bench [--quick] [--json PATH]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax import scaling  # noqa: E402
from lagjax.data import sampling  # noqa: E402

TARGET_STEP = 10e-6


def cpu_and_wall(fn, *args, repeats: int):
  """Median (wall, process CPU) seconds of fn(*args) after one warm-up call."""
  jax.block_until_ready(fn(*args))
  times = []
  for _ in range(repeats):
    wall, cpu = time.perf_counter(), time.process_time()
    jax.block_until_ready(fn(*args))
    times.append((time.perf_counter() - wall, time.process_time() - cpu))
  return tuple(float(x) for x in np.median(np.asarray(times), axis=0))


def run(quick: bool) -> dict:
  steps, repeats = (2000, 2) if quick else (20000, 3)
  info = harness.machine()
  rows = []
  for name, make in (("occurrence", lambda d: lj.occurrence(d)),
                     ("AND", lambda d: lj.all_of(d, (0, 1)))):
    for d in (8, 64, 1024):
      lang = make(d)
      eta = 0.5
      cases = {}
      for record in (True, False):
        fn = jax.jit(scaling.make_joint_gd(lang, epsilon=1e-3, max_steps=steps, record=record,
                                           stop_at_epsilon=False))
        cases[record] = cpu_and_wall(fn, eta, repeats=repeats)
      plan = lj.plans.joint(eta, steps)
      train_wall, train_cpu = cpu_and_wall(
          lambda lang=lang, plan=plan: lj.train(lang, plan, record_every=steps).risk,
          repeats=repeats)
      rows.append({"language": name, "d": d, "steps": steps,
                   "recorded_wall_us": 1e6 * cases[True][0] / steps,
                   "recorded_cpu_us": 1e6 * cases[True][1] / steps,
                   "unrecorded_wall_us": 1e6 * cases[False][0] / steps,
                   "unrecorded_cpu_us": 1e6 * cases[False][1] / steps,
                   "train_wall_us": 1e6 * train_wall / steps,
                   "train_cpu_us": 1e6 * train_cpu / steps})
  samplers = []
  for d in (64, 512):
    lang = lj.occurrence(d)
    n = 4096
    fast = jax.jit(lambda key, lang=lang, n=n: sampling.sample_counts_poisson(key, lang, n))
    slow = jax.jit(lambda key, lang=lang, n=n: sampling.sample_counts(key, lang, n))
    key = jax.random.key(0)
    fast_t, slow_t = cpu_and_wall(fast, key, repeats=repeats), cpu_and_wall(slow, key,
                                                                              repeats=repeats)
    samplers.append({"d": d, "n": n, "poisson_wall_s": fast_t[0], "poisson_cpu_s": fast_t[1],
                     "binomial_wall_s": slow_t[0], "binomial_cpu_s": slow_t[1]})
  to_tau = []
  cap = 2000 if quick else 20000
  for d in (64, 256):
    lang = lj.occurrence(d)
    eta = 2.0
    stopping = jax.jit(scaling.make_joint_gd(lang, epsilon=1e-3, max_steps=cap, record=True))
    tau = int(stopping(eta).tau_eps)
    own = cpu_and_wall(stopping, eta, repeats=repeats)
    plan = lj.plans.joint(eta, cap)
    loop = cpu_and_wall(lambda lang=lang, plan=plan: lj.train(lang, plan, record_every=1).risk,
                        repeats=repeats)
    to_tau.append({"d": d, "cap": cap, "tau_eps": tau, "own_wall_s": own[0], "own_cpu_s": own[1],
                   "loop_wall_s": loop[0], "loop_cpu_s": loop[1]})
  return {"machine": info, "joint_gd": rows, "samplers": samplers, "to_tau": to_tau}


def table(results: dict) -> str:
  lines = [harness.machine_line(results["machine"]), "",
           "Exact tied joint GD, µs per step (wall / process CPU); target ≤ 10 µs:", ""]
  lines += harness.markdown_table(
      ("language", "d", "steps", "recorded", "not recorded", "lj.train tied (baseline)",
       "status (CPU, recorded)"),
      [(r["language"], str(r["d"]), str(r["steps"]),
        f"{r['recorded_wall_us']:.1f} / {r['recorded_cpu_us']:.1f}",
        f"{r['unrecorded_wall_us']:.1f} / {r['unrecorded_cpu_us']:.1f}",
        f"{r['train_wall_us']:.1f} / {r['train_cpu_us']:.1f}",
        harness.status(r["recorded_cpu_us"] <= TARGET_STEP * 1e6)) for r in results["joint_gd"]])
  lines += ["", "Count vectors of N strings (wall / process CPU seconds):", ""]
  lines += harness.markdown_table(
      ("d", "N", "sample_counts_poisson", "sample_counts (chained binomials)", "speed-up (CPU)"),
      [(str(s["d"]), str(s["n"]), f"{s['poisson_wall_s']:.3f} / {s['poisson_cpu_s']:.3f}",
        f"{s['binomial_wall_s']:.3f} / {s['binomial_cpu_s']:.3f}",
        f"{s['binomial_cpu_s'] / s['poisson_cpu_s']:.1f}×") for s in results["samplers"]])
  lines += ["", "A run to τ_ε (occurrence, η = 2, ε = 1e-3), every step recorded (wall / CPU s):",
            ""]
  lines += harness.markdown_table(
      ("d", "cap", "τ_ε", "make_joint_gd (stops at τ_ε)", "lj.train, the one loop (to the cap)",
       "ratio (CPU)"),
      [(str(r["d"]), str(r["cap"]), str(r["tau_eps"]),
        f"{r['own_wall_s']:.3f} / {r['own_cpu_s']:.3f}",
        f"{r['loop_wall_s']:.3f} / {r['loop_cpu_s']:.3f}",
        f"{r['loop_cpu_s'] / r['own_cpu_s']:.1f}×") for r in results["to_tau"]])
  return "\n".join(lines)


if __name__ == "__main__":
  harness.main(run, table, __doc__, "2000 steps, 2 repeats")
