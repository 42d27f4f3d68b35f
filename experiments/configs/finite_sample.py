"""Finite-sample three-phase plan: seeds × N at a few step sizes (empirical-risk phases).

A config of experiments.sweep (the phase diagram over step sizes, at fixed N values).
configs/sample_complexity.py is the config of the other finite-sample binary,
experiments.sample_complexity (success rate against N / (d ln d), the step sizes fixed):
two binaries of the topic of lagjax/analysis/finite_sample.py, one config each, named after
the binary that reads it.
"""

from experiments import grids
from experiments.configs import sweep


def get_config():
  config = sweep.get_config()
  config.d_list = (16,)
  config.steps_list = (300,)
  config.eta1 = grids.spec(4.0, 64.0, 3)
  config.eta2 = grids.spec(64.0, 1024.0, 3)
  config.n_samples_list = (11, 22, 44, 89, 177)   # c · d ln d for c = 1/4 … 4 at d = 16
  config.num_seeds = 16
  config.chunk_size = 256
  config.batch_size = 8
  config.curves = ((16.0, 256.0),)
  return config
