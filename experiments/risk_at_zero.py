"""Prints the exact population risk, 0-1 error and gradient at θ = 0.

  python -m experiments.risk_at_zero --config experiments/configs/risk_at_zero.py
"""

import jax
import numpy as np
from ml_collections import config_flags

import lagjax as lj
from experiments import cli, common

_CONFIG = config_flags.DEFINE_config_file("config")

def main(argv):
  del argv
  config = common.start(_CONFIG.value).config
  lang = lj.languages.make(config.language, config.d, config.letters)
  theta = lj.init_params(config.d, cls=config.cls)
  risk = lj.population_risk(lang, theta, loss=config.loss, route=config.route)
  route = lj.risk_fn(lang, loss=config.loss, route=risk.risk_route, cls=config.cls)
  grad = jax.grad(route.risk)(theta)
  print(f"language: {lang.kind}{lang.letters}, d = {lang.d}, length law {lang.length}")
  print(f"R(0) = {risk.value:.15f}  [{risk.risk_route}]")
  print(f"0-1 error at 0 = {lj.error_rate(lang, theta).value:.12f}")
  with np.printoptions(precision=6, suppress=False, threshold=8, edgeitems=3):
    for name, value in grad.items():
      print(f"dR/d{name} = {np.asarray(value)}")


if __name__ == "__main__":
  cli.run(main)
