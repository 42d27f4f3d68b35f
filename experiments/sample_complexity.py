"""Success probability of the finite-sample three-phase plan against N / (d ln d).

  python -m experiments.sample_complexity --config experiments/configs/sample_complexity.py \\
      --workdir runs/sample_complexity

Seeds are vmapped. If the O(d ln d) rate holds, the curves for different d collapse.
Writes sample_complexity.csv/.md and sample_complexity.png.
"""

from __future__ import annotations

import math
import os
import time

import jax
import numpy as np
from absl import flags
from ml_collections import config_flags

import lagjax as lj
from experiments import cli, common

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/sample_complexity", "Output folder.")


def success_rate(config, d, n_samples, key):
  lang = lj.languages.make(config.language, d, config.letters)
  objective = lj.plans.Empirical(n_samples)
  plan = lj.plans.three_phase(config.eta1_over_d * d, config.eta2_over_d2 * d**2, config.eta3,
                              config.steps, objectives=(objective,) * 3)
  runs = lj.train(lang, plan, record_every=plan.total_steps, key=key,
                  num_seeds=config.num_seeds)
  errors = np.asarray(runs.error[:, -1])
  ok = ~np.asarray(runs.diverged)
  return float(np.mean((errors <= config.error_threshold) & ok)), errors, int((~ok).sum())


def validate(config) -> None:
  if config.num_seeds < 1 or config.error_threshold < 0:
    raise ValueError("num_seeds must be >= 1 and error_threshold >= 0.")


def main(argv):
  del argv
  experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=validate)
  config = experiment.config
  rows = []
  key = jax.random.key(config.seed)
  for d in config.d_list:
    for c in config.c_list:
      n_samples = max(1, round(c * d * math.log(d)))
      start = time.time()
      rate, errors, diverged = success_rate(config, d, n_samples, jax.random.fold_in(key, d))
      se = math.sqrt(rate * (1 - rate) / config.num_seeds)
      rows.append({"d": d, "c": c, "N": n_samples, "success": rate, "success_se": se,
                   "median_error": float(np.median(errors)), "diverged": diverged})
      print(f"d={d:3d} N={n_samples:5d} (c={c:g}) success {rate:.3f} ± {se:.3f} "
            f"median error {np.median(errors):.2e} [{time.time() - start:.1f}s]", flush=True)
  common.write_table(rows, _WORKDIR.value, "sample_complexity",
                     "Sample complexity of the finite-sample three-phase plan")
  plt = common.pyplot()
  fig, ax = plt.subplots(figsize=(6, 4))
  for d in config.d_list:
    sub = [r for r in rows if r["d"] == d]
    ax.errorbar([r["c"] for r in sub], [r["success"] for r in sub],
                yerr=[r["success_se"] for r in sub], marker="o", capsize=3, label=f"d = {d}")
  ax.set(xscale="log", xlabel="N / (d ln d)", ylabel=f"P(0-1 error <= {config.error_threshold:g})",
         title=f"finite-sample three-phase plan ({config.num_seeds} seeds)")
  ax.set_xticks(list(config.c_list), [f"{c:g}" for c in config.c_list])
  ax.minorticks_off()
  ax.legend()
  fig.tight_layout()
  path = os.path.join(_WORKDIR.value, "sample_complexity.png")
  fig.savefig(path, dpi=120)
  experiment.write_metadata()
  print(f"wrote {path} and metadata.json")


if __name__ == "__main__":
  cli.run(main)
