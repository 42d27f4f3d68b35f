"""metadata.json (experiments/common.py): the git dirty flag of a known clean and a known
dirty checkout, taken at start; the attempts of a resumed run; the command as typed; the
host, devices and the JAX/XLA environment (issue 34)."""

import functools
import json
import subprocess

import ml_collections
import pytest

from experiments import common


def git(path, *args):
  subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=path,
                 check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path):
  """A git checkout with one committed file, clean."""
  path = tmp_path / "checkout"
  path.mkdir()
  git(path, "init", "-q")
  (path / "tracked.txt").write_text("committed\n")
  git(path, "add", "tracked.txt")
  git(path, "commit", "-q", "-m", "one file")
  return path


def config():
  return ml_collections.ConfigDict({"steps": 3, "language": "parity"})


def test_git_dirty_of_a_clean_and_a_dirty_checkout(checkout, tmp_path):
  assert common.git_dirty(str(checkout)) is False
  (checkout / "tracked.txt").write_text("changed\n")
  assert common.git_dirty(str(checkout)) is True
  (checkout / "untracked.txt").write_text("new\n")   # untracked files do not count
  git(checkout, "checkout", "-q", "--", "tracked.txt")
  assert common.git_dirty(str(checkout)) is False
  (tmp_path / "plain").mkdir()
  assert common.git_dirty(str(tmp_path / "plain")) is None


def test_git_dirty_is_taken_at_start_before_the_binary_writes(checkout, monkeypatch):
  """A binary whose workdir holds tracked files rewrites them before it writes metadata:
  the flag is the checkout's state when the run started (clean here), and a run that
  starts dirty records True."""
  monkeypatch.setattr(common, "git_dirty", functools.partial(common.git_dirty, str(checkout)))
  experiment = common.start(config(), str(checkout))
  (checkout / "tracked.txt").write_text("the binary's new output\n")
  assert experiment.write_metadata()["git_dirty"] is False
  assert json.loads((checkout / "metadata.json").read_text())["git_dirty"] is False
  dirty_start = common.start(config(), str(checkout))
  assert dirty_start.write_metadata()["git_dirty"] is True


def test_attempts_grow_on_a_resume_and_keep_the_first(tmp_path, monkeypatch):
  first = common.Experiment(config(), str(tmp_path), None, "2026-01-01T00:00:00+00:00", 0.0)
  written = first.write_metadata(seconds=1)
  written = first.write_metadata(seconds=2)   # the same run writing again: still one attempt
  assert [a["started_utc"] for a in written["attempts"]] == [first.started_utc]
  first_attempt = written["attempts"][0]
  resumed = common.start(config(), str(tmp_path))
  attempts = resumed.write_metadata()["attempts"]
  assert len(attempts) == 2 and attempts[0] == first_attempt
  assert attempts[1]["started_utc"] == resumed.started_utc
  assert attempts[1]["wall_seconds"] >= 0 and attempts[1]["finished_utc"] >= resumed.started_utc
  third = common.start(config(), str(tmp_path)).write_metadata()["attempts"]
  assert third[:2] == attempts and len(third) == 3
  other = ml_collections.ConfigDict({"steps": 4, "language": "parity"})
  fresh = common.start(other, str(tmp_path)).write_metadata()["attempts"]
  assert len(fresh) == 1   # another config in the folder: not a resume of it


def test_attempts_from_a_file_written_before_attempts_existed(tmp_path):
  old = common.Experiment(config(), str(tmp_path), None, "2026-01-01T00:00:00+00:00", 0.0)
  metadata = old.write_metadata(seconds=12.5)
  del metadata["attempts"]
  (tmp_path / "metadata.json").write_text(json.dumps(metadata))
  attempts = common.start(config(), str(tmp_path)).write_metadata()["attempts"]
  assert attempts[0] == {"started_utc": old.started_utc,
                         "finished_utc": metadata["finished_utc"], "wall_seconds": 12.5}
  assert len(attempts) == 2


def test_command_host_devices_and_environment(tmp_path, monkeypatch):
  monkeypatch.setattr("sys.orig_argv", ["/usr/bin/python", "-m", "experiments.sweep",
                                        "--config=a b.py"], raising=False)
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false")
  monkeypatch.setenv("JAX_TEST_SETTING", "1")
  monkeypatch.setenv("UNRELATED_SETTING", "1")
  metadata = common.start(config(), str(tmp_path)).write_metadata()
  assert metadata["command_line"] == "python -m experiments.sweep '--config=a b.py'"
  assert metadata["environment"]["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=false"
  assert metadata["environment"]["JAX_TEST_SETTING"] == "1"
  assert "UNRELATED_SETTING" not in metadata["environment"]
  assert metadata["host"]["name"] and metadata["host"]["cores"] >= 1 and metadata["host"]["cpu"]
  assert metadata["devices"] and all(isinstance(d, str) for d in metadata["devices"])


def test_host_cpu_is_the_model_name_of_proc_cpuinfo_and_devices_are_jaxs():
  """host()'s CPU is /proc/cpuinfo's "model name" where that file has one, and devices() are
  JAX's devices by name (issue 34's mutation campaign: a wrong cpuinfo path fell back to
  platform.processor() unseen, and any list of strings passed for the devices)."""
  import os

  import jax
  if os.path.exists("/proc/cpuinfo"):
    with open("/proc/cpuinfo") as f:
      models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    if models:
      assert common.host()["cpu"] == models[0]
  assert common.devices() == [str(device) for device in jax.devices()]


def test_start_sets_the_host_device_count_it_is_given(monkeypatch):
  """start(host_devices=N) hands N to lagjax.xla_flags.host_devices (issue 34's mutation
  campaign: N -> None survived). The real call is replaced: the backend is already up."""
  asked = []
  monkeypatch.setattr(common.xla_flags, "host_devices", asked.append)
  common.start(config(), None, host_devices=4)
  common.start(config(), None)
  assert asked == [4]


def test_experiment_progress_draws_a_bar_on_a_terminal_and_keeps_the_first_done(tmp_path,
                                                                               monkeypatch):
  """Experiment.progress is not quiet by default: on a terminal it draws the bar; its
  wrapper keeps the count found done at the start (issue 34's mutation campaign)."""
  import io

  class Terminal(io.StringIO):
    def isatty(self):
      return True

  terminal = Terminal()
  monkeypatch.setattr("sys.stderr", terminal)
  progress = common.start(config(), str(tmp_path)).progress("units")
  progress(1, 2)
  progress(2, 2)
  assert "units" in terminal.getvalue() and progress.done_at_start == 1
