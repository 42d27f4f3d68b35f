"""Timing and memory of the exact risk routes (docs/theory.md section 3).

Times value+grad of the Laplace route (3a) and the lattice route (3b) on
occurrence languages after compilation, against a naive numpy Monte Carlo
estimate of the same squared risk to standard error 1e-3, measured in the same
run. Prints the machine and a Markdown table of medians, targets and speedups.

Usage (from the repo root):
  python -m benchmarks.risk_bench [--quick] [--json PATH]
  python benchmarks/risk_bench.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from benchmarks.harness import median_time, status  # noqa: E402

TARGET_SE = 1e-3
BATCH = 4096
MIB = 2.0**20


def random_params(rng: np.random.Generator, shape) -> dict:
  """α, β ~ N(0, 1) of the given shape, as float64 jax arrays."""
  return {name: jnp.asarray(rng.normal(size=shape)) for name in ("alpha", "beta")}


def jitted_value_and_grad(route: lj.risk.Route):
  """jit(value_and_grad(route.risk))."""
  return jax.jit(jax.value_and_grad(route.risk))


def monte_carlo_risk(lang: lj.Language, alpha, beta, n_samples: int, rng: np.random.Generator,
                     chunk: int = 1 << 15) -> tuple[float, float]:
  """Naive numpy estimate of R = E ½(f - y)² and its standard error.

  Draws geometric lengths and uniform tokens (the languages here have uniform π)
  chunk by chunk, and computes f = Σ e^{α} β / Σ e^{α} per string with bincount.
  """
  weights = np.exp(alpha - alpha.max())
  values = weights * beta
  total = total_sq = 0.0
  for start in range(0, n_samples, chunk):
    rows = min(chunk, n_samples - start)
    lengths = rng.geometric(lang.length.p, rows)
    tokens = rng.integers(lang.d, size=lengths.sum())
    string = np.repeat(np.arange(rows), lengths)
    f = np.bincount(string, values[tokens], rows) / np.bincount(string, weights[tokens], rows)
    has_letter = np.bincount(string, tokens == lang.letters[0], rows) > 0
    loss = 0.5 * (f - np.where(has_letter, 1.0, -1.0)) ** 2
    total += loss.sum()
    total_sq += (loss**2).sum()
  mean = total / n_samples
  return mean, math.sqrt(max(total_sq / n_samples - mean**2, 0.0) / (n_samples - 1))


def proc_status(field: str) -> int:
  """A memory field of /proc/self/status (VmRSS: now, VmHWM: peak), in bytes (Linux).

  Not ru_maxrss: Linux carries it over from the parent across fork + exec, so a
  subprocess of this benchmark would report the parent's footprint.
  """
  with open("/proc/self/status") as status_file:
    line = next(line for line in status_file if line.startswith(field + ":"))
  return int(line.split()[1]) * 1024


def reset_peak() -> bool:
  """Resets VmHWM to the current RSS (Linux >= 4.0); False where not allowed."""
  try:
    with open("/proc/self/clear_refs", "w") as clear_refs:
      clear_refs.write("5")
    return True
  except OSError:
    return False


def memory_child(repeats: int) -> None:
  """Runs Laplace value+grad at d = 1000 (full params) and prints its memory as JSON.

  Reports the peak RSS over the RSS after import (build, compile and runs), the
  peak of the runs alone over the RSS before them, and XLA's compiled buffer sizes.
  """
  after_import = proc_status("VmRSS")
  route = lj.risk_fn(lj.occurrence(1000))
  params = random_params(np.random.default_rng(3), (1000,))
  compiled = jax.jit(jax.value_and_grad(route.risk)).lower(params).compile()
  peak_with_compile = proc_status("VmHWM")
  before_runs, reset = proc_status("VmRSS"), reset_peak()
  for _ in range(repeats):
    jax.block_until_ready(compiled(params))
  peak = max(peak_with_compile, proc_status("VmHWM"))
  stats = compiled.memory_analysis()
  xla = (stats.argument_size_in_bytes + stats.output_size_in_bytes + stats.temp_size_in_bytes
         - stats.alias_size_in_bytes)
  print(json.dumps({"peak_over_import": peak - after_import,
                    "runs_over_start": proc_status("VmHWM") - before_runs if reset else None,
                    "xla_bytes": xla, "xla_temp_bytes": stats.temp_size_in_bytes}))


def measure_memory(repeats: int) -> dict:
  """Memory of the d = 1000 case, measured in a fresh subprocess (see memory_child)."""
  command = [sys.executable, str(Path(__file__).resolve()), "--memory-child",
             f"--repeats={repeats}"]
  result = subprocess.run(command, capture_output=True, text=True, check=True)
  return json.loads(result.stdout.strip().splitlines()[-1])


def run(quick: bool) -> dict:
  """Runs every case; returns rows of the table and diagnostics."""
  info = harness.machine()
  repeats = 5 if quick else 30
  rng = np.random.default_rng(0)
  lang = lj.occurrence(50)
  part = lj.partition.of_language(lang)
  tied = random_params(rng, (part.num_groups,))
  laplace = lj.risk_fn(lang, partition=part)
  lattice = lj.risk_fn(lang, route="lattice", partition=part, tol=1e-12)
  laplace_grad, lattice_grad = jitted_value_and_grad(laplace), jitted_value_and_grad(lattice)
  times = {
      "laplace_tied": median_time(laplace_grad, tied, repeats=repeats),
      "laplace_vmap": median_time(jax.jit(jax.vmap(jax.value_and_grad(laplace.risk))),
                                  random_params(rng, (BATCH, part.num_groups)),
                                  repeats=repeats) / BATCH,
      # The same 4096 configurations as vmapped batches of 32 walked by lax.map (how
      # lagjax.sweep evaluates): one vmap over 4096 is memory-bound.
      "laplace_batched": median_time(
          jax.jit(lambda p: jax.lax.map(jax.value_and_grad(laplace.risk), p, batch_size=32)),
          random_params(rng, (BATCH, part.num_groups)), repeats=repeats) / BATCH,
      "lattice_tied": median_time(lattice_grad, tied, repeats=repeats),
  }
  covered = {}
  for d in (50, 1000):
    route, params = lj.risk_fn(lj.occurrence(d)), random_params(rng, (d,))
    times[f"laplace_full_{d}"] = median_time(jitted_value_and_grad(route), params, repeats=repeats)
    covered[str(d)] = bool(route.report(params)["grid_covered"])

  # Baseline: size the Monte Carlo run for SE 1e-3 from a pilot, then time whole estimates.
  alpha, beta = (np.asarray(part.expand(tied[k])) for k in ("alpha", "beta"))
  _, pilot_se = monte_carlo_risk(lang, alpha, beta, 20_000, np.random.default_rng(1))
  n_samples = max(1000, math.ceil(20_000 * (pilot_se / TARGET_SE) ** 2))
  seeds = iter(range(100, 200))
  estimate = {}

  def baseline():
    estimate["risk"], estimate["se"] = monte_carlo_risk(lang, alpha, beta, n_samples,
                                                        np.random.default_rng(next(seeds)))

  times["baseline"] = median_time(baseline, repeats=5)
  exact = float(laplace.risk(tied))
  memory = measure_memory(repeats=3)
  base = times["baseline"]
  rows = [
      ("laplace value+grad, d=50 tied (2 groups)", times["laplace_tied"], 150e-6, base),
      (f"laplace value+grad, d=50 tied, vmap {BATCH} (per config)", times["laplace_vmap"], 20e-6,
       base),
      (f"laplace value+grad, d=50 tied, {BATCH} as lax.map of vmap batches of 32 (per config)",
       times["laplace_batched"], 20e-6, base),
      ("laplace value+grad, d=50 full", times["laplace_full_50"], 1e-3, base),
      ("laplace value+grad, d=1000 full", times["laplace_full_1000"], 20e-3, None),
      ("lattice value+grad, d=50 tied, tol 1e-12", times["lattice_tied"], 5e-3, base),
      (f"baseline: numpy Monte Carlo, d=50 tied, SE {TARGET_SE:g} ({n_samples:,} strings)", base,
       None, None),
  ]
  return {
      "machine": info, "quick": quick, "repeats": repeats,
      "rows": harness.timing_rows(rows),
      "memory": dict(memory, target_bytes=2**30, passed=memory["peak_over_import"] <= 2**30),
      "checks": {"laplace_risk": exact, "lattice_risk": float(lattice.risk(tied)),
                 "monte_carlo_risk": estimate["risk"], "monte_carlo_se": estimate["se"],
                 "monte_carlo_z": (estimate["risk"] - exact) / estimate["se"],
                 "grid_covered_full": covered},
  }


def table(results: dict) -> str:
  """The Markdown table of timings and memory, with the machine and sanity checks."""
  lines = harness.timing_table(results["rows"])
  memory = results["memory"]
  runs = memory["runs_over_start"]
  lines.append(f"| peak memory, laplace value+grad d=1000 full: peak RSS − RSS after import "
               f"(runs alone: {'n/a' if runs is None else f'{runs / MIB:.1f} MiB'}; XLA buffers: "
               f"{memory['xla_bytes'] / MIB:.1f} MiB) | {memory['peak_over_import'] / MIB:.1f} MiB"
               f" | ≤ 1024 MiB | {status(memory['passed'])} | — |")
  checks = results["checks"]
  return "\n".join([
      harness.machine_line(results["machine"]),
      f"repeats per case: {results['repeats']} (baseline: 5); all float64, after compilation",
      "", *lines, "",
      f"checks: laplace R = {checks['laplace_risk']:.10f}, lattice R = "
      f"{checks['lattice_risk']:.10f}, Monte Carlo R = {checks['monte_carlo_risk']:.5f} ± "
      f"{checks['monte_carlo_se']:.1e} (z = {checks['monte_carlo_z']:+.2f}); "
      f"full grids covered: {checks['grid_covered_full']}",
      "speedups are against the Monte Carlo baseline at d=50 tied θ; none is given for d=1000.",
  ])


def main(argv=None) -> None:
  harness.setup_jax()
  parser = harness.parser(__doc__, "5 repeats per case instead of 30")
  parser.add_argument("--memory-child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--repeats", type=int, default=3, help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.memory_child:
    memory_child(args.repeats)
  else:
    harness.report(args, run, table)


if __name__ == "__main__":
  main()
