"""Shared helpers of the experiment binaries: quiet logs, output files, progress."""

from __future__ import annotations

import csv
import logging
import os
import sys
import time

import tqdm
from absl import logging as absl_logging


def quiet_jax_logs() -> None:
  """Silences JAX's INFO line about missing TPU/GPU backends."""
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)


def write_csv(rows: list[dict], path: str) -> str:
  """Writes rows (dicts with the same keys) as a CSV file with a header; returns the path."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  return path


def write_table(rows: list[dict], workdir: str, stem: str) -> tuple[str, str]:
  """Writes rows as `stem`.csv and a Markdown table `stem`.md; returns both paths."""
  csv_path = write_csv(rows, os.path.join(workdir, f"{stem}.csv"))
  md_path = os.path.join(workdir, f"{stem}.md")
  with open(md_path, "w") as f:
    f.write(markdown_table(rows))
  return csv_path, md_path


def markdown_table(rows: list[dict]) -> str:
  columns = list(rows[0])

  def cell(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)

  lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
  lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]
  return "\n".join(lines) + "\n"


def progress_reporter(unit: str, *, quiet: bool = False, stream=None):
  """A progress(done, total) callback: a tqdm bar on a terminal, else absl INFO lines.

  The bar goes to `stream` (default stderr) when it is a TTY and not `quiet`;
  otherwise a line "done/total unit (rate/s, ETA)" is logged at each tenth of the
  total. The rate counts only work done since the first call, so that work found
  finished on disk (a resumed run) does not inflate it.
  """
  stream = stream or sys.stderr
  if not quiet and stream.isatty():
    bar = None

    def render_bar(done: int, total: int) -> None:
      nonlocal bar
      if bar is None:
        bar = tqdm.tqdm(total=total, initial=done, unit=f" {unit}", file=stream,
                        dynamic_ncols=True)
      bar.update(done - bar.n)
      if done >= total:
        bar.close()

    return render_bar

  start, first, last_tenth = None, 0, -1

  def log_lines(done: int, total: int) -> None:
    nonlocal start, first, last_tenth
    if start is None:
      start, first = time.perf_counter(), done
    tenth = 10 * done // max(total, 1)
    if tenth == last_tenth:
      return
    last_tenth = tenth
    elapsed = time.perf_counter() - start
    rate = (done - first) / elapsed if elapsed > 0 else 0.0
    eta = f"{(total - done) / rate:.0f} s" if rate > 0 else "?"
    absl_logging.info("%d/%d %s (%.0f/s, ETA %s)", done, total, unit, rate, eta)

  return log_lines
