"""The experiment skeleton and the helpers every binary shares: output files, metadata, progress.

A new binary is its config (experiments/configs/<name>.py: get_config(), or get_config(variant)
with the names in VARIANTS for `path:variant`) plus its body:

  _CONFIG = config_flags.DEFINE_config_file("config")
  _WORKDIR = flags.DEFINE_string("workdir", "runs/<name>", "Output folder.")

  def main(argv):
    del argv
    experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=validate)
    progress = experiment.progress("<unit>")   # progress(done, total), for library callbacks
    ...                                          # the body: compute, write_table, save_figure
    experiment.write_metadata(**fields)

  if __name__ == "__main__":
    cli.run(main)

start() does the set-up (XLA flags, float64, compilation cache, validation, workdir);
cli.run turns a user's mistake into one line.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

import jax
import tqdm
from absl import app
from absl import logging as absl_logging

import lagjax as lj
from experiments import cli
from lagjax import xla_flags


@dataclasses.dataclass
class Experiment:
  """What start() set up for a binary's body: its config, workdir, the validated values
  (whatever the binary's validate returned) and when it started."""

  config: object
  workdir: str | None
  validated: object
  started_utc: str
  started: float

  def progress(self, unit: str, *, quiet: bool = False) -> StartAware:
    """The one progress reporter (progress_reporter), aware of work found done on disk."""
    return StartAware(progress_reporter(unit, quiet=quiet))

  def write_metadata(self, **fields) -> dict:
    """workdir/metadata.json (write_metadata) with the binary's own fields."""
    return write_metadata(self.workdir, self.config, self.started_utc, **fields)


def start(config, workdir: str | None = None, *, validate=None, xla_optimization=None,
          host_devices: int | None = None) -> Experiment:
  """The opening every binary's main shares; a new binary is its config plus its body.

  In order: the XLA flags (lagjax.xla_flags: `xla_optimization`, the backend level, and
  `host_devices`, both before JAX creates its backend), float64 on (lagjax's builders require
  it; the library changes no JAX config at import), the persistent compilation cache
  (lagjax.xla_flags.enable_compilation_cache), JAX's INFO line about missing TPU/GPU backends
  silenced, then `validate(config)` (a ValueError becomes the one-line usage error of
  experiments/cli.py) and the writable workdir, both before any computation.
  """
  xla_flags.backend_optimization(xla_optimization)
  if host_devices:
    xla_flags.host_devices(host_devices)
  jax.config.update("jax_enable_x64", True)
  xla_flags.enable_compilation_cache()
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
  try:
    validated = validate(config) if validate else None
  except ValueError as error:
    raise app.UsageError(str(error)) from error
  if workdir is not None:
    writable_workdir(workdir)
  return Experiment(config, workdir, validated, utc_now(), time.time())


def pyplot():
  """matplotlib.pyplot on the Agg backend (files, no display), imported when a binary first
  draws: the import takes about a second that a command refused for a bad argument, or a
  process that writes no figure, need not pay."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  return plt


def save_figure(fig, path: str, *, legend=None, dpi: int = 130) -> str:
  """Draws `legend`'s legend (small type), lays the figure out tight, writes it to `path` and
  closes it (binaries draw many figures; open ones hold memory). Returns the path."""
  if legend is not None:
    legend.legend(fontsize=7)
  fig.tight_layout()
  fig.savefig(path, dpi=dpi)
  pyplot().close(fig)
  return path


def writable_workdir(path: str) -> str:
  """Creates the --workdir folder if needed and checks that a file can be written there.

  Binaries call this before any computation, so a bad path costs nothing.

  Raises:
    app.UsageError: one line naming the path, when it is a file, lies under a
      file, or cannot be created or written.
  """
  try:
    os.makedirs(path, exist_ok=True)
    with tempfile.TemporaryFile(dir=path):
      pass
  except OSError as error:
    reason = "it is a file" if os.path.isfile(path) else (error.strerror or str(error)).lower()
    raise app.UsageError(f"--workdir {path} is not a writable folder: {reason}.") from None
  return path


def write_csv(rows: list[dict], path: str) -> str:
  """Writes rows (dicts with the same keys) as a CSV file with a header; returns the path."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  return path


def write_table(rows: list[dict], workdir: str, stem: str, title: str) -> tuple[str, str]:
  """Writes rows as `stem`.csv and a Markdown page `stem`.md (a `# title`, the command that
  wrote it, the table); returns both paths."""
  csv_path = write_csv(rows, os.path.join(workdir, f"{stem}.csv"))
  md_path = os.path.join(workdir, f"{stem}.md")
  command = "python -m " + " ".join([f"experiments.{os.path.basename(sys.argv[0])[:-3]}"]
                                    + sys.argv[1:])
  with open(md_path, "w") as f:
    f.write(f"# {title}\n\nWritten by `{command}`.\n\n" + markdown_table(rows))
  return csv_path, md_path


def markdown_table(rows: list[dict]) -> str:
  columns = list(rows[0])

  def cell(value):
    return f"{value:.4g}" if isinstance(value, float) else str(value)

  lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
  lines += ["| " + " | ".join(cell(row[c]) for c in columns) + " |" for row in rows]
  return "\n".join(lines) + "\n"


def config_length(config):
  """The length law that config.length names ('fixed:20', ...; lj.lengths.from_spec), or None
  for the language's own default; a ValueError naming config.length otherwise."""
  if not config.get("length"):
    return None
  try:
    return lj.lengths.from_spec(config.length)
  except ValueError as error:
    raise ValueError(f"config.length: {error}") from None


def utc_now() -> str:
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _git(*args: str) -> str | None:
  try:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                          cwd=os.path.dirname(__file__)).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None


def git_dirty() -> bool | None:
  """Whether the checkout has uncommitted changes to tracked files (None: not a git checkout)."""
  status = _git("status", "--porcelain", "--untracked-files=no")
  return None if status is None else bool(status)


def json_of(config) -> str:
  """The config as the JSON that metadata.json and the sweep's workdir check record."""
  return config.to_json_best_effort(sort_keys=True, indent=2)


def write_metadata(workdir: str, config, started_utc: str, **fields) -> dict:
  """Writes workdir/metadata.json: the config and its hash, when and how the run was started
  (UTC time, command line), the code (git commit, whether the checkout was dirty, package
  versions, Python), and the binary's own `fields`. Returns the dict."""
  config_json = json_of(config)
  metadata = {
      "config": json.loads(config_json),
      "config_sha256": hashlib.sha256(config_json.encode()).hexdigest(),
      "started_utc": started_utc, "finished_utc": utc_now(),
      "command_line": shlex.join(sys.argv),
      "git_commit": _git("rev-parse", "HEAD") or "unknown", "git_dirty": git_dirty(),
      "versions": {p: importlib.metadata.version(p) for p in
                   ("lagjax", "jax", "jaxlib", "optax", "numpy", "ml-collections")},
      "python": platform.python_version(), **fields}
  with open(os.path.join(workdir, "metadata.json"), "w") as f:
    json.dump(metadata, f, indent=2, default=str)
  return metadata


class StartAware:
  """Wraps a progress(done, total) callback and keeps the first `done` it sees: the work a
  resumed run found finished on disk (done_at_start)."""

  def __init__(self, progress):
    self.progress, self.done_at_start = progress, None

  def __call__(self, done: int, total: int) -> None:
    if self.done_at_start is None:
      self.done_at_start = done
    self.progress(done, total)


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
      cli.note_progress(done, total, unit)
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
    cli.note_progress(done, total, unit)
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
