"""Config for experiments.regimes: exact three-phase regimes from θ0 = 0 (docs/theory.md §8).

  python -m experiments.regimes --config experiments/configs/regimes.py --workdir runs/regimes

The d grid is log-spaced from d_min to d_max (rounded to integers); fits use the
largest d first and report the smallest d from which each fit holds to fit_rtol.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  # occurrence | any_of (one invariant Δ), or a factory "module:function" taking d that returns
  # an occurrence-family lj.Language (lj.languages.from_spec).
  config.language = "occurrence"
  # "" for the balanced geometric law (p = 1/(d-1) for occurrence), else 'geometric:0.1',
  # 'fixed:20' or 'shifted_poisson:3.0' (the lengths part below sets its own laws).
  config.length = ""
  config.letters = (0,)
  # The language table (docs/theory.md §8.8): specs of languages with an exact moments route
  # (regimes_languages.py lists the built-ins). Non-empty, or config.language outside the
  # occurrence family, the binary writes languages.csv/.md/.png only.
  config.languages = ()
  config.table_eta1 = 1.0            # the η1 where the table reports η2 success intervals
  config.eps = 1e-3                  # ε: success means final squared risk <= ε
  config.eta3 = 1.0                  # phase-3 step size (the paper's)
  config.d_grid = ml_collections.ConfigDict(dict(d_min=8, d_max=100_000, num=25))
  config.fit_rtol = 0.02             # a fit "holds" where every relative residual is <= this
  config.collapse_d = (20, 50, 200)  # phase diagrams re-plotted on the Δ axis
  config.collapse_points = 48        # grid points per axis (η1 in [1, 1e4], η2 in [1, 1e6])
  config.collapse_steps = 10_000     # T of the re-plotted diagrams (the sweep's default)
  config.boundary_d = (10, 50, 200, 1000)
  # Item 4: bounded against unbounded lengths at equal mean (geometric, shifted Poisson, fixed).
  config.lengths = ml_collections.ConfigDict(dict(
      d=50, means=(5, 10, 20, 50), laws=("geometric", "shifted_poisson", "fixed")))
  # Item 5: KQV form from scale·N(0, 1) weights; the first two steps exactly, then R*(α).
  config.kqv = ml_collections.ConfigDict(dict(
      d=8, seeds=8, scales=(0.01, 0.03, 0.1, 0.3, 1.0), eta1_over_d=1.0, eta2_num=49,
      eta2_min=1.0, eta2_max=1e9))
  return config.lock()
