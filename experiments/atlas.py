"""The atlas of regular languages: which ones one attention layer learns from zero, and where
attention lags (docs/theory.md §10).

  python -m experiments.atlas --config experiments/configs/atlas.py --workdir docs/results/atlas

Writes atlas.csv, atlas.md (with the Huang, Liang & Yang comparisons), heatmap.png and
metadata.json to --workdir (experiments/atlas_report.py writes them).
"""

from __future__ import annotations

import time

import numpy as np
from absl import flags
from ml_collections import config_flags

from experiments import atlas_report, cli, common
from lagjax.analysis import atlas
from lagjax.data import languages, regular

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/atlas", "Output folder.")


def validate(config):
  """One line naming the bad field before any compute."""
  for layout in config.layouts:
    if layout not in atlas.LAYOUTS:
      raise ValueError(f"config.layouts: unknown layout {layout!r}; allowed: "
                       f"{', '.join(atlas.LAYOUTS)}.")
  if not config.grid or any(not (np.isfinite(eta) and eta > 0) for eta in config.grid):
    raise ValueError(f"config.grid must be finite step sizes > 0; got {tuple(config.grid)}.")
  if config.steps < 4 or config.steps % config.record_every:
    raise ValueError(f"config.steps must be >= 4 and a multiple of config.record_every; got "
                     f"{config.steps} and {config.record_every}.")
  try:
    return [languages.from_spec(spec) for spec in config.languages]
  except (ValueError, TypeError) as error:
    raise ValueError(f"config.languages: {error}") from error


def main(argv):
  del argv
  experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=validate)
  config, langs, workdir = experiment.config, experiment.validated, experiment.workdir
  settings = atlas.Settings(steps=config.steps, grid=tuple(config.grid),
                            record_every=config.record_every, starts=config.starts,
                            iterations=config.iterations, epsilon=config.epsilon)
  names = [atlas_report.language_name(spec) for spec in config.languages]
  star_free = [regular.is_star_free(lang) for lang in langs]
  started = experiment.started
  results = {}
  # Two compiled stages per layout (the best risk, then the plans), reported as one total.
  stages = experiment.progress("stages (best risk, plans) of the layouts")
  for k, layout in enumerate(config.layouts):
    results[layout] = atlas.run(
        langs, atlas.LAYOUTS[layout], settings,
        progress=lambda done, total, k=k: stages(k * total + done, len(config.layouts) * total))
    atlas_report.write(experiment, results, langs, names, star_free, settings)
  print(f"wrote {workdir} in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
  cli.run(main)
