"""The atlas binary's files say "not reached" in words or empty cells, never -1 or NaN
(issue 34): a row whose τ_ε is reached and one whose is not, written by
experiments/atlas_report.py (no flags, so it imports beside another binary's module)."""

import csv
import types

import numpy as np

import lagjax as lj
from experiments import atlas_report as atlas_binary
from lagjax.analysis import atlas


def table(tau, ratio):
  """An atlas.run-shaped result for two languages (what write() reads)."""
  steps = np.arange(0, 6, 2)
  rows = {"best_risk": np.array([0.1, 0.45]), "best_grad_norm": np.array([1e-9, 1e-5]),
          "grid_covered": np.array([True, True]), "tau_epsilon": np.array(tau),
          "half_time_ratio": np.array(ratio), "steps": steps,
          "joint_curve": np.array([[0.5, 0.3, 0.1], [0.5, 0.49, 0.48]])}
  for plan in atlas.PLAN_NAMES:
    rows[plan] = np.array([0.2, 0.5])
    rows[plan + "_etas"] = [(1.0,) * len(lj.plans.PLANS[plan].step_sizes)] * 2
  return rows


def test_undefined_lag_columns_are_words_in_md_and_empty_in_csv(tmp_path):
  langs = [lj.languages.from_spec("even_pairs"), lj.languages.from_spec("parity")]
  names = ["even_pairs", "parity"]
  settings = atlas.Settings(steps=4, grid=(1.0,), record_every=2, starts=1, iterations=1)
  experiment = types.SimpleNamespace(
      workdir=str(tmp_path), started=0.0, write_metadata=lambda **fields: fields)
  # even pairs reached ε at step 4 with t_α/t_β = 2.5; parity never did (-1 from the library)
  atlas_binary.write(experiment, {"cls": table([4, -1], [2.5, -1.0])}, langs, names,
                     [True, False], settings)
  with open(tmp_path / "atlas.csv") as f:
    rows = list(csv.DictReader(f))
  assert [(r["tau_eps"], r["half_time_ratio"]) for r in rows] == [("4", "2.5"), ("", "")]
  text = (tmp_path / "atlas.md").read_text()
  assert "| 4 | 2.5 |" in text and "| not reached | undefined |" in text
  assert "\"not reached\" when it never gets there" in text        # the legend
  assert "t_α/t_β = 2.5 (τ_ε = 4)" in text
  for line in text.splitlines():
    cells = [cell.strip() for cell in line.split("|")]
    assert "-1" not in cells and "nan" not in [c.lower() for c in cells], line
  atlas_binary.write(experiment, {"cls": table([-1, -1], [-1.0, -1.0])}, langs, names,
                     [True, False], settings)
  assert "t_α/t_β = undefined (τ_ε = not reached)" in (tmp_path / "atlas.md").read_text()


def test_language_names_of_every_spec_form():
  """A config.languages entry's row name: a built-in with arguments joins them with '_'
  (':' and ','), an automaton file is its stem, a factory its function (issue 34's mutation
  campaign: language_name was only ever called on plain names)."""
  builtin = sorted(lj.languages.LANGUAGES)[0]
  assert atlas_binary.language_name(f"{builtin}:3") == f"{builtin}_3"
  assert atlas_binary.language_name(f"{builtin}:1,2") == f"{builtin}_1_2"
  assert atlas_binary.language_name("path/to/mine.json") == "mine"
  assert atlas_binary.language_name("my_module:my_factory") == "my_factory"


def test_atlas_md_title_and_heatmap_layout(tmp_path, monkeypatch):
  """atlas.csv's grid_covered column is each row's flag; atlas.md opens with its title;
  heatmap.png is 3.2 in per layout + 1 wide, 0.32 in per language + 2 high, saved with a
  tight bounding box at 130 dpi (issue 34's mutation campaign: these were unchecked)."""
  plt = atlas_binary.common.pyplot()
  calls = {}

  class Recording:
    def __getattr__(self, name):
      return getattr(plt, name)

    def subplots(self, *args, **kwargs):
      calls["figsize"] = kwargs["figsize"]
      fig, axes = plt.subplots(*args, **kwargs)
      savefig = fig.savefig
      fig.savefig = lambda path, **options: (calls.update(savefig=options),
                                             savefig(path, **options))
      return fig, axes

  monkeypatch.setattr(atlas_binary.common, "pyplot", Recording)
  langs = [lj.languages.from_spec("even_pairs"), lj.languages.from_spec("parity")]
  settings = atlas.Settings(steps=4, grid=(1.0,), record_every=2, starts=1, iterations=1)
  experiment = types.SimpleNamespace(
      workdir=str(tmp_path), started=0.0, write_metadata=lambda **fields: fields)
  results = table([4, -1], [2.5, -1.0])
  results["grid_covered"] = np.array([True, False])
  atlas_binary.write(experiment, {"cls": results}, langs, ["even_pairs", "parity"],
                     [True, False], settings)
  with open(tmp_path / "atlas.csv") as f:
    assert [row["grid_covered"] for row in csv.DictReader(f)] == ["True", "False"]
  text = (tmp_path / "atlas.md").read_text()
  assert text.startswith("# Atlas of regular languages (exact population GD, transfer route)\n")
  assert calls["figsize"] == (3.2 * 1 + 1, 0.32 * 2 + 2)
  assert calls["savefig"] == {"dpi": 130, "bbox_inches": "tight"}
  assert (tmp_path / "heatmap.png").stat().st_size > 0
