"""Figures of the sweep binary: the phase diagram and risk-vs-step curves."""

from __future__ import annotations

import os

import numpy as np

from experiments import common, regimes_overlay
from lagjax import sweep
from lagjax.dynamics import plans, run_label

RISK_FLOOR = 1e-16  # risks are shown on a log scale; exact zeros sit at this floor
# The regime panel's colour of each run_label.LABELS entry, in its order.
REGIME_COLOURS = ("#2ca02c", "#1f77b4", "#9467bd", "#ff7f0e", "#e377c2", "#d62728")


def diagram_groups(results: dict, axes: tuple[str, str]):
  """Static groups whose rows vary over both diagram axes."""
  x, y = axes
  for key, rows in sweep.group_rows(results).items():
    if np.unique(results[x][rows]).size > 1 and np.unique(results[y][rows]).size > 1:
      yield key, rows


def seed_average(results: dict, rows, x_name: str, y_name: str):
  """The (y, x) grid of mean final risk and "any diverged" over the rows at each grid point.

  Averages over seeds and any other axis (a single value in the default configs);
  grid points without rows are NaN. Returns (risk, diverged, xs, ys), risk floored
  at RISK_FLOOR.
  """
  xs, x_index = np.unique(results[x_name][rows], return_inverse=True)
  ys, y_index = np.unique(results[y_name][rows], return_inverse=True)
  cell = y_index.reshape(-1) * xs.size + x_index.reshape(-1)
  cells = ys.size * xs.size
  counts = np.bincount(cell, minlength=cells)
  total = np.bincount(cell, weights=results["final_risk"][rows], minlength=cells)
  with np.errstate(invalid="ignore"):
    risk = np.where(counts > 0, total / np.maximum(counts, 1), np.nan).reshape(ys.size, xs.size)
  diverged = np.bincount(cell, weights=results["diverged"][rows], minlength=cells) > 0
  return np.maximum(risk, RISK_FLOOR), diverged.reshape(ys.size, xs.size), xs, ys


def regime_cells(results: dict, rows, x_name: str, y_name: str):
  """The (y, x) grid of regime labels (codes into run_label.LABELS): at each grid point the
  most frequent label over its rows (seeds), -1 where there are none. Returns
  (codes, xs, ys)."""
  xs, x_index = np.unique(results[x_name][rows], return_inverse=True)
  ys, y_index = np.unique(results[y_name][rows], return_inverse=True)
  cell = y_index.reshape(-1) * xs.size + x_index.reshape(-1)
  counts = np.zeros((ys.size * xs.size, len(run_label.LABELS)), np.int64)
  np.add.at(counts, (cell, np.asarray(results["label"][rows], np.int64)), 1)
  codes = np.where(counts.sum(1) > 0, counts.argmax(1), -1)
  return codes.reshape(ys.size, xs.size), xs, ys


def regime_panel(ax, results: dict, rows, key, x_name: str, y_name: str) -> float | None:
  """Draws the regime panel on `ax`: the grid coloured by each run's regime label
  (run_label.LABELS; docs/theory.md §5d) and the line η = 2/λ_max(θ0) on the axis of the
  plan's first step size, where the first step turns unstable. Returns that η (None when
  λ_max(θ0) ≤ 0 or the first step size is on neither axis)."""
  from matplotlib.colors import ListedColormap
  from matplotlib.patches import Patch
  codes, xs, ys = regime_cells(results, rows, x_name, y_name)
  ax.pcolormesh(xs, ys, np.ma.masked_less(codes, 0), shading="nearest",
                cmap=ListedColormap(REGIME_COLOURS), vmin=-0.5, vmax=len(REGIME_COLOURS) - 0.5)
  handles = [Patch(color=REGIME_COLOURS[code], label=run_label.LABELS[code].replace("_", " "))
             for code in np.unique(codes[codes >= 0])]
  first = plans.PLANS[key.plan].eta_names[0]
  initial = float(np.nanmedian(results["initial_sharpness"][rows]))
  edge = 2.0 / initial if initial > 0 and first in (x_name, y_name) else None
  if edge is not None:
    draw = ax.axvline if first == x_name else ax.axhline
    draw(edge, color="black", linestyle="--", linewidth=1.5)
    handles.append(Patch(facecolor="none", edgecolor="black", linestyle="--",
                         label=f"{symbol(first)} = 2/λ_max(θ0) = {edge:.3g}"))
  ax.set(xscale="log", yscale="log", xlabel=symbol(x_name), ylabel=symbol(y_name),
         title=f"regime of each run: {key.plan}, d = {key.d}, T = {key.steps}")
  ax.legend(handles=handles, fontsize=7, loc="best")
  return edge


