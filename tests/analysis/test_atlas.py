"""The atlas (docs/theory.md §10): its padded, vmapped runs are lj.train's runs, and the
star-free test follows Schützenberger's theorem on the built-ins."""

import pytest

import lagjax as lj
from lagjax.analysis import atlas
from lagjax.data import regular, regular_builtins

TOL = 1e-12   # the same trapezoid sums on the same nodes up to padding: roundoff only


@pytest.mark.slow  # one of the longest single tests: kept out of the quick loop
def test_atlas_runs_equal_lj_train():
  """Parity (2 states) padded beside even pairs (5 states), plain layout, 4 steps: the
  atlas's final risks of joint GD and of the three-phase plan at η = 1 equal lj.train's
  on the same plans to TOL (padding adds unreachable states and nothing else). The
  languages and settings are atlas.run's docstring example's: in a full run the shared
  compilation cache serves both."""
  langs = [regular_builtins.parity(), regular_builtins.even_pairs()]
  settings = atlas.Settings(steps=4, grid=(1.0,), record_every=2, starts=1, iterations=1)
  rows = atlas.run(langs, atlas.LAYOUTS["cls"], settings)
  for i, lang in enumerate(langs):
    joint = lj.train(lang, lj.plans.joint(1.0, 4))
    three = lj.train(lang, lj.plans.three_phase(1.0, 1.0, 1.0, 1, steps1=2))
    assert abs(rows["joint"][i] - float(joint.risk[-1])) <= TOL
    assert abs(rows["three_phase"][i] - float(three.risk[-1])) <= TOL
    assert rows["best_risk"][i] <= min(rows[p][i] for p in atlas.PLAN_NAMES) + TOL
  assert rows["grid_covered"].all()


@pytest.mark.parametrize("name, star_free", [
    ("parity", False), ("first", True), ("even_pairs", True), ("tomita:1", True),
    ("tomita:2", True), ("tomita:3", False), ("tomita:4", True), ("tomita:5", False),
    ("tomita:6", False), ("tomita:7", True), ("dyck:2", True), ("cycle_navigation:3", False),
    ("mod_count:1,3,1", False), ("contains:1,0,1", True)])
def test_star_free_built_ins(name, star_free):
  """Counting modulo k (parity, Tomita 3/5/6, cycle navigation, mod_count) is not
  first-order definable; the rest are (e.g. Tomita 7 = 0*1*0*1*)."""
  assert regular.is_star_free(lj.languages.from_spec(name)) is star_free


def test_plan_names_are_the_registry_and_a_plan_without_a_grid_is_named(monkeypatch):
  """The atlas's plans are those of lj.plans.PLANS (more step sizes first); a plan registered
  without an atlas grid is refused in one line before anything compiles."""
  assert sorted(atlas.PLAN_NAMES) == sorted(lj.plans.plan_names())
  sizes = [len(lj.plans.PLANS[name].step_sizes) for name in atlas.PLAN_NAMES]
  assert sizes == sorted(sizes, reverse=True)
  monkeypatch.setattr(atlas, "PLAN_NAMES", (*atlas.PLAN_NAMES, "new_plan"))
  with pytest.raises(ValueError, match=r"no step-size grid for the plans \['new_plan'\]"):
    atlas.run([regular_builtins.parity()], atlas.LAYOUTS["cls"], atlas.Settings(steps=4))


@pytest.mark.slow  # compile-heavy: in the full suite, out of the quick loop
def test_lag_columns_are_attention_over_output_and_the_first_step_at_epsilon():
  """Tomita 1 (1*) from θ0 = 0 under joint GD: β moves at the first step and α only once β
  is nonzero (docs/theory.md §6b), so attention's half-time is the later one and the ratio
  t_α/t_β is > 1 on a row whose half-times differ (swapping attention and output gives its
  inverse). τ_ε is the first recorded step whose risk is <= best risk + ε on joint GD's
  curve, and the ratio is -1 exactly where ε is never reached (the binary prints that
  as a word)."""
  langs = [lj.languages.from_spec("tomita:1"), regular_builtins.parity()]
  # The first edition's settings (its committed run: τ_ε = 52, ratio 11 and parity's -1).
  settings = atlas.Settings(steps=60, grid=(1.0, 4.0), record_every=2, starts=2, iterations=30)
  rows = atlas.run(langs, atlas.LAYOUTS["cls"], settings)
  for i in range(len(langs)):
    reached = rows["joint_curve"][i] <= rows["best_risk"][i] + settings.epsilon
    expected_tau = int(rows["steps"][reached.argmax()]) if reached.any() else -1
    assert rows["tau_epsilon"][i] == expected_tau
  assert rows["tau_epsilon"][0] > 0 and rows["half_time_ratio"][0] > 1.5
  assert rows["tau_epsilon"][1] == -1 and rows["half_time_ratio"][1] == -1


