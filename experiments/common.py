"""Shared helpers of the experiment binaries: quiet logs, output files."""

from __future__ import annotations

import csv
import logging
import os


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
