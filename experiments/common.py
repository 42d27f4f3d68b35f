"""Shared helpers of the experiment binaries: quiet logs, output files."""

from __future__ import annotations

import csv
import logging
import os

import jax

CACHE_ENV = "LAGJAX_COMPILATION_CACHE"
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "lagjax", "xla")


def enable_compilation_cache() -> str:
  """Turns on JAX's persistent compilation cache, so a rerun compiles nothing.

  The folder is $LAGJAX_COMPILATION_CACHE, or ~/.cache/lagjax/xla; every program is
  cached, however fast it compiled. Returns the folder.
  """
  path = os.environ.get(CACHE_ENV) or DEFAULT_CACHE
  os.makedirs(path, exist_ok=True)
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


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