@pytest.mark.slow  # two atlas programs compiled on two grid sizes
def test_atlas_resizes_its_grid_and_equals_lj_train(monkeypatch):
  """The atlas runs the transfer route's own report (no private window): started on one
  window (extra_points=0), which the first attention step leaves, both stages run again on
  the covering grid of risk/coverage.py's ladder, and the plans' risks equal lj.train's."""
  from lagjax.risk import coverage

  sizes = []
  resize = coverage.resize

  def counting(attempt, *args, **kwargs):
    return resize(lambda num_points: sizes.append(num_points) or attempt(num_points), *args,
                  **kwargs)

  monkeypatch.setattr(coverage, "resize", counting)
  langs = [regular_builtins.parity(), regular_builtins.even_pairs()]
  settings = atlas.Settings(steps=6, grid=(4.0,), record_every=2, starts=2, iterations=3,
                            extra_points=0)
  rows = atlas.run(langs, atlas.LAYOUTS["cls+first_last"], settings)
  width = lj.risk.quadrature.window_width(None, left=max(
      lj.risk.quadrature.window_left(lang) for lang in langs))
  # The best-risk stage, then the plans: each leaves one window and re-sizes once.
  assert sizes == [width, 2 * width, width, 2 * width]
  assert rows["grid_covered"].all()
  for i, lang in enumerate(langs):
    joint = lj.train(lang, lj.plans.joint(4.0, 6), lj.init_params(lang.d, positions="first_last"))
    assert abs(rows["joint"][i] - float(joint.risk[-1])) <= TOL
    assert rows["best_risk"][i] <= min(rows[p][i] for p in atlas.PLAN_NAMES) + TOL


# ---------------------------------------------------------------------------------------------
# The second edition: experiments/atlas.py over lagjax/analysis/horizons.py (docs/theory.md §10).
# ---------------------------------------------------------------------------------------------

import dataclasses  # noqa: E402 (the second edition's tests below)
import json  # noqa: E402
import os  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from experiments import atlas_report  # noqa: E402
from experiments.configs import atlas as atlas_config  # noqa: E402
from lagjax.analysis import horizons  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("override, message", [
    (("layouts", ("cls", "first")), "config.layouts: unknown layout 'first'; allowed: cls, "
                                    "cls+first_last, last, last+first_last."),
    (("plans", ("joint", "warmup")), "config.plans: unknown plan 'warmup'; allowed: joint, "),
    (("dynamics", ()), "config.dynamics must name at least one of flow, gd."),
    (("horizons.t1", -1.0), "config.horizons.t1 must be a finite real > 0; got -1.0."),
    (("horizons.gd_grid", ()), "config.horizons.gd_grid must be a non-empty tuple"),
    (("languages", ("tomita:9",)), "config.languages: tomita k must be an integer"),
])
def test_a_bad_config_names_its_field(override, message):
  from experiments import atlas_report
  config = atlas_config.get_config("quick").unlock()
  field, value = override
  if field.startswith("horizons."):
    config.horizons[field.split(".")[1]] = value
  else:
    config[field] = value
  with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")
                     .replace("+", r"\+").replace(".", r"\.")):
    atlas_report.validate(config)


