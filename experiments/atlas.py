"""The atlas of regular languages, second edition: what one attention layer learns from θ0 = 0
under gradient flow to t = 10⁶ and under GD at bracketed step sizes, against certified optima
(docs/theory.md §10).

  python -m experiments.atlas --config experiments/configs/atlas.py --workdir docs/results/atlas
  python -m experiments.atlas --config experiments/configs/atlas.py:quick --workdir /tmp/atlas

One row per (language, layout, plan, dynamics) by lagjax.analysis.horizons.row, one (language,
layout) at a time, against R* restarted from the optima of the run's layouts that the layout
contains (horizons.Optima: the last query contains the CLS query, tables their absence), and
from a run's end where one ends below it (horizons.row); once every pair is finished, a
pair whose R* is above a contained layout's is computed again (atlas_report.nest). Each
finished (language, layout) is one chunk of the sweep's resumable store (workdir/chunks,
lagjax/sweep/chunk_store.py); from the chunks the binary writes rows.csv, curves.csv,
atlas.md, heatmap.png and curves.png (experiments/atlas_report.py), and census.md and
census.png for census languages (experiments/configs/census.py). A run stopped part-way
resumes (config.resume) from the finished chunks, provided store.json records the
same config. With --num_processes=P and --process_id=p (experiments/distributed.py's flags),
process p of P computes the pairs i ≡ p (mod P) not yet finished, and process 0 writes the
files once every pair is in the store: the same bytes as one process (the wall times are in
metadata.json only). The processes are independent JAX processes that meet only in the
store's files (process 0 prepares it, the others wait for its stamp), not a jax.distributed
run: so each compiles on its device 0 and shares the persistent compilation cache, which JAX
writes from process 0 of a jax.distributed run only (docs/decisions/shared-programs.md).
Start them on one host, or on hosts that share the workdir.
"""

from __future__ import annotations

import json
import time

from absl import app, flags
from ml_collections import config_flags

from experiments import atlas_report, cli, common, distributed
from lagjax.analysis import horizons as horizons_lib

_CONFIG = config_flags.DEFINE_config_file("config")
_WORKDIR = flags.DEFINE_string("workdir", "runs/atlas", "Output folder.")


# A census's shares may take hours: process 0 waits as long as a day for the others.
WAIT_SECONDS = 86400.0


def process_flags(config) -> tuple[int, int]:
  """(p, P) from --process_id and --num_processes, or one line naming the bad flag."""
  if distributed.COORDINATOR.value:
    raise app.UsageError("--coordinator: the atlas's processes meet in the store in --workdir, "
                         "not in jax.distributed; start each with --num_processes=P and "
                         "--process_id=p only.")
  index, count = distributed.PROCESS_ID.value, distributed.NUM_PROCESSES.value
  if count < 1:
    raise app.UsageError(f"--num_processes must be an integer >= 1; got {count}.")
  if not 0 <= index < count:
    raise app.UsageError(f"--process_id must be in 0..{count - 1}; got {index}.")
  if count > 1 and not config.resume:
    raise app.UsageError("config.resume must be True with --num_processes > 1: the processes "
                         "share one store, which a run without resume empties.")
  return index, count


def waited(wait, *args) -> None:
  """wait(*args); a TimeoutError (another process did not come) ends the run in one line."""
  try:
    wait(*args)
  except TimeoutError as error:
    cli.fail(str(error), status=1)


def main(argv):
  del argv
  index, count = process_flags(_CONFIG.value)
  experiment = common.start(_CONFIG.value, _WORKDIR.value, validate=atlas_report.validate)
  config, workdir = experiment.config, experiment.workdir
  entries, settings = experiment.validated
  pairs = [(entry, layout) for entry in entries for layout in config.layouts]
  config_json = common.json_of(config) if config.resume else None
  if index == 0:
    atlas_report.Store.prepare(workdir, config_json)
  else:
    waited(atlas_report.Store.wait_for_stamp, workdir, config_json)
  store = atlas_report.Store(workdir, [(entry.spec, layout) for entry, layout in pairs])
  # Progress counts (plan, dynamics) runs of this process's share.
  mine = store.share(index, count)
  progress = experiment.progress("runs (plan × dynamics)")
  per_pair = len(config.plans) * len(config.dynamics)
  total = per_pair * len(mine)
  progress(0, total)
  prior = horizons_lib.Optima(settings, tuple(config.layouts))
  for pairs_done, i in enumerate(mine):
    entry, layout = pairs[i]
    base = per_pair * pairs_done
    started = time.perf_counter()
    found = horizons_lib.row(entry.lang, layout, horizons=settings,
                             found=prior(entry.spec, entry.lang, layout),
                             plan_names=tuple(config.plans), dynamics=tuple(config.dynamics),
                             progress=lambda done, _, base=base: progress(base + done, total))
    store.add(i, entry.name, atlas_report.since(found, started), entry.star_free)
    common.release_programs()
    if count == 1:  # a single process keeps the outputs current after every pair
      write_outputs(experiment, store, settings, entries, len(pairs), count)
  if index == 0:
    if count > 1:
      waited(store.wait_until_complete, experiment.progress("pairs (every process)"),
             WAIT_SECONDS)
    store.reload()
    atlas_report.nest(store, pairs, settings, config)
    write_outputs(experiment, store, settings, entries, len(pairs), count)
    print(f"wrote {workdir} in {time.time() - experiment.started:.0f} s", flush=True)


def write_outputs(experiment, store, settings, entries, num_pairs: int,
                  process_count: int) -> None:
  """The report files (atlas_report.write) and metadata.json, with every pair's wall time."""
  atlas_report.write(experiment.workdir, store, settings, experiment.config)
  experiment.write_metadata(
      seconds=round(time.time() - experiment.started, 1), pair_seconds=store.seconds,
      pairs_finished=len(store.seconds), pairs=num_pairs, process_count=process_count,
      horizons=json.loads(json.dumps(settings.__dict__, default=list)),
      languages={entry.name: {"language": entry.lang.describe(),
                              "length_law": str(entry.lang.length)} for entry in entries})


if __name__ == "__main__":
  cli.run(main)
