"""Gradient flow to t = 10⁶ (lj.flow, docs/theory.md §5) against 1,000 GD steps (lj.train).

In one run, on the same language, layout and route:
- even pairs (last-token query, first/last position tables and the CLS token: 17
  parameters, the transfer route): lj.flow of the joint plan to t = 10⁶ (its default
  solver, Rodas5P; rtol 1e-8, atol 1e-10) against lj.train's 1,000 joint GD steps at
  η = 1 (records every step, lj.train's default). After compilation, the wall-time ratio
  flow / GD (target ≤ 1, floor 2); compilation counted apart, as first-call time minus the
  median call, flow over GD (target ≤ 3); XLA compilations of a second flow with new
  durations (target 0); the grid re-sizes of the run (target ≤ 2 extra compilations);
- occurrence d = 50 (CLS query, tied on its two token groups, the Laplace route), the same
  ratio.
The flow's risk at t = 10³, …, 10⁶ is printed beside GD's at step 1,000.

Usage (from the repo root):
  python -m benchmarks.flow_bench [--quick] [--json PATH] [--no-record]
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

if not __package__:  # run as a script: make the repo root importable
  sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax.data import regular_builtins  # noqa: E402

HORIZON = 1e6
GD_STEPS = 1000
# 0, then ten records a decade from 1 to 10⁶ (10³, 10⁴, 10⁵ among them).
RECORD_TIMES = np.concatenate([[0.0], np.geomspace(1.0, HORIZON, 61)])
TARGET_RATIO, FLOOR_RATIO, TARGET_COMPILE_RATIO = 1.0, 2.0, 3.0


class _CompileCounter(logging.Handler):
  """Counts the "Compiling ..." records JAX logs under jax.log_compiles."""

  def __init__(self):
    super().__init__(logging.DEBUG)
    self.count = 0

  def emit(self, record):
    self.count += "Compiling" in record.getMessage()


def count_compilations(call):
  """(result, number of XLA compilations) of call()."""
  counter = _CompileCounter()
  logger = logging.getLogger("jax")
  level = logger.level
  logger.addHandler(counter)
  logger.setLevel(logging.DEBUG)
  try:
    with jax.log_compiles(True):
      result = call()
      jax.block_until_ready(result.risk)
  finally:
    logger.removeHandler(counter)
    logger.setLevel(level)
  return result, counter.count


def first_call(call):
  """(result, wall seconds, compilations) of the first call."""
  start = time.perf_counter()
  result, compilations = count_compilations(call)
  return result, time.perf_counter() - start, compilations


def case(name, lang, theta0, repeats):
  gd_plan = lj.plans.joint(1.0, GD_STEPS)
  flow_plan = lj.plans.flow_plan("joint", (HORIZON,))

  def gd():
    return lj.train(lang, gd_plan, theta0)

  def flow():
    return lj.flow(lang, flow_plan, theta0, records=RECORD_TIMES)

  flow_run, flow_first, flow_compilations = first_call(flow)
  gd_run, gd_first, _ = first_call(gd)
  times = np.median(harness.interleaved_times([(flow, ()), (gd, ())], repeats), axis=0)
  flow_time, gd_time = (float(t) for t in times)
  # A second flow with new durations and t1 (traced): it must compile nothing.
  _, recompilations = count_compilations(
      lambda: lj.flow(lang, lj.plans.flow_plan("joint", (HORIZON / 2,)), theta0,
                      records=RECORD_TIMES * 0.5))
  risk_at = {f"1e{k}": float(flow_run.risk[np.argmin(abs(RECORD_TIMES - 10.0 ** k))])
             for k in (3, 4, 5, 6)}
  return {"case": name, "flow_seconds": flow_time, "gd_seconds": gd_time,
          "ratio": flow_time / gd_time,
          "flow_compile_seconds": flow_first - flow_time,
          "gd_compile_seconds": gd_first - gd_time,
          "compile_ratio": (flow_first - flow_time) / (gd_first - gd_time),
          "first_call_compilations": flow_compilations, "second_call_compilations":
          recompilations, "grid_points": dict(flow_run.info).get("grid_points"),
          "solver_steps": int(flow_run.num_steps), "rejected_steps": int(flow_run.num_rejected),
          "status": lj.dynamics.flow.status(flow_run), "flow_risk": risk_at,
          "gd_risk_at_1000": float(gd_run.risk[-1]), "route": flow_run.route,
          "solver": flow_run.solver}


def run(quick: bool) -> dict:
  info = harness.machine()
  repeats = 1 if quick else 3
  even_pairs = regular_builtins.even_pairs()
  rows = [
      case("even pairs, last query + first/last + CLS (17 parameters)", even_pairs,
           lj.init_params(even_pairs.d, cls=True, query="last", positions="first_last"),
           repeats),
      case("occurrence d = 50 (CLS query, tied)", lj.occurrence(50), None, repeats),
  ]
  for row in rows:
    row["passed"] = row["ratio"] <= TARGET_RATIO
    row["within_floor"] = row["ratio"] <= FLOOR_RATIO
    row["compile_passed"] = row["compile_ratio"] <= TARGET_COMPILE_RATIO
  return {"machine": info, "repeats": repeats, "rows": rows,
          "solver": {"rodas5p": "Rodas5P", "kvaerno5": "Kvaerno5"}.get(rows[0]["solver"],
                                                                   rows[0]["solver"])}


def table(results: dict) -> str:
  rows = results["rows"]
  timing = harness.markdown_table(
      ("case", "flow to 10⁶", "1,000 GD steps", "ratio", "target", "status"),
      [(row["case"], harness.format_seconds(row["flow_seconds"]),
        harness.format_seconds(row["gd_seconds"]), f"{row['ratio']:.2f}",
        f"≤ {TARGET_RATIO:g} (floor {FLOOR_RATIO:g})",
        "pass" if row["passed"] else "within floor" if row["within_floor"] else "FAIL")
       for row in rows])
  compile_lines = harness.markdown_table(
      ("case", "flow compile", "GD compile", "ratio", "target", "status",
       "compilations (1st / 2nd flow)", "grid re-size"),
      [(row["case"], harness.format_seconds(row["flow_compile_seconds"]),
        harness.format_seconds(row["gd_compile_seconds"]), f"{row['compile_ratio']:.2f}",
        f"≤ {TARGET_COMPILE_RATIO:g}", harness.status(row["compile_passed"]),
        f"{row['first_call_compilations']} / {row['second_call_compilations']}",
        "none" if row["grid_points"] is None else f"to {row['grid_points']} points")
       for row in rows])
  risks = harness.markdown_table(
      ("case", "route", "solver steps (rejected)", "status", "R(10³)", "R(10⁴)", "R(10⁵)",
       "R(10⁶)", "GD R at step 1000"),
      [(row["case"], row["route"], f"{row['solver_steps']} ({row['rejected_steps']})",
        row["status"], *(f"{row['flow_risk'][k]:.5g}" for k in ("1e3", "1e4", "1e5", "1e6")),
        f"{row['gd_risk_at_1000']:.5g}") for row in rows])
  return "\n".join([
      harness.machine_line(results["machine"]),
      f"{results['solver']}, rtol 1e-8, atol 1e-10; wall times are medians of "
      f"{results['repeats']} "
      "interleaved calls after compilation; compile time = first call - median call.", "",
      *timing, "", *compile_lines, "", *risks])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "1 repeat instead of 3", argv)


if __name__ == "__main__":
  main()
