"""Finite-sample three-phase plan: seeds × N at a few step sizes (empirical-risk phases)."""

from experiments.configs import phase_diagram


def get_config():
  config = phase_diagram.get_config()
  config.d_list = (16,)
  config.steps_list = (300,)
  config.eta1 = phase_diagram.grid(4.0, 64.0, 3)
  config.eta2 = phase_diagram.grid(64.0, 1024.0, 3)
  config.n_samples_list = (11, 22, 44, 89, 177)   # c · d ln d for c = 1/4 … 4 at d = 16
  config.num_seeds = 16
  config.chunk_size = 256
  config.batch_size = 8
  config.curves = ((16.0, 256.0),)
  return config
