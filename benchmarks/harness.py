"""Shared pieces of the benchmark scripts: timing, machine line, status, formatting, CLI,
and the results file.

Each script defines run(quick) -> dict (JSON-ready results) and table(results) -> str
(the Markdown report), and calls main(run, table, __doc__, quick_help). Every run rewrites
its own section of benchmarks/RESULTS.md with its report (which starts with the machine
line), the command, the date and the commit, unless given --no-record.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
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


RESULTS_PATH = Path(__file__).resolve().with_name("RESULTS.md")


def section_markers(name: str) -> tuple[str, str]:
  """The HTML comments that open and close benchmark `name`'s section of RESULTS.md."""
  return f"<!-- {name}: begin -->", f"<!-- {name}: end -->"


def git_commit() -> str:
  """The checkout's short commit, with ' (dirty)' when tracked files differ from it."""
  root = Path(__file__).resolve().parents[1]
  try:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                            capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                             check=True, capture_output=True, text=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return f"{commit} (dirty)" if changed else commit


def benchmark_name(run) -> str:
  """The benchmark module that defines `run` ('risk_bench'), also when run with python -m."""
  module = sys.modules[run.__module__]
  spec = getattr(module, "__spec__", None)
  name = spec.name if spec is not None else Path(getattr(module, "__file__", "bench")).stem
  return name.rpartition(".")[2]


def write_section(name: str, command: str, report_text: str, path: Path | None = None,
                  when: str | None = None, commit: str | None = None) -> None:
  """Replaces benchmark `name`'s section of `path` with this run's report (appends it if the
  file has none), leaving every other section as it is.

  The section says which command wrote it, when (UTC) and at which commit; the report
  carries the machine line. The file is replaced atomically.
  """
  path = RESULTS_PATH if path is None else Path(path)
  when = when or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
  commit = commit or git_commit()
  begin, end = section_markers(name)
  section = "\n".join([begin, f"## {name}", "",
                       f"Written by `{command}` on {when} at commit {commit}.", "",
                       report_text.strip(), "", end])
  text = path.read_text("utf-8") if path.exists() else "# Benchmark results\n"
  if begin in text and end in text[text.index(begin):]:
    start = text.index(begin)
    stop = text.index(end, start) + len(end)
    text = text[:start] + section + text[stop:]
  else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
  temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
  temporary.write_text(text, "utf-8")
  os.replace(temporary, path)


def parser(doc: str, quick_help: str) -> argparse.ArgumentParser:
  """The shared CLI (--quick, --json PATH, --no-record), described by the first line of doc."""
  result = argparse.ArgumentParser(description=doc.splitlines()[0])
  result.add_argument("--quick", action="store_true", help=quick_help)
  result.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
  result.add_argument("--no-record", dest="record", action="store_false",
                      help=f"do not rewrite this benchmark's section of {RESULTS_PATH.name}")
  return result


def report(args: argparse.Namespace, run, table) -> dict:
  """Runs run(args.quick), prints table(results), writes --json if given and, unless
  --no-record, this benchmark's section of RESULTS.md; returns results."""
  results = run(args.quick)
  text = table(results)
  print(text)
  if args.json:
    Path(args.json).write_text(json.dumps(results, indent=2))
  if getattr(args, "record", True):
    name = benchmark_name(run)
    write_section(name, f"python -m benchmarks.{name}{' --quick' if args.quick else ''}", text)
  return results


def main(run, table, doc: str, quick_help: str, argv=None) -> dict:
  """Float64 on, parses argv with parser(doc, quick_help), then report()."""
  setup_jax()
  return report(parser(doc, quick_help).parse_args(argv), run, table)
