"""Smoke tests of the experiment binaries with tiny configs.

Each binary runs as `python -m experiments.X --config experiments/configs/X.py
--config.field=value ...`, the way a user runs it; the four runs start together
and are checked one per test.
"""

import csv
import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TIMEOUT = 240


def command(name, *overrides, workdir=None):
  args = [sys.executable, "-m", f"experiments.{name}", "--config",
          f"experiments/configs/{name}.py", *overrides]
  return args + ([f"--workdir={workdir}"] if workdir else [])


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
  """Runs every binary once (in parallel); returns {name: (returncode, stdout+stderr, workdir)}."""
  root = tmp_path_factory.mktemp("experiments")
  runs = {
      "claims": command("claims", "--config.d_list=(5,)", "--config.steps=20",
                        workdir=root / "claims"),
      "sample_complexity": command("sample_complexity", "--config.d_list=(5,)",
                                   "--config.c_list=(1.0,)", "--config.num_seeds=2",
                                   "--config.steps=10", workdir=root / "sample_complexity"),
      "risk_at_zero": command("risk_at_zero", "--config.d=5"),
      "misspelled": command("risk_at_zero", "--config.dd=5"),
  }
  env = dict(os.environ, JAX_PLATFORMS="cpu")
  processes = {name: subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True)
               for name, args in runs.items()}
  results = {}
  for name, process in processes.items():
    text, _ = process.communicate(timeout=TIMEOUT)
    results[name] = (process.returncode, text, root / name)
  return results


def read_csv(path):
  with open(path, newline="") as f:
    return list(csv.DictReader(f))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["claims", "sample_complexity"])
def test_metadata_says_when_how_and_from_what(outputs, name):
  """metadata.json of a finished run: the config with its hash, UTC start and finish, the
  command line, the git commit and whether the checkout was dirty, the versions (the sweep,
  the atlas, Table 1, the regimes and scaling binaries write it through the same
  common.write_metadata; tests/sweep/test_sweep.py checks the sweep's)."""
  code, text, workdir = outputs[name]
  assert code == 0, text
  with open(workdir / "metadata.json") as f:
    metadata = json.load(f)
  assert metadata["config"] and len(metadata["config_sha256"]) == 64
  assert metadata["started_utc"] <= metadata["finished_utc"]
  assert f" -m experiments.{name} " in metadata["command_line"]   # as typed, not the .py path
  assert metadata["host"]["cores"] >= 1 and metadata["devices"] and "environment" in metadata
  assert [a["started_utc"] for a in metadata["attempts"]] == [metadata["started_utc"]]
  assert "--config.d_list=(5,)" in metadata["command_line"]
  assert metadata["git_dirty"] in (True, False, None) and metadata["git_commit"]
  assert set(metadata["versions"]) >= {"lagjax", "jax", "numpy"}
  if name == "claims":
    assert "Geometric" in metadata["languages"]["5"]["length_law"]


@pytest.mark.slow
def test_claims(outputs):
  code, text, workdir = outputs["claims"]
  assert code == 0, text
  for name in ("claims.csv", "claims.md", "risk_vs_step.png", "lag_curves.png",
               "kqv_vs_direct.png"):
    assert (workdir / name).is_file(), name
  rows = {row["plan"]: row for row in read_csv(workdir / "claims.csv")}
  assert set(rows) == {"three_phase", "attention_first", "output_only", "attention_only", "joint"}
  # The three claims that are identities hold at any T; the floor at d = 5 is 0.2295
  # (docs/theory.md section 4, 4 digits).
  for plan in ("attention_first", "output_only", "attention_only"):
    assert rows[plan]["holds"] == "True", rows[plan]
    assert int(rows[plan]["d"]) == 5
  assert abs(float(rows["output_only"]["floor"]) - 0.2295) < 5e-5
  assert float(rows["attention_only"]["final_risk"]) == pytest.approx(0.5, abs=1e-12)
  assert "risk stays at R(0) = 1/2: True" in text
  assert "joint (KQV form)" in text


@pytest.mark.slow
def test_sample_complexity(outputs):
  code, text, workdir = outputs["sample_complexity"]
  assert code == 0, text
  for name in ("sample_complexity.csv", "sample_complexity.md", "sample_complexity.png"):
    assert (workdir / name).is_file(), name
  # N = round(c d ln d) = round(5 ln 5) = 8.
  assert "d=  5 N=    8 (c=1)" in text
  (row,) = read_csv(workdir / "sample_complexity.csv")
  assert (int(row["d"]), int(row["N"])) == (5, 8)
  assert float(row["success"]) in (0.0, 0.5, 1.0)  # a fraction of 2 seeds


