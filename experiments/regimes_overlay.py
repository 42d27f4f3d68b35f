"""The exact regime (lagjax/analysis/regimes.py, docs/theory.md §8) on the sweep's outputs.

Two hooks for experiments.sweep, each a no-op when the swept plan or language is
outside the closed form's reach: `draw_boundary` dashes the exact boundary
η2_min(η1) on a phase-diagram panel, and `no_success_reason` names why an η1
column has no succeeding η2 (the wall where the attention step reverses sign,
or a boundary beyond the grid) instead of "none".
"""

from __future__ import annotations

import functools

import numpy as np

import lagjax as lj
from experiments import common, grids
from lagjax import regimes


@functools.lru_cache(maxsize=64)
def _regime(language: str, letters: tuple, length, d: int, steps: int, eps: float,
            eta3: float):
  return regimes.three_phase_regime(
      lj.languages.from_spec(language, d, letters=letters, length=length), eps, eta3=eta3,
      steps=steps)


def exact_regime(config, plan: str, d: int, steps: int, n_samples: int, eta3s):
  """The Regime of a sweep group, or None when no exact one applies (config.exact_boundary
  False, another plan, sampled objectives, a non-squared loss, several η3 in one diagram,
  axes other than (η1, η2))."""
  eta3s = np.unique(np.asarray(eta3s, dtype=np.float64))
  if (not config.get("exact_boundary", True) or plan != "three_phase" or n_samples
      or config.loss != "squared" or eta3s.size != 1
      or tuple(config.diagram_axes) != ("eta1", "eta2")):
    return None
  try:
    return _regime(config.language, tuple(config.letters), common.config_length(config),
                   int(d), int(steps), float(config.success_risk), float(eta3s[0]))
  except ValueError:  # ε outside (0, ½), or a language without the regime laws (§8)
    return None


def draw_boundary(ax, key, config, eta3s) -> bool:
  """Dashes the exact boundary η2_min(η1) (and the wall) on a phase-diagram panel."""
  regime = exact_regime(config, key.plan, key.d, key.steps, key.n_samples, eta3s)
  if regime is None:
    return False
  low, high = ax.get_xlim()
  eta1 = grids.points(low, high, 128)
  ax.plot(eta1, np.asarray(regime.eta2_min(eta1)), ls="--", color="red", lw=1.2, zorder=3,
          label="exact boundary (lj.regimes)")
  if np.isfinite(regime.eta1_max) and low < regime.eta1_max < high:
    ax.axvline(regime.eta1_max, ls=":", color="red", lw=1.0,
               label=f"wall η1 = {regime.eta1_max:.4g}")
  ax.legend(fontsize=7, loc="lower left")
  return True


def no_success_reason(config, d: int, steps: int, eta1: float, eta2_grid, eta3s) -> str | None:
  """Why no η2 of the grid succeeds at η1, from the exact regime; None if it cannot say."""
  regime = exact_regime(config, "three_phase", d, steps, 0, eta3s)
  if regime is None:
    return None
  if regime.coordinates == 1 and eta1 >= regime.eta1_max:
    return f"attention step reverses sign beyond η1 = {regime.eta1_max:.6g}"
  needed = float(regime.eta2_min(eta1))
  if np.isfinite(needed) and needed > np.max(eta2_grid):
    return f"needs η2 >= {needed:.4g}, beyond the grid"
  return None
