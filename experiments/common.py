"""The experiment skeleton and the helpers binaries share: output files, metadata, progress,
freeing compiled programs.

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
import threading
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
  git_dirty: bool | None = None   # taken at start, before the binary writes into its workdir

  def progress(self, unit: str, *, quiet: bool = False) -> StartAware:
    """The one progress reporter (progress_reporter), aware of work found done on disk."""
    return StartAware(progress_reporter(unit, quiet=quiet))

  def write_metadata(self, **fields) -> dict:
    """workdir/metadata.json (write_metadata) with the binary's own fields."""
    return write_metadata(self.workdir, self.config, self.started_utc, started=self.started,
                          git_dirty_at_start=self.git_dirty, **fields)


def start(config, workdir: str | None = None, *, validate=None, xla_optimization=None,
          host_devices: int | None = None, initialize=None) -> Experiment:
  """The opening every binary's main shares; a new binary is its config plus its body.

  In order: the XLA flags (lagjax.xla_flags: `xla_optimization`, the backend level, and
  `host_devices`, both before JAX creates its backend), float64 on (lagjax's builders require
  it; the library changes no JAX config at import), the persistent compilation cache
  (lagjax.xla_flags.enable_compilation_cache), JAX's INFO line about missing TPU/GPU backends
  silenced, `initialize()` if given (experiments.distributed.initialize: jax.distributed must
  start before any JAX computation, and validation may compute), then `validate(config)` (a
  ValueError becomes the one-line usage error of experiments/cli.py) and the writable
  workdir, both before any computation.
  """
  dirty = git_dirty()   # before anything is written (a workdir may hold tracked files)
  xla_flags.backend_optimization(xla_optimization)
  if host_devices:
    xla_flags.host_devices(host_devices)
  jax.config.update("jax_enable_x64", True)
  xla_flags.enable_compilation_cache()
  logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
  if initialize is not None:
    initialize()
  try:
    validated = validate(config) if validate else None
  except ValueError as error:
    raise app.UsageError(str(error)) from error
  if workdir is not None:
    writable_workdir(workdir)
  return Experiment(config, workdir, validated, utc_now(), time.time(), dirty)


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


def _git(*args: str, cwd: str | None = None) -> str | None:
  try:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=True,
                          cwd=cwd or os.path.dirname(__file__)).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return None


def git_dirty(path: str | None = None) -> bool | None:
  """Whether the checkout at `path` (default: this code's) has uncommitted changes to tracked
  files (None: not a git checkout)."""
  status = _git("status", "--porcelain", "--untracked-files=no", cwd=path)
  return None if status is None else bool(status)


def command_as_typed() -> str:
  """The command line as the user typed it ('python -m experiments.sweep --config=...'), from
  the interpreter's own argv (sys.orig_argv), not the script path that sys.argv[0] becomes;
  the interpreter by its name (a launcher such as pyenv's passes its full path)."""
  argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
  return shlex.join([os.path.basename(argv[0]), *argv[1:]])


# Environment variables that change JAX's results or speed (flags, threads, precision, cache).
ENVIRONMENT_PREFIXES = ("JAX_", "XLA_", "TF_CPP_", "OMP_", "MKL_", "OPENBLAS_", "LAGJAX_")


def environment() -> dict:
  """The JAX/XLA (and thread-count) environment variables that are set, XLA_FLAGS included."""
  return {name: value for name, value in sorted(os.environ.items())
          if name.startswith(ENVIRONMENT_PREFIXES)}


def host() -> dict:
  """The host name, CPU model (from /proc/cpuinfo where present) and core count."""
  model = platform.processor() or platform.machine()
  try:
    with open("/proc/cpuinfo") as f:
      model = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), model)
  except OSError:
    pass
  return {"name": platform.node(), "cpu": model, "cores": os.cpu_count()}


def devices() -> list[str]:
  """JAX's devices, e.g. ['TFRT_CPU_0'] (the backend is up by the time metadata is written)."""
  return [str(device) for device in jax.devices()]


def json_of(config) -> str:
  """The config as the JSON that metadata.json and the sweep's workdir check record."""
  return config.to_json_best_effort(sort_keys=True, indent=2)


