"""Sweeps: determinism across chunking and devices, divergence isolation, resume, validation."""

import csv
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import lagjax as lj
from experiments import common
from experiments import sweep as sweep_binary
from experiments.configs import sweep as sweep_config
from lagjax import sweep

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
D = 6
STEPS = 40


def make_language(d):
  return lj.occurrence(d)


def small_table():
  """Three-phase on a 4 x 4 (η1, η2) grid plus joint GD (step-by-step engine)."""
  grids = {"eta1": np.geomspace(1.0, 100.0, 4), "eta2": np.geomspace(1.0, 1e3, 4),
           "eta3": np.array([1.0]), "eta": np.array([0.5, 1.0, 60.0])}
  return sweep.build_table(["three_phase", "joint"], [D], [STEPS], grids)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  """One sweep with chunks of 8 configurations (the baseline of the comparisons)."""
  workdir = str(tmp_path_factory.mktemp("reference"))
  calls = []
  results = sweep.run_sweep(small_table(), workdir, make_language, chunk_size=8, batch_size=4,
                            num_records=8, progress=lambda *call: calls.append(call))
  return dict(results, workdir=workdir, progress_calls=calls)


def test_table_has_one_row_per_configuration(reference):
  assert reference["plan"].shape == (4 * 4 + 3,)
  assert set(reference["engine"]) == {"closed_form", "steps"}
  assert np.all(np.isnan(reference["eta"][reference["plan"] == "three_phase"]))


def test_independent_of_chunk_size(reference, tmp_path):
  # Each configuration is computed by the same code whatever its neighbours, so
  # only float64 roundoff of differently vectorized loops may differ (< 1e-12).
  # A diverged run grows like |1 - ηλ|^t and amplifies that roundoff before it is
  # frozen, so for those rows the status and the step of divergence must agree.
  kept = np.array([2, 17])  # one closed-form row, one step-by-step row
  other = sweep.run_sweep(small_table(), str(tmp_path), make_language, chunk_size=32,
                          batch_size=8, num_records=8, path_rows=kept)
  np.testing.assert_array_equal(other["diverged"], reference["diverged"])
  np.testing.assert_array_equal(other["diverged_step"], reference["diverged_step"])
  stable = ~reference["diverged"]
  for name in ("final_risk", "error", "margin", "lag_gap"):
    np.testing.assert_allclose(other[name][stable], reference[name][stable], rtol=0, atol=1e-12)
  # Only the requested risk paths are kept; a resume that asks for more says so.
  np.testing.assert_array_equal(other["path_rows"], kept)
  for row in kept:
    np.testing.assert_allclose(sweep.risk_paths(other, [row])[1],
                               sweep.risk_paths(reference, [row])[1], rtol=0, atol=1e-12)
  with pytest.raises(ValueError, match="lacks the risk paths of 17 requested rows"):
    sweep.run_sweep(small_table(), str(tmp_path), make_language, chunk_size=32, batch_size=8,
                    num_records=8)


def test_matches_single_configuration_runs(reference):
  """A sweep row equals lj.train on that plan alone (exact dynamics to 1e-10)."""
  lang = make_language(D)
  row = int(np.flatnonzero(reference["plan"] == "three_phase")[5])
  plan = lj.plans.three_phase(reference["eta1"][row], reference["eta2"][row],
                              reference["eta3"][row], STEPS)
  run = lj.train(lang, plan, record_every=STEPS)
  assert abs(float(run.risk[-1]) - reference["final_risk"][row]) < 1e-10
  assert abs(float(run.error[-1]) - reference["error"][row]) < 1e-10


def test_divergence_is_isolated(reference):
  """joint GD with η = 60 diverges; its chunk neighbours equal their solo runs."""
  joint = np.flatnonzero(reference["plan"] == "joint")
  etas = reference["eta"][joint]
  assert reference["diverged"][joint[etas == 60.0]].all()
  assert reference["diverged_step"][joint[etas == 60.0]][0] >= 0
  lang = make_language(D)
  for row in joint[etas < 60.0]:
    assert not reference["diverged"][row]
    run = lj.train(lang, lj.plans.joint(reference["eta"][row], STEPS), record_every=STEPS)
    assert abs(float(run.risk[-1]) - reference["final_risk"][row]) < 1e-12
  assert np.all(np.isfinite(reference["final_risk"]))


