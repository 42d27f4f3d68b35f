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