@pytest.mark.slow
def test_risk_at_zero(outputs):
  """R(0) = 1/2, ∂R/∂α = 0, ∂R/∂β = (-1/d, 1/(d(d-1)), …) at d = 5 (docs/theory.md section 4)."""
  code, text, _ = outputs["risk_at_zero"]
  assert code == 0, text
  assert "d = 5" in text
  assert "R(0) = 0.50000000000000" in text
  lines = {line.split(" = ")[0]: line.split(" = ", 1)[1] for line in text.splitlines()
           if line.startswith("dR/d")}
  beta = [float(x) for x in lines["dR/dbeta"].strip("[] ").split()]
  alpha = [float(x) for x in lines["dR/dalpha"].strip("[] ").split()]
  # Printed with 6 digits.
  assert beta == pytest.approx([-0.2, 0.05, 0.05, 0.05, 0.05], abs=1e-6)
  assert alpha == pytest.approx([0.0] * 5, abs=1e-6)


@pytest.mark.slow
def test_locked_config_rejects_misspelled_field(outputs):
  code, text, _ = outputs["misspelled"]
  assert code != 0
  assert "dd" in text


def table1_config(**overrides):
  """The default Table 1 config with dotted-path overrides applied (no compute)."""
  from experiments.configs import table1 as table1_configs
  config = table1_configs.get_config()
  with config.unlocked():
    for path, value in overrides.items():
      *parents, leaf = path.split("__")
      node = config
      for parent in parents:
        node = node[parent]
      node[leaf] = value
  return config


@pytest.mark.parametrize("path, value, message", [
    ("tasks", ("occurrence", "parity"), "config.tasks must be a tuple of task names from"),
    ("plans", ("joint", "two_phase"), "config.plans must be a tuple of plan names from"),
    ("num_seeds", 0, "config.num_seeds must be an integer >= 1"),
    ("task_settings__and__heads", 0, "config.task_settings.and.heads must be an integer >= 1"),
    ("task_settings__even_pairs__query", "middle",
     r"config.task_settings.even_pairs.query must be one of \('cls', 'last'\)"),
    ("task_settings__or__positional", "rotary", "config.task_settings.or.positional must be one"),
    ("task_settings__slr__optimizer", "rmsprop",
     r"config.task_settings.slr.optimizer must be one of \('sgd', 'adam'\)"),
    ("task_settings__occurrence__steps", 3, "config.task_settings.occurrence.steps must be"),
    ("task_settings__icl_bigram__eta_grid", (), "config.task_settings.icl_bigram.eta_grid must"),
    ("task_settings__icl_bigram__eta_grid", (0.1, -1.0), "eta_grid must be a non-empty tuple"),
    ("task_settings__icl_bigram__k", 1, "config.task_settings.icl_bigram.k must be an integer"),
    ("task_settings__and__max_len", 0, "config.task_settings.and.max_len must be None"),
    ("task_settings__or__model", "mlp",
     r"config.task_settings.or.model must be one of \('transformer', 'direct'\)"),
    ("task_settings__even_pairs__model", "direct",
     r"even_pairs.model must be one of \('transformer',\) for the task"),
    ("attention_multipliers", (10.0, 100.0), "config.attention_multipliers must be a tuple of"),
    ("attention_variants", ("kqv", "dense"), "config.attention_variants must be a non-empty"),
    ("phase_fractions__three_phase", (0.5, 0.6), "config.phase_fractions.three_phase must be"),
    ("chunk_size", -1, "config.chunk_size must be an integer >= 0"),
    # Issue 19's bad input: a cap below the grid, an unknown selection metric, an exact row
    # for a task that no exact route covers; each names config.task_settings.<task>.<field>.
    ("task_settings__occurrence__eta_cap", (0.01, 3.0),
     r"config.task_settings.occurrence.eta_cap must be \(low, high\).*\(0.3, 10\)"),
    ("task_settings__and__eta_cap", (0.5, 100.0), "config.task_settings.and.eta_cap must be"),
    ("task_settings__or__select_by", "accuracy",
     r"config.task_settings.or.select_by must be one of \('loss', 'metric'\)"),
    ("task_settings__icl_bigram__exact", True,
     r"config.task_settings.icl_bigram.exact must be True for a task with an exact route"),
])
def test_table1_validation_names_the_field(path, value, message):
  from absl import app

  from experiments import table1_protocol as protocol
  config = table1_config(**{path: value})
  with pytest.raises(app.UsageError, match=message):
    protocol.validate(config)