def run_binary(workdir, *extra, env=None, process_args=(), niceness=0):
  command = [sys.executable, "-m", "experiments.sweep", "--config",
             os.path.join(ROOT, "experiments/configs/sweep.py"), "--workdir", workdir,
             "--config.d_list=(6,)", "--config.steps_list=(40,)", "--config.num_records=8",
             "--quiet", *extra, *process_args]
  if niceness:  # coreutils' nice, not preexec_fn: forking a threaded process may deadlock
    command = ["nice", "-n", str(niceness), *command]
  # The binary gets SIGINT as under an interactive shell. A suite started in the background
  # (`cmd &`, nohup) ignores SIGINT, a child inherits SIG_IGN across exec and Python keeps
  # it, so the resume test's Ctrl-C landed only inside a chunk write (whose own handler
  # catches it) and was lost otherwise. A Python handler here becomes SIG_DFL in the child.
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    return subprocess.Popen(command, cwd=ROOT, env=env or dict(os.environ),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  finally:
    signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def read_csv(path):
  with open(path) as f:
    return list(csv.DictReader(f))


# The runs that check resumption and sharding skip the exact overlay (tested below).
GRID = ("--config.eta1.num=24", "--config.eta2.num=24", "--config.chunk_size=4",
        "--config.batch_size=4", "--config.exact_boundary=False")


@pytest.fixture(scope="module")
def uninterrupted_run(tmp_path_factory):
  """(workdir, results.csv rows) of one uninterrupted single-process run of GRID in a fresh
  workdir. The rows are read at once: test_binary_writes_outputs_and_refuses_other_config
  later overwrites the workdir with another config."""
  workdir = str(tmp_path_factory.mktemp("uninterrupted"))
  assert run_binary(workdir, *GRID).wait(timeout=300) == 0
  return workdir, read_csv(os.path.join(workdir, "results.csv"))


@pytest.fixture(scope="module")
def uninterrupted(uninterrupted_run):
  """results.csv of the uninterrupted run of GRID."""
  return uninterrupted_run[1]


def wait_for_chunks(process, chunks: str, count: int, deadline: float) -> None:
  """Returns once `chunks` holds `count` files, the process has exited, or the deadline."""
  while time.time() < deadline and process.poll() is None:
    if os.path.isdir(chunks) and len(os.listdir(chunks)) >= count:
      return
    time.sleep(0.02)


def kill_then_interrupt(workdir: str, deadline: float):
  """SIGKILL a run of GRID after 5 chunks, then SIGINT its resumed run after 3 more; returns
  (the chunk files left by the kill with their mtimes, the resumed run, its output), or a
  message when a signal came too late (the test's process was not scheduled in time: the
  race is the test's, not the binary's)."""
  # The runs are niced (5): with a warm compilation cache GRID takes about a second, and a
  # watcher waiting for CPU behind them would signal late. (Three late signals in a row in
  # two background runs of the suite were an ignored SIGINT instead; see run_binary.)
  chunks = os.path.join(workdir, "chunks")
  process = run_binary(workdir, *GRID, niceness=5)
  wait_for_chunks(process, chunks, 5, deadline)
  process.send_signal(signal.SIGKILL)
  if process.wait() == 0:
    return "the first run finished before SIGKILL"
  before = {name: os.stat(os.path.join(chunks, name)).st_mtime_ns
            for name in os.listdir(chunks) if name.endswith(".npz")}
  if len(before) > 24 * 24 // 4 - 3:
    return f"SIGKILL landed after {len(before)} of 144 chunks"
  assert before, "the kill must land after the first chunk"
  process = run_binary(workdir, *GRID, niceness=5)
  wait_for_chunks(process, chunks, len(before) + 3, deadline)
  process.send_signal(signal.SIGINT)
  output, _ = process.communicate(timeout=120)
  if process.returncode == 0:
    return "the resumed run finished before SIGINT"
  return before, process, output


@pytest.mark.slow
def test_resume_after_kill_recomputes_nothing(tmp_path, uninterrupted):
  """SIGKILL mid-sweep, then SIGINT mid-resume (one line, status 130), then a rerun: no
  finished chunk is recomputed and results.csv equals the uninterrupted run's. A run that
  finished before its signal landed is retried in a fresh workdir (at most three times)."""
  deadline = time.time() + 600
  late = []
  for attempt in range(3):
    workdir = str(tmp_path / f"killed{attempt}")
    interrupted = kill_then_interrupt(workdir, deadline)
    if not isinstance(interrupted, str):
      break
    late.append(interrupted)
  assert len(late) < 3, late
  before, process, output = interrupted
  chunks = os.path.join(workdir, "chunks")
  # Ctrl-C in the middle of the resumed run: one line saying how far it got, status 130.
  assert process.returncode == 130, output[-2000:]
  errors = [line for line in output.splitlines() if "error" in line]
  assert len(errors) == 1 and re.fullmatch(
      r"sweep\.py: error: interrupted after \d+ of 576 configurations\. Finished work is kept "
      r"in the workdir; rerun the same command to resume\.", errors[0]), errors
  finished = [name for name in os.listdir(chunks) if name.endswith(".npz") and ".tmp-" not in name]
  assert len(finished) > len(before)   # the interrupted run kept what it finished
  assert run_binary(workdir, *GRID).wait(timeout=300) == 0
  with open(os.path.join(workdir, "metadata.json")) as f:
    metadata = json.load(f)
  assert metadata["resumed"] is True and metadata["chunks_at_start"] == len(finished)
  # Each finished chunk holds at least chunk_size = 4 configurations, reloaded, not computed.
  assert 0 < metadata["configurations_computed"] <= 576 - 4 * len(finished)
  for name, mtime in before.items():
    assert os.stat(os.path.join(chunks, name)).st_mtime_ns == mtime, f"{name} was recomputed"
  assert read_csv(os.path.join(workdir, "results.csv")) == uninterrupted


@pytest.mark.slow
def test_two_processes_of_two_devices_match_one(tmp_path, uninterrupted):
  """Two processes on loopback, each sharding its chunks over two devices: the sharded
  chunks and the split of chunks between processes in one run."""
  env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} "
             "--xla_force_host_platform_device_count=2")
  hosts = str(tmp_path / "hosts")
  for code, output in run_two_processes(hosts, GRID, env=env):
    assert code == 0, output[-3000:]
  compare_numeric(read_csv(os.path.join(hosts, "results.csv")), uninterrupted)
  with open(os.path.join(hosts, "metadata.json")) as f:
    metadata = json.load(f)
  assert metadata["process_count"] == 2 and len(metadata["devices"]) == 4, metadata["devices"]


