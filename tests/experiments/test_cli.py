"""A user's mistakes on the command line end in one line and exit status 2 (experiments/cli.py)."""

import os
import re
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


def test_ctrl_c_line_says_how_far_the_run_got():
  """The progress reporter records (done, total, unit); the Ctrl-C line repeats it."""
  from experiments import common
  cli._progress.clear()
  assert cli.interrupted_message().startswith("interrupted. Finished work is kept")
  common.progress_reporter("chunks", quiet=True)(3, 8)
  assert cli.interrupted_message() == ("interrupted after 3 of 8 chunks. Finished work is kept "
                                       "in the workdir; rerun the same command to resume.")
  cli._progress.clear()