def test_table1_default_config_is_valid_and_plans_sum_to_t():
  from experiments import table1_protocol as protocol
  config = table1_config()
  protocol.validate(config)
  for candidate in protocol.candidates(config, "occurrence"):
    plan = protocol.make_plan(candidate.plan_name, candidate.etas(), 1002, "adam",
                              config.phase_fractions.get(candidate.plan_name, ()))
    assert plan.total_steps == 1002
  phases = protocol.make_plan("three_phase", {"eta1": 0.5, "eta2": 50.0, "eta3": 0.5}, 1002,
                              "sgd", config.phase_fractions.three_phase).phases
  assert [(p.group, p.steps, p.eta) for p in phases] == [
      ("output", 250, 0.5), ("attention", 250, 50.0), ("output", 502, 0.5)]
  # Two-step-size plans: every (η, m) pair; m = 1 also competes in the one-η row.
  grid, multipliers = config.task_settings.occurrence.eta_grid, config.attention_multipliers
  three = [c for c in protocol.candidates(config, "occurrence") if c.plan_name == "three_phase"]
  assert len(three) == len(grid) * len(multipliers)
  assert {c.eta_out for c in three if "three_phase" in c.rows} == set(grid)
  assert all(c.eta_attn == c.eta_out for c in three if "three_phase" in c.rows)
  assert max(c.eta_attn / c.eta_out for c in three) == 1e4


def test_table1_direct_model_follows_the_theory():
  """model = "direct": the (α, β) model from θ0 = 0, so attention-only SGD never moves
  (β = 0 kills the attention gradient, docs/theory.md section 4) while joint SGD learns."""
  from experiments import table1_protocol as protocol
  config = table1_config(task_settings__occurrence__model="direct",
                         plans=("joint", "attention_only"))
  protocol.quick(config)
  protocol.validate(config)
  built = protocol.build("occurrence", config)
  _, results = protocol.run_task(config, "occurrence", built, jax.random.key(0),
                                 jax.random.key(1))
  frozen, joint = results["attention_only"], results["joint"]
  np.testing.assert_array_equal(np.asarray(frozen.alpha), 0.0)
  np.testing.assert_array_equal(np.asarray(frozen.beta), 0.0)
  assert np.all(np.abs(np.asarray(joint.beta[:, -1])).max(-1) > 0.01)
  assert np.all(np.abs(np.asarray(joint.alpha[:, -1])).max(-1) > 0.0)


@pytest.mark.slow  # compile-heavy: in the full suite, out of the quick loop
@pytest.mark.parametrize("name, model", [("occurrence", "transformer"), ("or", "direct"),
                                         ("slr", "slr")])