def write_metadata(workdir: str, config, started_utc: str, *, started: float | None = None,
                   git_dirty_at_start: bool | None = None, **fields) -> dict:
  """Writes workdir/metadata.json: the config and its hash, when and how the run was started
  (UTC time, the command as typed), the code (git commit, whether the checkout was dirty when
  the run started, package versions, Python), where it ran (host, CPU, core count, JAX
  devices, the JAX/XLA environment variables with XLA_FLAGS), the attempts, and the binary's
  own `fields`. Returns the dict.

  `attempts` lists every run of this config into this workdir (a resumed sweep or Table 1
  has several), each with its start, end and wall time: the attempts of an earlier
  metadata.json with the same config hash are kept, never overwritten, and this run's entry
  is replaced when it writes again. `started` is this run's time.time() at start;
  `git_dirty_at_start` the flag start() took (None: taken now, for callers without one).
  """
  config_json = json_of(config)
  config_sha256 = hashlib.sha256(config_json.encode()).hexdigest()
  finished_utc = utc_now()
  attempt = {"started_utc": started_utc, "finished_utc": finished_utc,
             "wall_seconds": None if started is None else round(time.time() - started, 1),
             "host": platform.node(), "pid": os.getpid(), "started_unix": started}
  metadata = {
      "config": json.loads(config_json),
      "config_sha256": config_sha256,
      "started_utc": started_utc, "finished_utc": finished_utc,
      "command_line": command_as_typed(),
      "git_commit": _git("rev-parse", "HEAD") or "unknown",
      "git_dirty": git_dirty() if git_dirty_at_start is None else git_dirty_at_start,
      "versions": {p: importlib.metadata.version(p) for p in
                   ("lagjax", "jax", "jaxlib", "optax", "numpy", "ml-collections")},
      "python": platform.python_version(), "host": host(), "devices": devices(),
      "environment": environment(),
      "attempts": previous_attempts(workdir, config_sha256, attempt) + [attempt], **fields}
  with open(os.path.join(workdir, "metadata.json"), "w") as f:
    json.dump(metadata, f, indent=2, default=str)
  return metadata


def previous_attempts(workdir: str, config_sha256: str, attempt: dict) -> list[dict]:
  """The attempts an earlier metadata.json in `workdir` records for the same config, less
  `attempt` itself (the same start time, host and process: this run writing again). A file from
  before attempts were recorded gives its one run (start, end, and its `seconds` if any)."""
  try:
    with open(os.path.join(workdir, "metadata.json")) as f:
      previous = json.load(f)
  except (OSError, ValueError):
    return []
  if not isinstance(previous, dict) or previous.get("config_sha256") != config_sha256:
    return []
  attempts = previous.get("attempts")
  if attempts is None:
    attempts = [{"started_utc": previous.get("started_utc"),
                 "finished_utc": previous.get("finished_utc"),
                 "wall_seconds": previous.get("seconds")}]
  same = ("started_utc", "started_unix", "host", "pid")
  return [a for a in attempts if [a.get(k) for k in same] != [attempt[k] for k in same]]


class StartAware:
  """Wraps a progress(done, total) callback and keeps the first `done` it sees: the work a
  resumed run found finished on disk (done_at_start)."""

  def __init__(self, progress):
    self.progress, self.done_at_start = progress, None

  def __call__(self, done: int, total: int) -> None:
    if self.done_at_start is None:
      self.done_at_start = done
    self.progress(done, total)


# The share of Linux's memory maps per process (vm.max_map_count) above which
# `release_programs` frees every compiled program.
RELEASE_AT = 0.5
MAX_MAP_COUNT = "/proc/sys/vm/max_map_count"
PROCESS_MAPS = "/proc/self/maps"


def maps_in_use() -> float | None:
  """The share of vm.max_map_count this process holds (Linux), or None where /proc does not
  tell."""
  try:
    with open(MAX_MAP_COUNT) as handle:
      limit = int(handle.read())
    with open(PROCESS_MAPS) as handle:
      return sum(1 for _ in handle) / limit
  except (OSError, ValueError, ZeroDivisionError):
    return None