def symbol(name: str) -> str:
  """A step-size column as figures write it: eta1 -> η1."""
  return name.replace("eta", "η")


def phase_diagram(results: dict, config, path: str) -> str | None:
  plt = common.pyplot()
  from matplotlib.colors import ListedColormap, LogNorm
  x_name, y_name = config.diagram_axes
  groups = list(diagram_groups(results, (x_name, y_name)))
  if not groups:
    return None
  # With the sweep's regime labels (config.sharpness), a second row: the regime panel.
  regimes = "label" in results
  fig, axes = plt.subplots(2 if regimes else 1, len(groups),
                           figsize=(6 * len(groups), 10 if regimes else 5), squeeze=False)
  drawn = False
  for column, (ax, (key, rows)) in enumerate(zip(axes[0], groups)):
    if regimes:
      regime_panel(axes[1, column], results, rows, key, x_name, y_name)
    risk, diverged, xs, ys = seed_average(results, rows, x_name, y_name)
    mesh = ax.pcolormesh(xs, ys, np.ma.masked_where(diverged, risk), shading="nearest",
                         norm=LogNorm(vmin=max(risk.min(), RISK_FLOOR), vmax=risk.max()),
                         cmap="viridis")
    fig.colorbar(mesh, ax=ax, label="final population risk")
    if diverged.any():
      ax.pcolormesh(xs, ys, np.ma.masked_where(~diverged, np.ones_like(risk)), shading="nearest",
                    cmap=ListedColormap(["#d62728"]))
    success = np.where(diverged, np.inf, risk) <= config.success_risk
    if success.any() and (~success).any():
      # Wide and below the exact boundary's red dashes, which it often follows: the white
      # shows on both sides of the dashes and in their gaps.
      ax.contour(xs, ys, success.astype(float), levels=[0.5], colors="white", linewidths=3.5,
                 zorder=2)
    ax.set(xscale="log", yscale="log", xlabel=symbol(x_name), ylabel=symbol(y_name),
           title=f"{key.plan}, d = {key.d}, T = {key.steps}"
                 + (f", N = {key.n_samples}" if key.n_samples else ""))
    drawn |= regimes_overlay.draw_boundary(ax, key, config, results["eta3"][rows])  # dashed
  # The caption names the exact boundary only where one is drawn.
  fig.suptitle(f"white contour: final risk ≤ ε = {config.success_risk:g}; red cells: diverged"
               + ("\nred dashes: exact boundary Δ = Δ_ε; red dots: the wall η1_max (lj.regimes)"
                  if drawn else ""), fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=130)
  plt.close(fig)
  return path


def curve_rows(table: dict, config) -> np.ndarray:
  """The rows risk_curves plots: per config.curves point (x, y), the row nearest in
  (log x, log y) of the first static group that varies over both diagram axes."""
  group = next(diagram_groups(table, config.diagram_axes), None)
  return np.zeros(0, np.int64) if group is None else _nearest_rows(table, group[1], config)


def _nearest_rows(table: dict, rows, config) -> np.ndarray:
  x_name, y_name = config.diagram_axes
  return np.asarray([rows[np.argmin(np.log(table[x_name][rows] / x_value) ** 2
                                    + np.log(table[y_name][rows] / y_value) ** 2)]
                     for x_value, y_value in config.curves], np.int64)


def risk_curves(results: dict, config, path: str) -> str | None:
  plt = common.pyplot()
  x_name, y_name = config.diagram_axes
  group = next(diagram_groups(results, config.diagram_axes), None)
  if group is None or not config.curves:
    return None
  key, rows = group
  rows = _nearest_rows(results, rows, config)
  steps, risks = sweep.risk_paths(results, rows)
  fig, ax = plt.subplots(figsize=(6, 4))
  for row, risk in zip(rows, risks):
    label = (f"{symbol(x_name)} = {results[x_name][row]:.3g}, "
             f"{symbol(y_name)} = {results[y_name][row]:.3g}"
             + (" (diverged)" if results["diverged"][row] else ""))
    ax.plot(steps, np.maximum(risk, RISK_FLOOR), marker=".", label=label)
  ax.set_xscale("symlog", linthresh=1.0)
  ax.set(yscale="log", xlabel="step", ylabel="population risk", xlim=(0, int(key.steps)),
         title=f"{key.plan}, d = {key.d}, T = {key.steps}")
  return common.save_figure(fig, path, legend=ax)


def sweep_figures(results: dict, config, workdir: str) -> list[str]:
  paths = [phase_diagram(results, config, os.path.join(workdir, "phase_diagram.png")),
           risk_curves(results, config, os.path.join(workdir, "risk_vs_step.png"))]
  return [p for p in paths if p]
