"""Config for experiments.sample_complexity: the finite-sample three-phase plan.

Each phase runs on the empirical risk of N fresh strings (N1 = N2 = N3 = N),
N = c · d ln d for c in `c_list`; success means final population 0-1 error
<= `error_threshold`, estimated on a fixed sample of `error_samples` strings.
Step sizes as in configs/claims.py: η1 = d, η2 = d², η3 = 1. (configs/finite_sample.py is
the sweep's finite-sample config: step sizes × N; this binary fixes the step sizes and varies
N / (d ln d).)
"""

import ml_collections

from experiments import configs


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.language = "occurrence"
  config.letters = (0,)
  config.d_list = (8, 16, 32)
  config.c_list = (0.125, 0.25, 0.5, 1.0, 2.0, 4.0)
  config.num_seeds = 32
  configs.paper_three_phase(config)
  config.error_threshold = 1e-3
  config.seed = 0
  return config.lock()
