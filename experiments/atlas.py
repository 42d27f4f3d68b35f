"""The atlas of regular languages, second edition: what one attention layer learns from θ0 = 0
under gradient flow to t = 10⁶ and under GD at bracketed step sizes, against certified optima
(docs/theory.md §10).

  python -m experiments.atlas --config experiments/configs/atlas.py --workdir docs/results/atlas
  python -m experiments.atlas --config experiments/configs/atlas.py:quick --workdir /tmp/atlas

One row per (language, layout, plan, dynamics) by lagjax.analysis.horizons.row, one (language,
layout) at a time. Each finished (language, layout) is one chunk of the sweep's resumable
store (workdir/chunks, lagjax/sweep/chunk_store.py); from the chunks the binary writes
rows.csv, curves.csv, atlas.md, heatmap.png and curves.png (experiments/atlas_report.py), and
census.md and census.png for census languages (experiments/configs/census.py). A run stopped
part-way resumes (config.resume) from the finished chunks, provided store.json records the
same config. With --coordinator, --num_processes and --process_id (experiments/distributed.py)
process p of P computes every P-th of the pairs not yet finished and process 0 writes the
files after all have finished: the same bytes as one process (the wall times are in
metadata.json only).
"""

from __future__ import annotations

import json
import time

import jax
from absl import flags
from ml_collections import config_flags

from experiments import atlas_report, cli, common, distributed
from lagjax.analysis import horizons as horizons_lib
from lagjax.sweep import processes

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/atlas", "Output folder.")


def main(argv):
  del argv
  experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=atlas_report.validate,
                            initialize=distributed.initialize)
  config, workdir = experiment.config, experiment.workdir
  entries, settings = experiment.validated
  index, count = jax.process_index(), jax.process_count()
  pairs = [(entry, layout) for entry in entries for layout in config.layouts]
  if index == 0:
    atlas_report.Store.prepare(workdir, common.json_of(config) if config.resume else None)
  processes.wait_for_processes(count)
  store = atlas_report.Store(workdir, [(entry.spec, layout) for entry, layout in pairs])
  # Process p of P computes every P-th pair not yet in the store (Store.share); every process
  # has read the store before any writes to it. Progress counts (plan, dynamics) runs of this
  # process's share.
  mine = store.share(index, count)
  processes.wait_for_processes(count)
  progress = experiment.progress("runs (plan × dynamics)")
  per_pair = len(config.plans) * len(config.dynamics)
  total = per_pair * len(mine)
  progress(0, total)
  for pairs_done, i in enumerate(mine):
    entry, layout = pairs[i]
    base = per_pair * pairs_done
    found = horizons_lib.row(entry.lang, layout, horizons=settings,
                             plan_names=tuple(config.plans), dynamics=tuple(config.dynamics),
                             progress=lambda done, _, base=base: progress(base + done, total))
    store.add(i, entry.name, found, entry.star_free)
    # Each pair traces its own programs (languages of one size load the same executables from
    # the persistent cache: docs/decisions/shared-programs.md); kept, they pile up until the
    # process runs out of memory maps (vm.max_map_count: a census process died of it after 20
    # pairs, "LLVM ERROR: Unable to allocate section memory"). Freed here, as the test suite
    # does between files (tests/conftest.py).
    jax.clear_caches()
    if count == 1:  # a single process keeps the outputs current after every pair
      write_outputs(experiment, store, settings, entries, len(pairs))
  # A census's shares may take hours: wait as long as a day for the others to finish.
  processes.wait_for_processes(count, timeout=86400.0)
  if index == 0:
    store.reload()
    write_outputs(experiment, store, settings, entries, len(pairs))
    print(f"wrote {workdir} in {time.time() - experiment.started:.0f} s", flush=True)


def write_outputs(experiment, store, settings, entries, num_pairs: int) -> None:
  """The report files (atlas_report.write) and metadata.json, with every pair's wall time."""
  atlas_report.write(experiment.workdir, store, settings, experiment.config)
  experiment.write_metadata(
      seconds=round(time.time() - experiment.started, 1), pair_seconds=store.seconds,
      pairs_finished=len(store.seconds), pairs=num_pairs, process_count=jax.process_count(),
      horizons=json.loads(json.dumps(settings.__dict__, default=list)),
      languages={entry.name: {"language": entry.lang.describe(),
                              "length_law": str(entry.lang.length)} for entry in entries})


if __name__ == "__main__":
  cli.run(main)