def test_table1_one_compilation_equals_per_plan_runs(name, model):
  """Every plan and step size of a task through one compiled runner (plans as data, padded
  to three slots): traced once, and each test run equals the same plan run alone with its
  own unpadded slots (train_task) to 1e-12 (the same arithmetic; only reduction order may
  differ)."""
  import chex

  from experiments import table1_protocol as protocol
  from lagjax.dynamics.task_train import make_batched_runner, make_task_runner

  chex.clear_trace_counter()
  config = table1_config()
  protocol.quick(config)
  config.attention_multipliers = (1.0, 1000.0)
  config.task_settings[name].eta_grid = (0.3, 1.0)
  config.task_settings[name].model = model
  protocol.validate(config)
  built = protocol.build(name, config)

  def counted(task, model, slots, **options):  # task_train.make_grid_runner, traces counted
    run = chex.assert_max_traces(make_task_runner(task, model, slots, **options), n=1)
    return jax.jit(jax.vmap(jax.vmap(run, in_axes=(None, 0)), in_axes=(0, None)))

  keys = jax.random.key(0), jax.random.key(1)
  chosen_rows, results = protocol.run_task(config, name, built, *keys, make_runner=counted)
  assert len(protocol.candidates(config, name)) == 2 * (3 + 2 * 2)  # grid x (η plans + pairs)
  assert set(results) == set(protocol.table_rows(config))
  settings = config.task_settings[name]
  test_keys = jax.random.split(keys[1], config.num_seeds)
  for row in ("joint", "three_phase_per_phase"):
    chosen, together = chosen_rows.chosen[row], results[row]
    plan = protocol.make_plan(chosen.plan_name, chosen.etas(), settings.steps,
                              settings.optimizer,
                              config.phase_fractions.get(chosen.plan_name, ()))
    runner = make_batched_runner(*built, plan.slots(), num_steps=settings.steps,
                                 batch_size=config.batch_size, test_size=config.test_size,
                                 record_every=max(1, settings.steps // config.records))
    data = jax.tree_util.tree_map(lambda x: jax.numpy.stack([x] * config.num_seeds),
                                  plan.data())
    alone = runner(test_keys, data)
    for field in ("risk", "alpha", "beta"):
      # Relative as well as absolute: a diverging seed reaches losses ~1e22, where one ulp
      # is ~1e6 and reordered sums differ by a few ulps.
      chex.assert_trees_all_close(np.asarray(getattr(together, field)),
                                  np.asarray(getattr(alone, field)), atol=1e-12, rtol=1e-12)


# Final validation metric per (candidate η, validation seed) for the selection test below.
# Candidate η = 0.2 has the best mean over seeds (4); seed 0 alone would pick η = 0.1, seed 1
# alone η = 0.3, and a reshape with swapped axes, (seeds, candidates).mean(0) of the
# candidate-major scores [0, 10, 4, 4, 6, 3], gives [2, 8, 3.5] and picks η = 0.1 too.
SELECTION_SCORES = {0.1: (0.0, 10.0), 0.2: (4.0, 4.0), 0.3: (6.0, 3.0)}


@pytest.mark.parametrize("select_by, metric_name", [("loss", "accuracy"), ("metric", "risk"),
                                                    ("metric", "accuracy")])
def test_table1_selection_averages_each_candidate_over_validation_seeds(select_by, metric_name):
  """run_task picks the step size with the best mean validation score over the seeds.

  A fake runner scores each run from its plan's η and its validation key (3 candidates x 2
  seeds) in the key that selects (the held-out loss, or the metric with select_by="metric"),
  and a constant in the other, so no training runs. With accuracy (higher is better) the
  metric's scores are negated and the same candidate must win."""
  from types import SimpleNamespace
  from typing import NamedTuple

  from experiments import table1_protocol as protocol

  config = table1_config(plans=("joint",))
  protocol.quick(config)  # sets one validation seed: override after it
  config.validation_seeds, config.num_seeds = 2, 1
  config.task_settings.occurrence.eta_grid = tuple(SELECTION_SCORES)
  config.task_settings.occurrence.select_by = select_by
  protocol.validate(config)
  validation_key, test_key = jax.random.key(0), jax.random.key(1)
  seed_keys = np.asarray(jax.random.key_data(jax.random.split(validation_key, 2)))
  sign = 1.0 if metric_name == "risk" else -1.0

  class FakeRun(NamedTuple):
    risk: np.ndarray
    test_metric: np.ndarray
    diverged: np.ndarray

  def fake_runner(keys, data):  # runs (seeds, plans), as task_train.make_grid_runner
    etas = np.asarray(data.etas)[:, 0]  # joint: one phase, one η
    key_data = np.asarray(jax.random.key_data(keys))
    final = np.zeros((len(key_data), len(etas)))
    for s, key in enumerate(key_data):
      seed = [i for i, k in enumerate(seed_keys) if np.array_equal(k, key)]
      for c, eta in enumerate(etas):
        final[s, c] = SELECTION_SCORES[float(eta)][seed[0]] if seed else 0.0
    constant = np.full_like(final, 0.5)
    loss, metric = (final, constant) if select_by == "loss" else (constant, sign * final)
    return FakeRun(*(np.stack([np.zeros_like(x), x], axis=-1) for x in (loss, metric)),
                   np.zeros(final.shape, bool))

  def make_runner(task, model, slots, **options):
    return fake_runner

  task = SimpleNamespace(metric_name=metric_name)
  chosen, results = protocol.run_task(config, "occurrence", (task, None), validation_key,
                                      test_key, make_runner=make_runner)
  assert len(protocol.candidates(config, "occurrence")) == 3
  assert set(results) == {"joint"}
  assert chosen.chosen["joint"].eta_out == 0.2


@pytest.mark.slow
def test_table1_binary_rejects_a_bad_override_of_a_keyword_task():
  """The documented indexed override reaches the "and" block and fails before any compute."""
  result = subprocess.run(
      [sys.executable, "-m", "experiments.table1", "--config",
       str(REPO / "experiments/configs/table1.py"), '--config.task_settings["and"].heads=0',
       "--workdir", "/nonexistent/never-written"],
      cwd=REPO, capture_output=True, text=True, timeout=120)
  assert result.returncode != 0
  assert "config.task_settings.and.heads must be an integer >= 1; got 0." in (
      result.stdout + result.stderr)


WORKDIR_BINARIES = ("atlas", "claims", "regimes", "sample_complexity", "scaling", "sweep",
                    "table1")


@pytest.mark.slow
def test_every_binary_rejects_a_workdir_that_is_a_file(tmp_path):
  """--workdir naming a file: one line naming the path (nothing else: no flag help, no
  traceback), exit status 2, before any computation (experiments/cli.py)."""
  path = tmp_path / "a_file"
  path.write_text("not a folder")
  processes = {name: subprocess.Popen(command(name, workdir=path), cwd=REPO,
                                      env=dict(os.environ, JAX_PLATFORMS="cpu"),
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for name in WORKDIR_BINARIES}
  for name, process in processes.items():
    text, _ = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 2, (name, text)
    assert text.splitlines() == [
        f"{name}.py: error: --workdir {path} is not a writable folder: it is a file."], (
        name, text)
  assert path.read_text() == "not a folder"


def test_writable_workdir_names_the_path(tmp_path):
  """The shared check: a folder under a file, and (when not root) a read-only folder."""
  from absl import app

  from experiments import common
  blocker = tmp_path / "file"
  blocker.write_text("")
  with pytest.raises(app.UsageError, match=f"^--workdir {blocker}/sub is not a writable folder: "
                                           "not a directory.$"):
    common.writable_workdir(str(blocker / "sub"))
  assert common.writable_workdir(str(tmp_path / "new" / "deep")) == str(tmp_path / "new" / "deep")
  assert (tmp_path / "new" / "deep").is_dir()
  if os.geteuid() != 0:  # root writes through permissions
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(app.UsageError, match=f"^--workdir {locked} is not a writable folder: "
                                             "permission denied.$"):
      common.writable_workdir(str(locked))


@pytest.mark.parametrize("override, message", [
    ("--config.layouts=('cls','first')",
     "atlas.py: error: config.layouts: unknown layout 'first'; allowed: cls, cls+first_last, "
     "last, last+first_last."),
    ("--config.languages=('tomita:9',)",
     "atlas.py: error: config.languages: tomita k must be an integer in {1, …, 7}; got 9."),
    ("--coordinator=127.0.0.1:12355",
     "atlas.py: error: --coordinator: the atlas's processes meet in the store in --workdir, "
     "not in jax.distributed; start each with --num_processes=P and --process_id=p only."),
    ("--process_id=2", "atlas.py: error: --process_id must be in 0..0; got 2."),
])
@pytest.mark.slow
def test_atlas_bad_config_is_one_line(tmp_path, override, message):
  """A bad layout, language spec or process flag: that one line, exit status 2, no workdir
  left behind."""
  workdir = tmp_path / "atlas"
  result = subprocess.run(command("atlas", override, workdir=workdir), cwd=REPO,
                          capture_output=True, text=True, timeout=TIMEOUT)
  assert result.returncode == 2
  assert (result.stdout + result.stderr).strip() == message
  assert not workdir.exists()


@pytest.mark.parametrize("variant, override, message", [
    (":quick", "--config.num_seeds=-1",
     "config.num_seeds must be an integer >= 1; got -1."),
    (":fast", "--config.num_seeds=2",
     "unknown config variant 'fast' of table1.py; allowed: quick"),
])
@pytest.mark.slow
def test_table1_variant_keeps_the_command_line(tmp_path, variant, override, message):
  """The quick variant is built before the overrides, so a bad num_seeds is refused in it as
  in the full config (it used to run with 2 seeds); an unknown variant is named."""
  args = [sys.executable, "-m", "experiments.table1", "--config",
          f"experiments/configs/table1.py{variant}", override, f"--workdir={tmp_path / 't'}"]
  result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT)
  assert result.returncode == 2
  assert message in (result.stdout + result.stderr).strip().splitlines()[-1]
  assert len((result.stdout + result.stderr).strip().splitlines()) == 1
