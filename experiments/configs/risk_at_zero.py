"""Config for experiments.risk_at_zero: the exact risk and gradient at θ = 0."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.language = "occurrence"  # occurrence | any_of | all_of
  config.d = 50
  config.letters = (0,)
  config.loss = "squared"  # squared | logistic
  config.route = "auto"  # auto | laplace | lattice
  config.cls = False
  return config.lock()