def release_programs() -> bool:
  """Frees every compiled program (jax.clear_caches) once this process holds more than
  RELEASE_AT of its memory maps, or where it cannot tell; returns whether it did. The atlas
  calls it after each (language, layout).

  Each pair traces its own programs (languages of one size load the same executables from
  the persistent cache: docs/decisions/shared-programs.md), and each XLA CPU executable holds
  about six memory maps: kept for ever they pile up until the process runs out (a census
  process died of it after 20 pairs, "LLVM ERROR: Unable to allocate section memory"). A
  three-state pair adds about 5,000 of the 65,530 maps Linux allows, so freeing at half
  keeps what every pair shares (most of a pair's 437 programs are array operations outside
  jit) for about six pairs instead of tracing and lowering it anew after each
  (docs/decisions/atlas.md).
  """
  used = maps_in_use()
  if used is not None and used <= RELEASE_AT:
    return False
  jax.clear_caches()
  return True


HEARTBEAT_SECONDS = 10.0   # the longest a long binary stays silent


def progress_reporter(unit: str, *, quiet: bool = False, stream=None,
                      heartbeat: float = HEARTBEAT_SECONDS):
  """A progress(done, total) callback: a tqdm bar on a terminal, else absl INFO lines.

  The bar goes to `stream` (default stderr) when it is a TTY and not `quiet`;
  otherwise a line "done/total unit (rate/s, ETA)" is logged at each tenth of the
  total. The rate counts only work done since the first call, so that work found
  finished on disk (a resumed run) does not inflate it. While a unit takes longer than
  `heartbeat` seconds (one compiled stage of the atlas can), a line (or a bar refresh) every
  `heartbeat` seconds says the run is alive, with the rate and ETA so far and the time spent
  on the current unit, so no long binary is silent for more than `heartbeat` seconds.
  """
  stream = stream or sys.stderr
  state = {"start": None, "first": 0, "done": 0, "total": 0, "last": 0.0}

  def rate_and_eta(now: float) -> tuple[float, str]:
    elapsed = now - state["start"]
    rate = (state["done"] - state["first"]) / elapsed if elapsed > 0 else 0.0
    eta = f"{(state['total'] - state['done']) / rate:.0f} s" if rate > 0 else "? s"
    return rate, eta

  def note(done: int, total: int) -> None:
    cli.note_progress(done, total, unit)
    now = time.perf_counter()
    first_call = state["start"] is None
    if first_call:
      state.update(start=now, first=done)
    state.update(done=done, total=total, last=now)
    if first_call and heartbeat:
      threading.Thread(target=beat, daemon=True, name=f"progress {unit}").start()

  def beat() -> None:
    while state["done"] < state["total"]:
      time.sleep(min(heartbeat, 1.0))
      now = time.perf_counter()
      if state["done"] >= state["total"]:
        return
      if now - state["last"] >= heartbeat:
        state["last"] = now
        alive(now)

  if not quiet and stream.isatty():
    bar = None

    def alive(now: float) -> None:
      if bar is not None:
        bar.refresh()   # elapsed time and rate move on the bar

    def render_bar(done: int, total: int) -> None:
      nonlocal bar
      note(done, total)
      if bar is None:
        bar = tqdm.tqdm(total=total, initial=done, unit=f" {unit}", file=stream,
                        dynamic_ncols=True)
      bar.update(done - bar.n)
      if done >= total:
        bar.close()

    return render_bar

  last_tenth = -1

  def alive(now: float) -> None:
    rate, eta = rate_and_eta(now)
    absl_logging.info("%d/%d %s (%.3g/s, ETA %s; working, %.0f s since the start)",
                      state["done"], state["total"], unit, rate, eta, now - state["start"])

  def log_lines(done: int, total: int) -> None:
    nonlocal last_tenth
    note(done, total)
    tenth = 10 * done // max(total, 1)
    if tenth == last_tenth:
      return
    last_tenth = tenth
    rate, eta = rate_and_eta(time.perf_counter())
    absl_logging.info("%d/%d %s (%.3g/s, ETA %s)", done, total, unit, rate, eta)

  return log_lines
