"""The atlas of regular languages, second edition: what one attention layer learns from θ0 = 0
under gradient flow to t = 10⁶ and under GD at bracketed step sizes, against certified optima
(docs/theory.md §10).

  python -m experiments.atlas --config experiments/configs/atlas.py --workdir docs/results/atlas
  python -m experiments.atlas --config experiments/configs/atlas.py:quick --workdir /tmp/atlas

One row per (language, layout, plan, dynamics) by lagjax.analysis.horizons.row, one (language,
layout) at a time. After each (language, layout) the binary appends its rows to rows.csv and
its flow curves to curves.csv and rewrites atlas.md, heatmap.png and curves.png
(experiments/atlas_report.py): a run stopped part-way resumes (config.resume) from the pairs
in rows.csv, provided metadata.json records the same config.
"""

from __future__ import annotations

import json
import time

from absl import flags
from ml_collections import config_flags

from experiments import atlas_report, cli, common
from lagjax.analysis import horizons as horizons_lib
from lagjax.data import languages, regular

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/atlas", "Output folder.")


def main(argv):
  del argv
  experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=atlas_report.validate)
  config, workdir = experiment.config, experiment.workdir
  langs, settings = experiment.validated
  names = [atlas_report.language_name(spec) for spec in config.languages]
  star_free = {name: regular.is_star_free(lang) if isinstance(lang, languages.AutomatonLabels)
               else "n/a" for name, lang in zip(names, langs)}
  store = atlas_report.Store(workdir, common.json_of(config) if config.resume else None)
  pairs = [(spec, name, lang, layout) for spec, name, lang in zip(config.languages, names, langs)
           for layout in config.layouts]
  # Progress in (plan, dynamics) runs of the pairs; a resumed run starts at the pairs done.
  progress = experiment.progress("runs (plan × dynamics)")
  per_pair = len(config.plans) * len(config.dynamics)
  total = per_pair * len(pairs)
  timings = dict(store.seconds)
  progress(per_pair * sum(store.has(spec, layout) for spec, _, _, layout in pairs), total)
  for spec, name, lang, layout in pairs:
    if store.has(spec, layout):
      continue
    base = per_pair * sum(store.has(s, lay) for s, _, _, lay in pairs)
    found = horizons_lib.row(lang, layout, horizons=settings, plan_names=tuple(config.plans),
                             dynamics=tuple(config.dynamics),
                             progress=lambda done, _, base=base: progress(base + done, total))
    store.add(spec, name, layout, found, star_free[name])
    timings[f"{spec}/{layout}"] = round(found.seconds, 1)
    atlas_report.write(workdir, store, settings, config)
    experiment.write_metadata(
        seconds=round(time.time() - experiment.started, 1), pair_seconds=timings,
        pairs_finished=len(timings), pairs=len(pairs),
        horizons=json.loads(json.dumps(settings.__dict__, default=list)),
        languages={n: {"language": lang.describe(), "length_law": str(lang.length)}
                   for n, lang in zip(names, langs)})
  atlas_report.write(workdir, store, settings, config)
  print(f"wrote {workdir} in {time.time() - experiment.started:.0f} s", flush=True)


if __name__ == "__main__":
  cli.run(main)
