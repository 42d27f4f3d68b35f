"""All five plans over d with the claims' step sizes scaled as grids (step-by-step for joint)."""

from experiments import grids
from experiments.configs import sweep


def get_config():
  config = sweep.get_config()
  config.plans = ("three_phase", "attention_first", "output_only", "attention_only", "joint")
  config.d_list = (10, 20, 50, 100)
  config.steps_list = (300,)
  config.eta1 = grids.spec(1.0, 1e3, 8)
  config.eta2 = grids.spec(10.0, 1e5, 8)
  config.eta3 = grids.spec(1.0, 1.0, 1, points=(1.0,))
  config.eta = grids.spec(0.1, 10.0, 8)
  config.diagram_axes = ("eta1", "eta2")
  config.curves = ((50.0, 2500.0),)
  return config
