"""Scaling laws of the exact dynamics: joint-GD lag and the finite-sample rate (docs/theory.md §9).

  python -m experiments.scaling --config experiments/configs/scaling.py \\
      --workdir docs/results/scaling

The parts, their outputs and their validation are experiments/scaling_protocol.py;
this binary runs the parts config.parts names and writes every file to --workdir.
"""

from __future__ import annotations

import json
import os
import time

from absl import app, flags
from ml_collections import config_flags

from experiments import cli, common, scaling_protocol

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/scaling", "Output folder.")


def main(argv):
  del argv
  experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=scaling_protocol.validate)
  config, workdir = experiment.config, experiment.workdir

  def log(message):
    print(message, flush=True)

  timing = {}
  eta_rows, lag_rows, fits, regime_rows, sample_rows, models = [], [], [], [], [], []
  if {"lag", "regimes"} & set(config.parts):
    start, cpu = time.time(), time.process_time()
    eta_rows, lag_rows, regime_rows = scaling_protocol.joint_part(config, log)
    timing["joint"] = time.time() - start
    timing["joint_cpu"] = time.process_time() - cpu
  if lag_rows:
    fits = scaling_protocol.lag_fits(config, lag_rows)
    columns = ("language", "d", "kappa", "eta", "tau_eps", "t_half_alpha", "t_half_beta",
               "ratio", "lag_gap", "status", "final_risk", "margin")
    common.write_csv([{c: r[c] for c in columns} for r in lag_rows],
                     os.path.join(workdir, "joint_lag.csv"))
    common.write_csv(eta_rows, os.path.join(workdir, "eta_max.csv"))
    if fits:
      common.write_csv(fits, os.path.join(workdir, "joint_fits.csv"))
    scaling_protocol.plot_lag(config, lag_rows, fits, os.path.join(workdir, "joint_lag.png"))
  if regime_rows:
    common.write_csv(regime_rows, os.path.join(workdir, "joint_regimes.csv"))
    scaling_protocol.plot_regimes(config, regime_rows, eta_rows,
                          os.path.join(workdir, "joint_regimes.png"))
  if "sample" in config.parts:
    start, cpu = time.time(), time.process_time()
    try:  # a c grid that does not bracket the success rate is found only while running
      sample_rows, curves, replicates = scaling_protocol.sample_part(config, log)
    except ValueError as error:
      raise app.UsageError(str(error)) from error
    models = scaling_protocol.rate_models(config, sample_rows, replicates)
    common.write_csv(sample_rows, os.path.join(workdir, "sample_complexity.csv"))
    common.write_csv(curves, os.path.join(workdir, "sample_curves.csv"))
    if models:
      common.write_csv(models, os.path.join(workdir, "rate_models.csv"))
    scaling_protocol.plot_samples(config, sample_rows, curves, models,
                 os.path.join(workdir, "sample_complexity.png"))
    timing["sample"] = time.time() - start
    timing["sample_cpu"] = time.process_time() - cpu
  with open(os.path.join(workdir, "timing.json"), "w") as f:
    json.dump(timing, f, indent=1)
  with open(os.path.join(workdir, "scaling.md"), "w") as f:
    f.write(scaling_protocol.summary(config, timing, eta_rows, lag_rows, fits, regime_rows,
                             sample_rows, models))
  experiment.write_metadata(timing=timing)
  log(f"wrote {workdir} (" + ", ".join(f"{k} {v:.0f}s" for k, v in timing.items()) + ")")


if __name__ == "__main__":
  cli.run(main)
