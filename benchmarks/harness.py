"""Shared pieces of the benchmark scripts: timing, machine line, status, formatting, CLI.

Each script defines run(quick) -> dict (JSON-ready results) and table(results) -> str
(the Markdown report), and calls main(run, table, __doc__, quick_help).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax
import numpy as np


def setup_jax() -> None:
  """The start of every benchmark's main: float64 on, as lagjax's builders require."""
  jax.config.update("jax_enable_x64", True)


def timed(fn, *args) -> float:
  """Wall seconds of one call fn(*args), blocking on its result."""
  start = time.perf_counter()
  jax.block_until_ready(fn(*args))
  return time.perf_counter() - start


def interleaved_times(calls, repeats: int) -> np.ndarray:
  """Wall times (repeats, len(calls)) of (fn, args) calls after one warm-up call each.

  The calls run round-robin, so a change in machine load hits all of them alike.
  """
  for fn, args in calls:
    jax.block_until_ready(fn(*args))
  return np.array([[timed(fn, *args) for fn, args in calls] for _ in range(repeats)])


def median_time(fn, *args, repeats: int) -> float:
  """Median wall time in seconds of fn(*args) over `repeats` calls after a warm-up call."""
  return float(np.median(interleaved_times([(fn, args)], repeats)))


def machine(load_average=None) -> dict:
  """Platform, Python, CPUs, JAX, device, x64, XLA_FLAGS (lagjax adds one at import) and
  the load average (now unless given)."""
  return {"platform": platform.platform(), "python": platform.python_version(),
          "cpu_count": os.cpu_count(), "jax": jax.__version__,
          "device": str(jax.devices()[0]), "x64": bool(jax.config.jax_enable_x64),
          "xla_flags": os.environ.get("XLA_FLAGS", ""),
          "load_average": os.getloadavg() if load_average is None else load_average}


def format_loads(loads) -> str:
  """Load averages as '1.00, 2.00, 3.00'."""
  return ", ".join(f"{load:.2f}" for load in loads)


def machine_line(info: dict) -> str:
  """The 'machine: ...' line of a report, from machine()."""
  return (f"machine: {info['platform']}, python {info['python']}, {info['cpu_count']} CPUs, "
          f"jax {info['jax']}, device {info['device']}, x64 {info['x64']}, "
          f"XLA_FLAGS '{info.get('xla_flags', '')}', load average at start "
          f"{format_loads(info['load_average'])}")


def status(passed) -> str:
  """'pass', 'FAIL', or '—' where there is no target."""
  return "—" if passed is None else "pass" if passed else "FAIL"


def format_seconds(seconds: float) -> str:
  """Seconds in µs, ms or s."""
  size = abs(seconds)
  return f"{seconds * 1e6:.1f} µs" if size < 1e-3 else f"{seconds * 1e3:.2f} ms" if (
      size < 1) else f"{seconds:.2f} s"


def target_cell(target, fmt, at_least: bool = False) -> str:
  """'≤ target' ('≥ target' when at_least) formatted by fmt, or '—' without a target."""
  return "—" if target is None else f"{'≥' if at_least else '≤'} {fmt(target)}"


def markdown_table(columns, rows) -> list[str]:
  """Lines of a Markdown table with the given column names and rows of cells."""
  return [f"| {' | '.join(columns)} |", "|" + "---|" * len(columns),
          *(f"| {' | '.join(row)} |" for row in rows)]


def timing_rows(rows) -> list[dict]:
  """JSON rows of (case, seconds, target seconds, baseline seconds) tuples (None: not given)."""
  return [{"case": case, "seconds": t, "target_seconds": target,
           "passed": None if target is None or t is None else t <= target,
           "speedup_vs_baseline": None if ref is None else ref / t}
          for case, t, target, ref in rows]


def timing_table(rows, fmt=format_seconds) -> list[str]:
  """Markdown lines of timing_rows: median, target, status and baseline / case."""
  return markdown_table(
      ("case", "median", "target", "status", "baseline / case"),
      [(row["case"], fmt(row["seconds"]), target_cell(row["target_seconds"], fmt),
        status(row["passed"]),
        "—" if row["speedup_vs_baseline"] is None else f"{row['speedup_vs_baseline']:.3g}×")
       for row in rows])


def parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
  """The shared CLI (--quick, --json PATH), described by the first line of doc."""
  result = argparse.ArgumentParser(description=doc.splitlines()[0])
  result.add_argument("--quick", action="store_true", help=quick_help)
  result.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
  return result


def report(args: argparse.Namespace, run, table) -> dict:
  """Runs run(args.quick), prints table(results), writes --json if given; returns results."""
  results = run(args.quick)
  print(table(results))
  if args.json:
    Path(args.json).write_text(json.dumps(results, indent=2))
  return results


def main(run, table, doc: str, quick_help: str, argv=None) -> dict:
  """Float64 on, parses argv with parser(doc, quick_help), then report()."""
  setup_jax()
  return report(parser(doc, quick_help).parse_args(argv), run, table)
