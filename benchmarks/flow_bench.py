"""Gradient flow to t = 10⁶ (lj.flow, docs/theory.md §5) against 1,000 GD steps (lj.train).

In one run, on the same language, layout and route:
- even pairs (last-token query, first/last position tables and the CLS token: 17
  parameters, the transfer route): lj.flow of the joint plan to t = 10⁶ (its default
  solver, Rodas5P; rtol 1e-8, atol 1e-10) against lj.train's 1,000 joint GD steps at
  η = 1 (records every step, lj.train's default). After compilation, the wall-time ratio
  flow / GD (target ≤ 1, floor 2); compilation counted apart, as first-call time minus the
  median call, flow over GD (target ≤ 3); XLA compilations of a second flow with new
  durations (target 0); whether the run re-sized its grid;
- occurrence d = 50 (CLS query, tied on its two token groups, the Laplace route), the same
  ratio;
- grid re-size: occurrence d = 12 untied (12 score windows, so the default grid holds 2 of
  them), θ0 with scores drawn uniformly over 36 nats and values from N(0, 1) (seed 0), joint
  flow to t = 10⁶: the flow spreads the scores past the grid's edge in mid-run and lj.flow
  re-sizes it (num_points=None). XLA compilations of that run, and of the same flow on the
  grid it ends on fixed from the start (no re-size), each from cold caches: the difference
  is what re-sizing adds (target ≤ 2); the grid sizes visited, where the first grid's edge
  was reached, and the largest difference of the two runs' risks (0: the same program).
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
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402
from benchmarks import harness  # noqa: E402
from lagjax.data import regular_builtins  # noqa: E402
from lagjax.dynamics import flow as flow_lib  # noqa: E402
from lagjax.risk import coverage  # noqa: E402

HORIZON = 1e6
GD_STEPS = 1000
# 0, then ten records a decade from 1 to 10⁶ (10³, 10⁴, 10⁵ among them).
RECORD_TIMES = np.concatenate([[0.0], np.geomspace(1.0, HORIZON, 61)])
TARGET_RATIO, FLOOR_RATIO, TARGET_COMPILE_RATIO = 1.0, 2.0, 3.0
# The re-size case: occurrence(RESIZE_D) untied, scores uniform over RESIZE_SPREAD nats.
RESIZE_D, RESIZE_SPREAD, RESIZE_SEED = 12, 36.0, 0
TARGET_EXTRA_COMPILATIONS = 2


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


def resize_case() -> dict:
  """Compilations of a flow to 10⁶ that re-sizes its quadrature grid, against the same flow
  on the grid it ends on from the start; each from cold caches (jax.clear_caches and
  flow's program cache), so each counts every program it needs."""
  lang = lj.occurrence(RESIZE_D)
  rng = np.random.default_rng(RESIZE_SEED)
  theta0 = {"alpha": jnp.asarray(rng.uniform(0.0, RESIZE_SPREAD, RESIZE_D)),
            "beta": jnp.asarray(rng.normal(size=RESIZE_D))}
  plan = lj.plans.flow_plan("joint", (HORIZON,))
  default = coverage.default_size(lang, coverage.windows(RESIZE_D))
  built = []   # the grid size of every flow program built, in order
  make_flow = flow_lib.make_flow

  def counting(*args, **kwargs):
    built.append(kwargs["num_points"])
    return make_flow(*args, **kwargs)

  def flow(**options):
    return lj.flow(lang, plan, theta0, records=RECORD_TIMES, tied=False, **options)

  def cold():
    jax.clear_caches()
    flow_lib._compiled_flow.cache_clear()

  flow_lib.make_flow = counting
  try:
    cold()
    resized, resized_seconds, resized_compilations = first_call(flow)
    visited = list(built)
    final = dict(resized.info).get("grid_points", default)
    # The first grid fixed (its program is cached): where the run reached its edge.
    edge = flow(num_points=default)
    cold()
    fixed, fixed_seconds, fixed_compilations = first_call(lambda: flow(num_points=final))
  finally:
    flow_lib.make_flow = make_flow
    flow_lib._compiled_flow.cache_clear()
  extra = resized_compilations - fixed_compilations
  return {"case": f"occurrence d = {RESIZE_D} untied, scores over {RESIZE_SPREAD:g} nats "
                  f"(seed {RESIZE_SEED})",
          "grid_points_at_start": coverage.needed(lang, theta0),
          "grid_sizes": visited, "edge_status": flow_lib.status(edge),
          "edge_points_needed": float(edge.summary["grid_points_needed"]),
          "resized_compilations": resized_compilations,
          "fixed_compilations": fixed_compilations, "extra_compilations": extra,
          "resized_first_call_seconds": resized_seconds,
          "fixed_first_call_seconds": fixed_seconds,
          "passed": extra <= TARGET_EXTRA_COMPILATIONS,
          "max_risk_difference": float(np.max(np.abs(np.asarray(resized.risk)
                                                     - np.asarray(fixed.risk)))),
          "status": flow_lib.status(resized), "risk_at_1e6": float(resized.risk[-1])}


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
  # Last: it empties JAX's caches.
  resize = resize_case()
  return {"machine": info, "repeats": repeats, "rows": rows, "resize": resize,
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
  resize = results["resize"]
  resizing = harness.markdown_table(
      ("re-size case", "grid sizes visited", "first grid's edge", "compilations (re-sized / "
       "grid fixed from the start)", "extra", "target", "status",
       "first call (re-sized / fixed)", "max abs(ΔR)", "R(10⁶)"),
      [(resize["case"], " → ".join(str(size) for size in resize["grid_sizes"]),
        f"{resize['edge_status'].removeprefix('diverged: ')} "
        f"({resize['edge_points_needed']:.0f} nodes needed)",
        f"{resize['resized_compilations']} / {resize['fixed_compilations']}",
        str(resize["extra_compilations"]), f"≤ {TARGET_EXTRA_COMPILATIONS}",
        harness.status(resize["passed"]),
        f"{harness.format_seconds(resize['resized_first_call_seconds'])} / "
        f"{harness.format_seconds(resize['fixed_first_call_seconds'])}",
        f"{resize['max_risk_difference']:.1e}", f"{resize['risk_at_1e6']:.5g}")])
  return "\n".join([
      harness.machine_line(results["machine"]),
      f"{results['solver']}, rtol 1e-8, atol 1e-10; wall times are medians of "
      f"{results['repeats']} "
      "interleaved calls after compilation; compile time = first call - median call.", "",
      *timing, "", *compile_lines, "", *risks, "",
      "Grid re-size (XLA compilations from cold caches, jax.log_compiles; the re-sized run "
      "starts on the default grid of 2 windows, needing "
      f"{resize['grid_points_at_start']} nodes at t = 0):", "", *resizing])


def main(argv=None) -> None:
  harness.main(run, table, __doc__, "1 repeat instead of 3", argv)


if __name__ == "__main__":
  main()