def run_two_processes(workdir, grid, env=None):
  """Runs the sweep as 2 processes on loopback; returns [(returncode, output)] per process.

  No retry: the one start-up "hang" ever seen was a race in prepare_workdir (one process
  crashed, the other waited at the barrier); test_processes_prepare_one_workdir_together
  covers it.
  """
  port = 20000 + os.getpid() * 7 % 20000
  processes = [run_binary(workdir, *grid, env=env, process_args=(
      f"--coordinator=127.0.0.1:{port}", "--num_processes=2", f"--process_id={i}"))
      for i in (1, 0)]
  try:  # the leader (process 0) first: it finishes last
    outputs = [process.communicate(timeout=150)[0] for process in processes[::-1]]
  finally:
    for process in processes:
      process.kill()
  return [(process.returncode, output) for process, output in zip(processes[::-1], outputs)]


def compare_numeric(rows, expected):
  """Same rows; numbers equal to 1e-12 (float64 roundoff of other vector widths)."""
  assert len(rows) == len(expected)
  for row, want in zip(rows, expected):
    assert row.keys() == want.keys()
    for name, value in row.items():
      if name in ("final_risk", "error", "margin", "lag_gap"):
        assert abs(float(value) - float(want[name])) <= 1e-12, (name, value, want[name])
      else:
        assert value == want[name], (name, value, want[name])


PREPARE_LOOP = """
import sys
from experiments.sweep import prepare_workdir
for i in range(400):
  prepare_workdir(f"{sys.argv[1]}/{i}", '{"same": "config"}', False)
"""