def fake_row(layout, learned, r_star=0.1, theta=None):
  """A horizons.Row with every column: joint learned (or not) under flow and GD, against
  R* = r_star at θ* = theta (None: {})."""
  h = horizons.Horizons(t1=100.0, settle=10.0, attention=5.0, gd_steps=50, gd_settle_steps=5)
  base = {"language": "fake", "layout": layout, "r_star": r_star, "r_star_error": 1e-13,
          "optimum": "minimum", "grad_norm": 1e-12, "min_eigenvalue": 0.01,
          "agreeing_starts": "2/2"}
  records, curves = [], {}
  for kind in horizons.DYNAMICS:
    cells = {"status": "completed", "etas": "rate 1", "final_risk": 0.1005 if learned else 0.3,
             "excess": 5e-4 if learned else 0.2, "learned": learned, "plateau_level": 0.3,
             "plateau_exit": 40.0 if learned else h.not_learned_flow,
             "plateau_saddle": "saddle", "plateau_lambda": -0.02,
             "tail": tails_verdict(), "tail_exponent": "no power-law tail",
             "regime": "monotone"}
    cells.update(horizons._lag_cells(60.0 if learned else -1, 30.0, 20.0, h.not_learned_flow))
    records.append({**base, "plan": "joint", "dynamics": kind, **cells})
  times = np.concatenate([[0.0], np.geomspace(1.0, 100.0, 9)])
  curves["joint", "flow"] = (times, 0.1 + 0.4 / (1 + times))
  optimum = types.SimpleNamespace(theta={} if theta is None else theta)
  return horizons.Row("fake", layout, optimum, records, curves, 1.5)


def tails_verdict():
  return "no power-law tail (too short)"


def test_the_report_opens_with_verdicts_marks_reasons_and_resumes(tmp_path):
  """atlas.md: the verdict table before the full rows, reasons in words (never -1 or NaN);
  heatmap.png and curves.png written; a store with the same config reads its pairs back, one
  with another config starts afresh."""
  config = atlas_config.get_config("quick")
  stamp = json.dumps({"config": "a"})
  pairs = [("fake:1", "cls"), ("fake:1", "last")]
  atlas_report.Store.prepare(str(tmp_path), stamp)
  store = atlas_report.Store(str(tmp_path), pairs)
  store.add(1, "fake", fake_row("last", False), True)   # any order: rows come in pair order
  store.add(0, "fake", fake_row("cls", True), True)
  settings = horizons.Horizons(**config.horizons.to_dict())
  atlas_report.write(str(tmp_path), store, settings, config)
  text = (tmp_path / "atlas.md").read_text()
  assert text.index("## Verdicts") < text.index("## All rows")
  assert "not learned by t = 100" in text and "1.5 (attention lags)" in text
  for line in text.splitlines():
    cells = [cell.strip().lower() for cell in line.split("|")]
    assert "-1" not in cells and "nan" not in cells, line
  assert (tmp_path / "heatmap.png").stat().st_size > 0
  assert (tmp_path / "curves.png").stat().st_size > 0
  assert [row["layout"] for row in store.rows] == ["cls", "cls", "last", "last"]
  written = (tmp_path / atlas_report.ROWS).read_text()
  atlas_report.Store.prepare(str(tmp_path), stamp)
  again = atlas_report.Store(str(tmp_path), pairs)
  assert again.has(0) and again.has(1)
  assert again.rows == store.rows and again.curves == store.curves
  assert again.rows[0]["learned"] is True and again.rows[-1]["tau_eps"] == "not learned by t = 100"
  again.write_csv()
  assert (tmp_path / atlas_report.ROWS).read_text() == written
  atlas_report.Store.prepare(str(tmp_path), json.dumps({"config": "b"}))
  fresh = atlas_report.Store(str(tmp_path), pairs)
  assert not fresh.rows and not os.path.exists(tmp_path / atlas_report.ROWS)


def test_processes_share_the_unfinished_pairs_by_index(tmp_path):
  """Pair i is process (i mod P)'s, whenever a process reads the store (the processes meet only
  in its files): the shares are disjoint, together every unfinished pair, and a pair another
  process finished is in no share."""
  pairs = [(f"fake:{i}", "cls") for i in range(6)]
  atlas_report.Store.prepare(str(tmp_path), json.dumps({"config": "a"}))
  store = atlas_report.Store(str(tmp_path), pairs)
  assert store.share(0, 2) == [0, 2, 4] and store.share(1, 2) == [1, 3, 5]
  for i in (0, 3):
    store.add(i, "fake", fake_row("cls", True), True)
  late = atlas_report.Store(str(tmp_path), pairs)   # a process that reads the store later
  assert late.share(0, 2) == [2, 4] and late.share(1, 2) == [1, 5]
  assert late.share(0, 1) == [1, 2, 4, 5]
  assert late.share(2, 3) == [2, 5]


