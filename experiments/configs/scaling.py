"""Config for experiments.scaling: joint-GD lag and the finite-sample rate (docs/theory.md §9).

Joint-GD lag: exact tied joint GD from θ0 = 0 until τ_ε on occurrence, OR and AND
(letters 0 and 1), d on a log grid; η = κ · η_max(d), η_max by bisection (the
largest η that reaches ε within `bisection_max_steps` without diverging).
Regime diagram: outcome classes of joint GD over (d, η) with η a fraction of
2/λ_max(d) (the Hessian's stability limit at θ0), at the cap `regime_max_steps`.
Finite-sample rate: the three-phase plan with N strings per phase, N = c · d ln d
for c in `sample_c`, η1 = d, η2 = d², η3 = 1 and T = `steps` (as in
configs/sample_complexity.py); success is population 0-1 error <= `error_threshold`.
"""

import ml_collections
import numpy as np

from experiments import configs


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.parts = ("lag", "regimes", "sample")
  config.languages = ("occurrence", "any_of", "all_of")
  config.epsilon = 1e-3
  # Joint-GD lag.
  config.lag_d = (8, 16, 32, 64, 128, 256, 512, 1024)
  config.kappas = (0.1, 0.3, 0.6, 0.9)
  config.max_steps = 100_000           # cap of the κ runs (every step recorded)
  config.bisection_max_steps = 20_000  # cap that defines η_max
  config.bisection_start = 1.0         # first η tried by the bracketing
  config.bisection_iterations = 7      # final bracket ratio 2^(2^-7) < 1.006
  # Regime diagram.
  config.regime_d_range = (8, 1024)
  config.regime_d_per_octave = 2       # d = 8·2^(k/2) up to 1024: 15 values
  config.regime_eta_points = 64
  config.regime_eta_fractions = (3e-3, 2.0)  # η / (2/λ_max), log-spaced
  config.regime_max_steps = 3000
  # Finite-sample rate.
  config.sample_d = (8, 16, 32, 64, 128, 256, 512)
  config.sample_c = tuple(float(c) for c in 2.0 ** np.arange(-3.0, 2.01, 0.5))
  config.num_seeds = 32
  config.bootstrap = 2000
  configs.paper_three_phase(config)
  config.error_threshold = 1e-3
  config.error_samples = 20_000
  config.seed = 0
  return config.lock()