@pytest.mark.slow
def test_processes_prepare_one_workdir_together(tmp_path):
  """Every process of a multi-process run records the config in the shared workdir at once;
  none may fail (a shared temporary name made one process crash and the other wait at the
  barrier: two processes racing over 400 fresh workdirs hit it every run)."""
  processes = [subprocess.Popen([sys.executable, "-c", PREPARE_LOOP, str(tmp_path)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for _ in range(2)]
  for process in processes:
    output = process.communicate(timeout=120)[0]
    assert process.returncode == 0, output[-2000:]
  assert all((tmp_path / str(i) / "config.json").read_text() == '{"same": "config"}'
             for i in range(400))


@pytest.mark.slow
def test_binary_writes_outputs_and_refuses_other_config(uninterrupted_run):
  """The uninterrupted run's workdir holds GRID's config: another config is refused, and with
  --overwrite it is replaced by a 5 x 5 run (with the exact boundary and trajectories) whose
  outputs are all written."""
  workdir, _ = uninterrupted_run
  five = ("--config.eta1.num=5", "--config.eta2.num=5", "--config.save_trajectories=True")
  refused = run_binary(workdir, *five)
  output = refused.communicate(timeout=300)[0]
  assert refused.returncode != 0 and "holds a different config" in output
  assert len(read_csv(os.path.join(workdir, "results.csv"))) == 24 * 24   # left as it was
  process = run_binary(workdir, *five, "--overwrite")
  output = process.communicate(timeout=300)[0]
  assert process.returncode == 0, output
  assert "smallest η2 that succeeds" in output
  for name in ("results.csv", "metadata.json", "phase_diagram.png", "risk_vs_step.png",
               "trajectories.npz"):
    assert os.path.exists(os.path.join(workdir, name)), name
  assert len(read_csv(os.path.join(workdir, "results.csv"))) == 25
  with open(os.path.join(workdir, "metadata.json")) as f:
    metadata = json.load(f)
  expected = {str(d): {"language": lj.occurrence(d).describe(),
                       "length_law": str(lj.occurrence(d).length)}
              for d in metadata["config"]["d_list"]}
  assert metadata["languages"] == expected and expected
  assert "--config.eta1.num=5" in metadata["command_line"]
  assert metadata["started_utc"].endswith("+00:00") and metadata["resumed"] is False
  assert metadata["git_dirty"] in (True, False, None)


@pytest.mark.parametrize("field, value, message", [
    ("d_list", (1,), "d_list"),
    ("plans", ("nope",), "unknown or no plans"),
    ("route", "nope", r"config.route \(exact routes only in sweeps\) must be one of \('auto', "
                      r"'laplace', 'lattice', 'transfer', 'count'\)"),
    ("route", "sampled", r"exact routes only"),
    ("success_risk", 0.0, "success_risk"),
    ("success_risk", 0.7, r"config.success_risk \(ε\) must lie in \(0, 0.5\), below the "
                          r"starting risk"),
    ("steps_list", (), "steps_list"),
    ("chunk_size", 0, "chunk_size"),
    ("language", "even_pairs", r"^config.language / config.d_list / config.length: language "
                               r"'even_pairs' has alphabet size 2; got d = 50.$"),
    ("language", "tomita:x", r"config.language .*arguments after ':' must be integers"),
    ("language", "tomita", r"config.language .*'tomita' does not take these arguments"),
    ("length", "poisson:3", r"^config.length: length law 'poisson:3' must be 'geometric:p', "
                            r"'fixed:n0' or 'shifted_poisson:lam'.$"),
    ("length", "fixed:x", r"^config.length: length law 'fixed:x': 'x' is not a number"),
    ("length", "geometric:1.5", r"config.length"),
    ("language", "nope", r"config.language .*unknown language 'nope'; known languages: "
                         r"\[.*'even_pairs'"),
])
def test_validation_names_the_field(field, value, message):
  config = sweep_config.get_config()
  config[field] = value
  with pytest.raises(ValueError, match=message):
    sweep_binary.validate(config)


def test_any_registered_language_by_name():
  """A regular language by its spec passes validation at its own alphabet size and reaches
  the exact transfer route; occurrence keeps config.letters."""
  config = sweep_config.get_config()
  config.language, config.d_list = "tomita:3", (2,)
  sweep_binary.validate(config)
  lang = sweep_binary.config_language(config, 2)
  assert lang.describe().startswith("tomita[k=3]")
  assert lj.risk.resolve_route(lang, "squared", "auto") == "transfer"
  config.language, config.letters = "occurrence", (3,)
  assert sweep_binary.config_language(config, 5).letters == (3,)
  config.length = "fixed:20"
  assert sweep_binary.config_language(config, 5).length == lj.fixed(20)


@pytest.mark.parametrize("change, message", [
    ({"num": 0}, "eta1.num"),
    ({"start": -1.0}, "eta1"),
    ({"scale": "cubic"}, "eta1.scale"),
    ({"points": (1.0, -2.0)}, "eta1"),
])
def test_grid_validation_names_the_field(change, message):
  config = sweep_config.get_config()
  for key, value in change.items():
    config.eta1[key] = value
  with pytest.raises(ValueError, match=message):
    sweep_binary.validate(config)


def test_progress_goes_to_the_callback_and_a_resumed_sweep_computes_nothing(reference):
  """progress(done, total) after each chunk of 8 (16 three-phase rows, 3 joint rows)."""
  assert reference["progress_calls"] == [(0, 19), (8, 19), (16, 19), (19, 19)]
  calls = []
  again = sweep.run_sweep(small_table(), reference["workdir"], make_language, chunk_size=8,
                          batch_size=4, num_records=8, progress=lambda *call: calls.append(call))
  assert calls == [(19, 19)]  # every chunk was found in the store
  for name in (*sweep.OUTPUTS, "risk_path"):
    np.testing.assert_array_equal(again[name], reference[name])


def test_risk_paths_are_one_array_padded_per_group(reference):
  """Rows of the closed-form and step groups share one (rows, R) array, NaN past each R_g."""
  np.testing.assert_array_equal(reference["path_rows"], np.arange(19))
  for group, steps in enumerate(reference["record_steps"]):
    rows = np.flatnonzero(reference["group"] == group)
    plan = sweep.make_plan(str(reference["plan"][rows[0]]), STEPS)
    assert steps[0] == 0 and steps[-1] == plan.total_steps
    assert np.all(np.isnan(reference["risk_path"][rows, steps.size:]))
    record_steps, risk = sweep.risk_paths(reference, rows)
    np.testing.assert_array_equal(record_steps, steps)
    assert np.all(np.isfinite(risk))
    np.testing.assert_array_equal(risk[:, -1], reference["final_risk"][rows])
  with pytest.raises(ValueError, match="one static group"):
    sweep.risk_paths(reference, [0, 18])


class _Terminal(io.StringIO):
  def isatty(self):
    return True


def test_binary_renders_progress_as_a_bar_or_log_lines(caplog):
  terminal = _Terminal()
  bar = common.progress_reporter("configs", stream=terminal)
  for done in (4, 8, 10):
    bar(done, 10)
  assert "10/10" in terminal.getvalue()
  with caplog.at_level(logging.INFO, logger="absl"):
    lines = common.progress_reporter("configs", quiet=True, stream=terminal)
    for done in (0, 4, 5, 10):
      lines(done, 10)
  messages = [record.getMessage() for record in caplog.records]
  assert [m.split(" (")[0] for m in messages] == ["0/10 configs", "4/10 configs",
                                                  "5/10 configs", "10/10 configs"]
  assert "ETA" in messages[1]


def test_regime_report_per_eta1():
  """Per η1: the smallest η2 whose run succeeds (risk <= ε, not diverged) and the largest
  η2 that did not diverge; "none" where there is none."""
  eta1 = np.repeat([1.0, 2.0, 3.0], 3)
  eta2 = np.tile([10.0, 20.0, 30.0], 3)
  results = {"plan": np.full(9, "three_phase"), "d": np.full(9, 5), "steps": np.full(9, 7),
             "eta1": eta1, "eta2": eta2, "eta3": np.ones(9),
             # η1 = 1: a diverged run below ε does not count; η1 = 2: stable runs above ε
             # still count as stable; η1 = 3: every run diverged.
             "final_risk": np.array([1e-5, 1e-4, 0.3, 1e-4, 0.2, 0.3, 0.3, 0.3, 0.3]),
             "diverged": np.array([True, False, False, False, False, False, True, True, True])}
  lines = sweep_binary.regime_report(results, 1e-3).splitlines()
  assert lines[0] == "three_phase, d = 5, T = 7: success means final risk <= 0.001"
  expected = [("1:", "20,", "30"), ("2:", "10,", "30"), ("3:", "none,", "none")]
  for line, (first, smallest, largest) in zip(lines[1:], expected):
    assert line.split() == ["η1", "=", first, "smallest", "η2", "that", "succeeds", smallest,
                            "largest", "η2", "before", "divergence", largest], line


def test_ctrl_c_during_a_chunk_write_waits_for_the_whole_file(tmp_path, monkeypatch):
  """A SIGINT that lands inside the .npz write is raised as KeyboardInterrupt once the file
  is in place (inside numpy's zip writer it surfaced as a ValueError, and the sweep exited
  with a traceback instead of its one-line message)."""
  from lagjax.sweep import chunk_store

  real_savez = np.savez

  def interrupted_savez(path, **arrays):
    os.kill(os.getpid(), signal.SIGINT)  # delivered now; the handler runs mid-write
    real_savez(path, **arrays)

  monkeypatch.setattr(chunk_store.np, "savez", interrupted_savez)
  path = str(tmp_path / "chunk.npz")
  # Python's own handler, whatever the test worker had (an xdist worker may ignore SIGINT).
  outer = signal.signal(signal.SIGINT, signal.default_int_handler)
  try:
    with pytest.raises(KeyboardInterrupt):
      chunk_store.save_atomically(path, {"x": np.arange(3)})
    restored = signal.getsignal(signal.SIGINT)
  finally:
    signal.signal(signal.SIGINT, outer)
  with np.load(path) as stored:
    np.testing.assert_array_equal(stored["x"], np.arange(3))
  assert restored is signal.default_int_handler


def test_chunk_write_restores_a_non_python_handler_and_leaves_no_temporary_file(
    tmp_path, monkeypatch, savez_that_dies):
  """signal.signal returns None when the SIGINT handler was not installed from Python;
  save_atomically restores SIG_DFL then (restoring None raised TypeError). A failed write
  removes its .tmp-<pid>.npz file (it used to stay in the chunks folder)."""
  from lagjax.sweep import chunk_store

  original, real_signal = signal.getsignal(signal.SIGINT), signal.signal
  calls = []

  def signal_from_c(signum, handler):
    calls.append(handler)
    previous = real_signal(signum, handler)
    return None if len(calls) == 1 else previous  # the first call finds a C-level handler

  try:
    monkeypatch.setattr(chunk_store.signal, "signal", signal_from_c)
    chunk_store.save_atomically(str(tmp_path / "chunk.npz"), {"x": np.arange(3)})
    assert signal.getsignal(signal.SIGINT) is signal.SIG_DFL
  finally:
    real_signal(signal.SIGINT, original)
  monkeypatch.undo()

  monkeypatch.setattr(chunk_store.np, "savez", savez_that_dies(b"PK", "disk full"))
  with pytest.raises(OSError, match="disk full"):
    chunk_store.save_atomically(str(tmp_path / "other.npz"), {"x": np.arange(3)})
  assert sorted(os.listdir(tmp_path)) == ["chunk.npz"]
  assert signal.getsignal(signal.SIGINT) is original


def test_phase_diagram_names_the_exact_boundary_only_where_it_is_drawn(reference, tmp_path,
                                                                        monkeypatch):
  from experiments import plotting
  config = sweep_config.get_config()
  config.exact_boundary = False
  figures = []
  monkeypatch.setattr(common.pyplot(), "close", figures.append)  # keep the figure to read it
  path = plotting.phase_diagram(reference, config, str(tmp_path / "pd.png"))
  assert path and os.path.exists(path)
  caption = figures[0]._suptitle.get_text()
  assert "white contour" in caption and "exact boundary" not in caption, caption
