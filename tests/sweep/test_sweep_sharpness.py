"""The sweep's regime labels and sharpness (issue 36 items 2-3, docs/theory.md §5d), and the
phase diagram's regime panel."""

import os

import jax.numpy as jnp
import numpy as np
import pytest

import lagjax as lj
from experiments import common, plotting
from experiments.configs import sweep as sweep_config
from lagjax import sweep
from lagjax.dynamics import run_label, train

D, STEPS = 3, 12
ETAS = [0.5, 4.0, 9.0, 30.0]  # 2/λ_max(θ0) = 6 on occurrence(3): stable, then unstable
TOL = 1e-10  # the same exact risk and dense eigensolver on both sides (roundoff ~1e-15)


@pytest.mark.slow
def test_sweep_labels_match_run_label_on_lj_train_runs(tmp_path):
  """On a grid of T = 12 steps and K = 16 records every step is recorded, so the sweep's
  label is run_label's on the whole risk curve of lj.train (joint GD by the step engine,
  output-only GD by the closed form)."""
  table = sweep.build_table(["joint", "output_only"], [D], [STEPS], {"eta": ETAS})
  results = sweep.run_sweep(table, str(tmp_path), lj.occurrence, chunk_size=4, batch_size=4,
                            num_records=16, sharpness=True)
  assert all(np.array_equal(steps, np.arange(STEPS + 1)) for steps in results["record_steps"])
  codes = []
  for row in range(table["plan"].size):
    plan = lj.plans.get_plan(table["plan"][row]).build([table["eta"][row]], STEPS)
    run = lj.train(lj.occurrence(D), plan, sharpness=1)
    etas = train.record_step_sizes(plan.slots(), plan.data(), run.steps)
    label = run_label.label_code(run.risk, diverged=run.diverged,
                                 sharpness=run.records["sharpness"][:, 0], etas=etas)
    codes.append(int(label.code))
    assert results["label"][row] == int(label.code), row
    assert results["period"][row] == int(label.period), row
    assert results["first_unstable_step"][row] == int(run.first_unstable_step), row
    for name in ("max_sharpness", "end_sharpness"):
      np.testing.assert_allclose(results[name][row], float(run.summary[name]), rtol=0, atol=TOL)
    np.testing.assert_allclose(results["initial_sharpness"][row],
                               float(run.records["sharpness"][0, 0]), rtol=0, atol=TOL)
  # The grid reaches several regimes, so a constant label would fail.
  assert len(set(codes)) >= 3, [run_label.LABELS[c] for c in codes]


def synthetic_results(with_labels: bool) -> dict:
  """A 3 × 4 three-phase grid over (η1, η2) as run_sweep returns it, with known labels."""
  eta1, eta2 = np.meshgrid([1.0, 8.0, 16.0], [10.0, 100.0, 1e3, 1e4], indexing="ij")
  rows = eta1.size
  results = {"plan": np.full(rows, "three_phase"), "d": np.full(rows, 4),
             "steps": np.full(rows, 10), "n_samples": np.zeros(rows, np.int64),
             "seed": np.zeros(rows, np.int64), "eta1": eta1.ravel(), "eta2": eta2.ravel(),
             "eta3": np.ones(rows), "eta": np.full(rows, np.nan),
             "final_risk": np.geomspace(0.4, 1e-4, rows), "diverged": eta1.ravel() > 10.0}
  if with_labels:
    # monotone below η1 = 2/λ0 = 5, oscillating between, diverged at η1 = 16
    results["label"] = np.select([eta1.ravel() < 5.0, eta1.ravel() < 10.0], [0, 4], 5)
    results["initial_sharpness"] = np.full(rows, 0.4)
  return results


@pytest.fixture
def kept_figures(monkeypatch):
  figures = []
  monkeypatch.setattr(common.pyplot(), "close", figures.append)  # keep the figure to read it
  return figures


def test_phase_diagram_draws_the_regime_panel_when_labels_are_present(tmp_path, kept_figures):
  config = sweep_config.get_config()
  config.exact_boundary = False
  path = plotting.phase_diagram(synthetic_results(True), config, str(tmp_path / "pd.png"))
  assert path and os.path.exists(path)
  figure, = kept_figures
  panel = [ax for ax in figure.axes if ax.get_title().startswith("regime of each run")]
  assert len(panel) == 1
  ax, = panel
  mesh, = ax.collections
  np.testing.assert_array_equal(np.ma.getdata(mesh.get_array()).reshape(4, 3),
                                [[0, 4, 5]] * 4)  # (η2, η1) cells
  edge, = ax.lines  # η1 = 2/λ_max(θ0) = 5, vertical: η1 is the x axis
  assert np.allclose(edge.get_xdata(), 5.0)
  legend = [text.get_text() for text in ax.get_legend().get_texts()]
  assert legend[:3] == ["monotone", "oscillating", "diverged"] and "2/λ_max(θ0)" in legend[3]


def test_phase_diagram_has_no_regime_panel_without_labels(tmp_path, kept_figures):
  config = sweep_config.get_config()
  config.exact_boundary = False
  plotting.phase_diagram(synthetic_results(False), config, str(tmp_path / "pd.png"))
  figure, = kept_figures
  assert not [ax for ax in figure.axes if ax.get_title().startswith("regime")]


def test_sweep_without_sharpness_keeps_its_outputs():
  key = sweep.GroupKey("output_only", d=D, steps=2, n_samples=0)
  plain = sweep.make_evaluator(lj.occurrence(D), key, num_records=2)
  out = plain.evaluate(jnp.array([1.0]), 0)
  assert not set(sweep.SHARPNESS_OUTPUTS) & set(out)
