"""Cost of recording the sharpness λ_max along a run (docs/theory.md §5d; issue 36).

Times, after compilation, exact population GD (joint plan, η = 1, T = 10^4 steps) on
occurrence(50) recorded at 64 records, with and without λ_max of the Hessian at every
record (lj.train's sharpness=1: train.make_runner, jitted, as lj.train compiles it):
  1. on the 2 tied token groups (4 parameters: the dense Hessian, Jacobi);
  2. on all 50 tokens (100 parameters: Lanczos, 64 Hessian-vector products a record).
Both variants of a case run interleaved in one process, so the ratio compares like with
like on a shared machine. Target: the ratio ≤ 1.5.

Usage (from the repo root):
  python -m benchmarks.sharpness_bench [--quick] [--json PATH] [--no-record]
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax.dynamics import train  # noqa: E402

D = 50
STEPS = 10_000
NUM_RECORDS = 64
ETA = 1.0
TARGET_RATIO = 1.5


def runners(partition, sharpness: int):
  """The jitted lj.train runner of the joint plan on `partition`, and its arguments."""
  lang, plan = lj.occurrence(D), lj.plans.joint(ETA, STEPS)
  record_steps = np.unique(np.round(np.linspace(0, STEPS, NUM_RECORDS)).astype(np.int64))
  run = jax.jit(train.make_runner(lang, plan.slots(), partition, num_steps=STEPS,
                                  record_steps=record_steps, sharpness=sharpness))
  theta0 = lj.models.direct.zero_params(partition.num_groups)
  return run, (theta0, jax.random.key(0), plan.data())


def case(name: str, partition, repeats: int) -> dict:
  (plain, args), (recorded, _) = runners(partition, 0), runners(partition, 1)
  times = harness.interleaved_times([(plain, args), (recorded, args)], repeats)
  without, with_sharpness = np.median(times, axis=0)
  run = recorded(*args)
  return {"case": name, "records": int(run.steps.shape[0]),
          "parameters": 2 * partition.num_groups, "seconds_without": float(without),
          "seconds_with": float(with_sharpness), "ratio": float(with_sharpness / without),
          "passed": bool(with_sharpness / without <= TARGET_RATIO),
          "max_sharpness": float(run.summary["max_sharpness"])}


def run(quick: bool) -> dict:
  info = harness.machine()
  repeats = 3 if quick else 7
  lang = lj.occurrence(D)
  cases = [case("tied: 2 token groups, dense Hessian", lj.partition.of_language(lang), repeats),
           case("untied: 50 tokens, Lanczos", lj.partition.singletons(D), repeats)]
  return {"machine": info, "quick": quick, "repeats": repeats, "cases": cases}


def table(results: dict) -> str:
  fmt = harness.format_seconds
  rows = [(c["case"], str(c["parameters"]), str(c["records"]), fmt(c["seconds_without"]),
           fmt(c["seconds_with"]), f"{c['ratio']:.3f}×", f"≤ {TARGET_RATIO}×",
           harness.status(c["passed"]), f"{c['max_sharpness']:.6g}")
          for c in results["cases"]]
  return "\n".join([
      harness.machine_line(results["machine"]),
      f"occurrence({D}), joint GD at η = {ETA}, T = {STEPS} steps; median of "
      f"{results['repeats']} interleaved calls after compilation; float64; shared machine",
      "", *harness.markdown_table(("case", "parameters", "records", "without λ_max",
                                   "with λ_max", "ratio", "target", "status",
                                   "max λ_max"), rows)])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "3 repeats", argv)


if __name__ == "__main__":
  main()