def test_a_process_other_than_0_waits_for_the_stamp_of_its_config(tmp_path):
  """Process p > 0 reads the store only once process 0 has stamped it with the same config;
  a store stamped for another config makes it wait, and time out with a line saying so."""
  mine, other = json.dumps({"config": "a"}), json.dumps({"config": "b"})
  atlas_report.Store.prepare(str(tmp_path), other)
  with pytest.raises(TimeoutError, match="did not prepare the store"):
    atlas_report.Store.wait_for_stamp(str(tmp_path), mine, timeout=0.0)
  atlas_report.Store.prepare(str(tmp_path), mine)
  atlas_report.Store.wait_for_stamp(str(tmp_path), mine, timeout=0.0)   # returns at once


def test_process_0_waits_until_every_pair_is_in_the_store(tmp_path):
  """Process 0 waits for the other processes' chunk files, reports each change once, and
  times out with a line naming how many pairs are missing; reload then reads them."""
  pairs = [(f"fake:{i}", "cls") for i in range(2)]
  atlas_report.Store.prepare(str(tmp_path), json.dumps({"config": "a"}))
  store = atlas_report.Store(str(tmp_path), pairs)
  store.add(0, "fake", fake_row("cls", True), True)
  seen = []
  with pytest.raises(TimeoutError, match="^1 pairs were still missing"):
    store.wait_until_complete(lambda done, total: seen.append((done, total)), timeout=0.0)
  other = atlas_report.Store(str(tmp_path), pairs)   # another process finishes pair 1
  other.add(1, "fake", fake_row("cls", False), True)
  store.wait_until_complete(lambda done, total: seen.append((done, total)), timeout=0.0)
  assert seen == [(1, 2), (2, 2)] and not store.has(1)
  store.reload()
  assert store.has(1) and store.rows == other.rows


@dataclasses.dataclass(frozen=True)
class FakeOptimum:
  """What the nesting pass reads of an lj.optimum Optimum."""

  risk: float
  theta: dict
  risk_error: float = 1e-13
  source: str = ""


OPTIMUM_SECONDS = 0.2   # the stubbed restart's time in the nesting test


def test_a_pair_above_a_contained_layouts_r_star_is_computed_again(tmp_path, monkeypatch):
  """Layouts nest (docs/theory.md §2b): once every pair is stored, a pair whose R* is above
  that of a layout it contains (here the CLS row's, lowered by a row-level restart after the
  other optima were computed) restarts its optimum from those rows' θ*, widened, and is
  computed again against the lower value; contained layouts first, so the last query's new
  R* reaches the last query + tables. An equal R* (CLS + tables) is left alone, and a second
  pass computes nothing (lj.optimum and
  horizons.row stubbed: the first restarts to 1e-3 below the lowest start's R*)."""
  layouts = ("cls", "last", "cls+first_last", "last+first_last")
  lang = lj.languages.from_spec("first")
  entry = atlas_report.Entry("first", "first", lang, True)
  pairs = [(entry, layout) for layout in layouts]
  atlas_report.Store.prepare(str(tmp_path), json.dumps({"config": "a"}))
  store = atlas_report.Store(str(tmp_path), [("first", layout) for layout in layouts])
  cls_theta = lj.init_params(2)
  cls_theta["alpha"] = jnp.asarray([1.0, -1.0])
  for i, (layout, r_star) in enumerate(zip(layouts, (0.2, 0.25, 0.2, 0.22))):
    theta = cls_theta if layout == "cls" else lj.init_params(
        2, **horizons.LAYOUTS[layout]._asdict())
    store.add(i, "first", fake_row(layout, False, r_star, theta), True)
  optimum_calls, row_calls = [], []

  def optimum_stub(lang, layout, *, num_starts, iterations, starts=()):
    optimum_calls.append((layout, num_starts, list(starts)))
    time.sleep(OPTIMUM_SECONDS)
    risk = {"last": 0.2, "last+first_last": 0.19}[layout] - 1e-3
    return FakeOptimum(risk, lj.init_params(2, **horizons.LAYOUTS[layout]._asdict()))

  def row_stub(lang, layout, *, horizons, found, plan_names, dynamics):
    row_calls.append((layout, found.source))
    return fake_row(layout, False, float(found.risk), found.theta)

  monkeypatch.setattr(horizons.optimum_lib, "optimum", optimum_stub)
  monkeypatch.setattr(horizons, "row", row_stub)
  config = types.SimpleNamespace(layouts=layouts, plans=("joint",), dynamics=("flow", "gd"))
  settings = horizons.Horizons()
  assert atlas_report.nest(store, pairs, settings, config) == [1, 3]
  assert row_calls == [("last", "restarted from the cls rows' optima"),
                       ("last+first_last",
                        "restarted from the cls, last, cls+first_last rows' optima")]
  (last, one, [widened]), (both, one_again, starts) = optimum_calls
  assert (last, one, both, one_again, len(starts)) == ("last", 1, "last+first_last", 1, 3)
  np.testing.assert_array_equal(widened["alpha"], [[1.0, -1.0], [1.0, -1.0]])
  assert lj.models.direct.layout(widened) == horizons.LAYOUTS["last"]
  assert [store.r_star(i)[0] for i in range(4)] == [0.2, 0.199, 0.2, 0.189]
  # A pair computed again records its whole wall time, the restart's optimum included (the
  # stubbed row says 1.5 s of its own; the pairs left alone keep theirs).
  seconds = store.seconds
  assert [seconds[f"first/{layout}"] for layout in ("cls", "cls+first_last")] == [1.5, 1.5]
  for layout in ("last", "last+first_last"):
    assert seconds[f"first/{layout}"] >= OPTIMUM_SECONDS and seconds[f"first/{layout}"] != 1.5
  again = atlas_report.Store(str(tmp_path), [("first", layout) for layout in layouts])
  assert again.rows == store.rows      # stored: a resumed run reads the new rows
  optimum_calls.clear()
  assert atlas_report.nest(again, pairs, settings, config) == [] and not optimum_calls


