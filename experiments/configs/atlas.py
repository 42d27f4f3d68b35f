"""Config for experiments.atlas, the second edition: every built-in language × four layouts ×
five plans, gradient flow to t = 10⁶ and GD at bracketed step sizes (docs/theory.md §10).

`--config=experiments/configs/atlas.py:quick` is a small run (three languages, one layout, t =
10³ and 300 GD steps), the tests' and a first try's.

The fields under `horizons` are lagjax.analysis.horizons.Horizons's (its docstring says what
each means); the plans' phases in time units: joint, output_only, attention_only run one phase
to t1; attention_first runs attention for `attention`, then output; three_phase runs output for
`settle`, attention for `attention`, then output to t1. Under GD every plan runs `gd_steps`
steps (three_phase: `gd_settle_steps` output steps, one attention step at η2, the rest at
η3 = η_out; attention_first: one attention step at η2, then output), on the grids `gd_grid`
(η, η_out) and `gd_attention_grid` (η2), each extended by its ratio at an edge that is chosen
and clearly better than its inward neighbour, within `gd_cap`.
"""

import ml_collections

VARIANTS = ("quick",)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  # "name" or "name:arg,arg" of a registered language, an automaton file "path.json" or a
  # factory "module:function" (lj.languages.from_spec).
  config.languages = ("parity", "first", "even_pairs", "tomita:1", "tomita:2", "tomita:3",
                      "tomita:4", "tomita:5", "tomita:6", "tomita:7", "dyck:2",
                      "cycle_navigation:3", "mod_count:1,3,1", "contains:1,0,1",
                      "occurrence_automaton:3")
  config.layouts = ("cls", "cls+first_last", "last+first_last", "last")
  config.plans = ("joint", "three_phase", "attention_first", "output_only", "attention_only")
  config.dynamics = ("flow", "gd")
  # Rows already in --workdir's rows.csv (same config) are read back, not recomputed.
  config.resume = True
  horizons = ml_collections.ConfigDict()
  horizons.t1 = 1e6
  horizons.settle = 1e3
  horizons.attention = 1e2
  horizons.rtol = 1e-8
  horizons.atol = 1e-10
  horizons.num_records = 121          # 20 per decade from t = 1 to 10⁶
  horizons.epsilon = 1e-3             # learned iff R − R* <= epsilon; τ_ε at R* + epsilon
  horizons.plateau_flat = 0.01
  horizons.plateau_drop = 0.5
  horizons.tail_window = (1e4, 1e6)
  horizons.gd_steps = 10_000
  horizons.gd_grid = (0.5, 1.0, 2.0, 4.0)
  horizons.gd_attention_grid = (1.0, 10.0, 100.0)
  # Wide enough that three_phase's one attention step (grid ratio 10) is bracketed: 10⁴.
  horizons.gd_cap = (1.0 / 64.0, 1e4)
  horizons.gd_settle_steps = 1000
  horizons.gd_record_every = 1
  horizons.optimum_starts = 16
  horizons.optimum_iterations = 200
  horizons.saddle_tol = 1e-8
  config.horizons = horizons
  if variant == "quick":
    config.languages = ("parity", "even_pairs", "tomita:1")
    config.layouts = ("cls",)
    horizons.t1 = 1e3
    horizons.settle = 50.0
    horizons.attention = 10.0
    horizons.num_records = 61         # 20 per decade from t = 1 to 10³
    horizons.tail_window = (1e2, 1e3)
    horizons.gd_steps = 300
    horizons.gd_grid = (1.0, 2.0)
    horizons.gd_attention_grid = (1.0, 10.0)
    horizons.gd_settle_steps = 50
    horizons.optimum_starts = 4
    horizons.optimum_iterations = 60
  return config.lock()
