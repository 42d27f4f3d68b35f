"""A user's mistakes on the command line end in one line and exit status 2 (experiments/cli.py)."""

import os
import re
import signal
import socket
import subprocess
import sys

import pytest

from experiments import cli

CONFIG = "experiments/configs/risk_at_zero.py"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("argv, message", [
    ([], r"^--config is required: the path of a config file"),
    (["--config", "nope.py"], r"^--config nope.py: no such file\.$"),
    ([f"--config={CONFIG}", "--config.lenguage=x"],
     r"^--config.lenguage=x: .* has no field 'lenguage'\. Did you mean language\? Its fields: "
     r"cls, d, language, letters, loss, route\.$"),
    (["--config", CONFIG, "--config.d=abc"], r"^bad --config value \(--config.d=abc\): boom$"),
])
def test_parse_errors_are_explained_in_one_line(argv, message):
  text = cli.explain_parse_error(["binary", *argv], ValueError("boom"))
  assert "\n" not in text and re.match(message, text), text


@pytest.mark.slow
def test_a_binary_fails_in_one_line_with_status_2():
  result = subprocess.run([sys.executable, "-m", "experiments.risk_at_zero", "--config", CONFIG,
                           "--config.foo=1"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
      "risk_at_zero.py: error: --config.foo=1: experiments/configs/risk_at_zero.py has no "
      "field 'foo'. Its fields: cls, d, language, letters, loss, route."], result.stderr


@pytest.mark.slow
def test_sigterm_stops_a_process_of_a_multi_process_run():
  """jax.distributed's preemption service catches SIGTERM; experiments.distributed turns it off,
  so `kill` ends a process that joined with --coordinator, as it ends a one-process run."""
  with socket.socket() as probe:
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
  script = ("import time\nfrom absl import flags\nfrom experiments import distributed\n"
            f"flags.FLAGS(['x', '--coordinator=127.0.0.1:{port}'])\n"
            "assert distributed.initialize()\nprint('joined', flush=True)\ntime.sleep(300)\n")
  process = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True)
  try:
    assert process.stdout.readline().strip() == "joined"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == -signal.SIGTERM
  finally:
    process.kill()


def test_ctrl_c_line_says_how_far_the_run_got():
  """The progress reporter records (done, total, unit); the Ctrl-C line repeats it."""
  from experiments import common
  cli._progress.clear()
  assert cli.interrupted_message().startswith("interrupted. Finished work is kept")
  common.progress_reporter("chunks", quiet=True, heartbeat=0)(3, 8)
  assert cli.interrupted_message() == ("interrupted after 3 of 8 chunks. Finished work is kept "
                                       "in the workdir; rerun the same command to resume.")
  cli._progress.clear()


CONFIG_FILES = sorted(name for name in os.listdir(os.path.join(ROOT, "experiments", "configs"))
                      if name.endswith(".py") and name != "__init__.py")


@pytest.mark.parametrize("name", CONFIG_FILES)
def test_every_config_names_an_unknown_variant_with_those_that_exist(name, monkeypatch):
  """`path:variant` reads the same way in every config file: the unknown variant and the
  file's variants (or that it has none), in one line."""
  monkeypatch.chdir(ROOT)
  path = f"experiments/configs/{name}"
  message = cli.explain_parse_error(["binary", f"--config={path}:no_such"], ValueError("x"))
  module_variants = getattr(cli._load_module(path), "VARIANTS", ())
  allowed = ", ".join(module_variants) or "none (it has no variants)"
  assert message.startswith(f"--config {path}:no_such: unknown config variant 'no_such' of "
                            f"{name}; allowed: {allowed}"), message
  assert "\n" not in message
  for variant in module_variants:   # and every declared variant builds
    assert cli.variant_problem(path, variant) is None
    assert cli._load_config(path, variant) is not None


def test_a_directory_given_as_config_is_called_a_directory(monkeypatch):
  monkeypatch.chdir(ROOT)
  message = cli.explain_parse_error(["binary", "--config=experiments/configs"], ValueError("x"))
  assert message == ("--config experiments/configs is a directory: give a config file in it, "
                     "e.g. experiments/configs/<name>.py.")


def test_a_long_unit_still_reports_every_heartbeat_with_rate_and_eta(caplog):
  """One slow unit (an atlas stage): lines keep coming every `heartbeat` seconds with the
  rate and ETA so far, and stop once the total is reached."""
  import logging
  import time

  from experiments import common
  with caplog.at_level(logging.INFO, logger="absl"):
    progress = common.progress_reporter("stages", quiet=True, heartbeat=0.2)
    progress(0, 3)
    progress(1, 3)
    time.sleep(1.3)                               # the second unit is slow
    working = [r.getMessage() for r in caplog.records if "working" in r.getMessage()]
    assert len(working) >= 3, working
    assert all(m.startswith("1/3 stages (") and "/s, ETA " in m for m in working)
    assert "ETA ? s" not in working[-1]              # one unit done: a rate, so an ETA
    progress(3, 3)
    count = len(caplog.records)
    time.sleep(0.6)
    assert len(caplog.records) == count             # finished: silent
  cli._progress.clear()



def test_progress_lines_give_the_rate_of_new_work_and_its_eta(caplog, monkeypatch):
  """A progress line's rate counts the work done since the first call, per second, and its
  ETA is what is left at that rate: 2 units found done, 6 after 4 s of 10 -> 1/s, ETA 4 s
  (issue 34's mutation campaign: rate = done × elapsed survived; lines only had to hold a
  rate). The clock is the reporter's own perf_counter, set by hand."""
  import logging

  from experiments import common
  now = [0.0]
  monkeypatch.setattr(common.time, "perf_counter", lambda: now[0])
  with caplog.at_level(logging.INFO, logger="absl"):
    progress = common.progress_reporter("units", quiet=True, heartbeat=0)
    progress(2, 10)
    now[0] = 4.0
    progress(6, 10)
  assert caplog.records[-1].getMessage() == "6/10 units (1/s, ETA 4 s)"
  cli._progress.clear()