def test_a_chunk_without_its_optimum_is_left_out_of_the_nesting_pass(tmp_path, monkeypatch):
  """A chunk written before chunks held θ* reads back with θ* None: the pass cannot restart
  from it, so it says so and computes nothing (never a KeyError on resume)."""
  layouts = ("cls", "last")
  entry = atlas_report.Entry("first", "first", lj.languages.from_spec("first"), True)
  atlas_report.Store.prepare(str(tmp_path), json.dumps({"config": "a"}))
  store = atlas_report.Store(str(tmp_path), [("first", layout) for layout in layouts])
  for i, (layout, r_star) in enumerate(zip(layouts, (0.2, 0.25))):
    store.add(i, "first", fake_row(layout, False, r_star), True)
  old = store.chunks.load(0, 0)
  store.chunks.save(0, 0, {name: value for name, value in old.items() if name != "theta"})
  resumed = atlas_report.Store(str(tmp_path), [("first", layout) for layout in layouts])
  assert resumed.theta(0) is None and resumed.rows == store.rows
  calls = []
  monkeypatch.setattr(horizons.optimum_lib, "optimum", lambda *args, **kwargs: calls.append(1))
  config = types.SimpleNamespace(layouts=layouts, plans=("joint",), dynamics=("flow", "gd"))
  pairs = [(entry, layout) for layout in layouts]
  assert atlas_report.nest(resumed, pairs, horizons.Horizons(), config) == [] and not calls


CENSUS_ARGS = [sys.executable, "-m", "experiments.atlas",
               "--config=experiments/configs/census.py:quick",
               "--config.languages=('dfa:01.10:1','dfa:01.01:1')",
               "--config.plans=('joint','three_phase')"]
BINARY_ENV = dict(os.environ, JAX_PLATFORMS="cpu")


@pytest.fixture(scope="module")
def one_process_census(tmp_path_factory):
  """The work folder of one run of the binary, in one process, on two census languages (parity
  and "ends in 1") and two plans: the output and resume test reads it, and the two-process
  test compares with it (one run of the binary fewer than a run per test)."""
  workdir = tmp_path_factory.mktemp("census") / "one"
  single = subprocess.run(CENSUS_ARGS + [f"--workdir={workdir}"], cwd=REPO,
                          capture_output=True, text=True, timeout=900, env=BINARY_ENV)
  assert single.returncode == 0, single.stderr[-2000:]
  return workdir


