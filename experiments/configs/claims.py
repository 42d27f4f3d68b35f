"""Config for experiments.claims: the paper's five plans from zero (docs/theory.md section 5).

Step sizes (documented choice, scaled with d so that one plan covers every d):
  three_phase: η1 = d, η2 = d², η3 = 1 (at d = 50: 50, 2500, 1: the theory's example);
  attention_first: η2 = d², η3 = 1; output_only: η = 1; attention_only: η = d²;
  joint: η = 1. Every plan runs `steps` output/joint steps.
"""

import ml_collections

from experiments import configs


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.language = "occurrence"
  config.letters = (0,)
  config.d_list = (10, 20, 50)
  configs.paper_three_phase(config)
  config.joint_eta = 1.0
  config.record_every = 1
  config.success_risk = 1e-3
  # KQV form (docs/theory.md section 2) trained by the same joint plan at d = d_list[0]
  # from scale·N(0, 1) weights, compared with the direct form in kqv_vs_direct.png.
  config.kqv_scale = 0.1
  config.kqv_seed = 0
  return config.lock()