@pytest.mark.slow  # the binary on two languages and two plans, then again on its outputs
def test_the_binary_writes_every_output_and_a_second_run_resumes(one_process_census, tmp_path):
  """rows.csv holds each language's flow and GD rows; atlas.md, census.md, the figures and
  metadata.json are written; run again into a copy of the workdir, it reads every pair back
  and computes nothing (the same rows, byte for byte)."""
  for name in ("rows.csv", "curves.csv", "atlas.md", "census.md", "heatmap.png", "curves.png",
               "census.png", "metadata.json"):
    assert (one_process_census / name).exists(), name
  rows = (one_process_census / "rows.csv").read_text()
  for spec in ("dfa:01.10:1", "dfa:01.01:1"):
    assert rows.count(f"\n{spec},") == 4       # two plans × flow and GD
  metadata = json.loads((one_process_census / "metadata.json").read_text())
  assert metadata["pairs_finished"] == metadata["pairs"] == 2
  workdir = tmp_path / "again"
  shutil.copytree(one_process_census, workdir)
  second = subprocess.run(CENSUS_ARGS + [f"--workdir={workdir}"], cwd=REPO,
                          capture_output=True, text=True, timeout=900, env=BINARY_ENV)
  assert second.returncode == 0, second.stderr[-2000:]
  assert (workdir / "rows.csv").read_text() == rows
  # A recomputed pair would record its own wall time.
  again = json.loads((workdir / "metadata.json").read_text())
  assert again["pair_seconds"] == metadata["pair_seconds"]


@pytest.mark.slow  # two processes of the binary on the census languages above
def test_a_two_process_census_writes_the_files_of_one_process(one_process_census, tmp_path):
  """experiments.atlas on two census languages as two processes that meet only in the store
  (process 1 started first, so it waits for process 0's stamp): rows.csv and curves.csv are
  the bytes of the one-process run, census.md holds the census's three tables, and
  metadata.json records the process count and every pair."""
  two = tmp_path / "two"
  started = [subprocess.Popen(CENSUS_ARGS + [f"--workdir={two}", "--num_processes=2",
                                             f"--process_id={i}"],
                              cwd=REPO, env=BINARY_ENV, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in (1, 0)]
  try:
    outputs = [process.communicate(timeout=900)[0] for process in started[::-1]]
  finally:
    for process in started:
      process.kill()
  for process, output in zip(started[::-1], outputs):
    assert process.returncode == 0, output[-3000:]
  for name in ("rows.csv", "curves.csv"):
    assert (two / name).read_bytes() == (one_process_census / name).read_bytes(), name
  census = (two / "census.md").read_text()
  for heading in ("## Learned from θ0 = 0", "## Attention lags", "## Joint against three_phase"):
    assert heading in census
  assert "| cls | joint | flow |" in census and (two / "census.png").stat().st_size > 0
  metadata = json.loads((two / "metadata.json").read_text())
  assert metadata["process_count"] == 2
  assert sorted(metadata["pair_seconds"]) == ["dfa:01.01:1/cls", "dfa:01.10:1/cls"]


def test_the_binary_frees_its_programs_once_half_the_memory_maps_are_held(monkeypatch, tmp_path):
  """experiments.common.release_programs, which the atlas calls after each pair, frees every
  compiled program (jax.clear_caches) once the process holds more than RELEASE_AT of its
  memory maps, or where /proc cannot tell, and keeps them below; maps_in_use reads this
  process's share, or None without /proc."""
  from experiments import common
  used = common.maps_in_use()
  if os.path.exists(common.PROCESS_MAPS):
    assert used is not None and 0 < used < 1
  monkeypatch.setattr(common, "MAX_MAP_COUNT", str(tmp_path / "absent"))
  assert common.maps_in_use() is None
  cleared = []
  monkeypatch.setattr(common.jax, "clear_caches", lambda: cleared.append(True))
  for share, freed in ((0.2, False), (common.RELEASE_AT, False), (0.51, True), (None, True)):
    monkeypatch.setattr(common, "maps_in_use", lambda share=share: share)
    assert common.release_programs() is freed, share
  assert len(cleared) == 2
