"""The atlas's files (experiments/atlas.py writes them; docs/theory.md §10): rows.csv and
curves.csv (the store a resumed run reads back), atlas.md (a verdict table first, then every
row), heatmap.png (excess risk over the certified optimum) and curves.png (R(t) and R(t) − R*
of joint gradient flow on log axes, plateaus and τ_ε marked).

Also the config's validation. No flags here, so tests (and other code) can import it beside
another binary's module (absl refuses a second definition of --config in one process).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from absl import logging

from experiments import common
from lagjax.analysis import automata, horizons, optimum
from lagjax.data import languages, regular
from lagjax.models import direct
from lagjax.sweep import chunk_store, processes

ROWS, CURVES, STAMP = "rows.csv", "curves.csv", "store.json"
# Several processes coordinate through the store's files (experiments/atlas.py): how often a
# waiting process looks, and how long one waits for process 0 to prepare the store.
POLL_SECONDS = 2.0
STAMP_TIMEOUT = 600.0


class Entry(NamedTuple):
  """One language of the run: its key in the store (the config's spec, or a census entry's
  name), its row name, the Language and whether it is star-free (True/False, "n/a")."""

  spec: str
  name: str
  lang: languages.Language
  star_free: object


def validate(config):
  """(entries, Horizons), or one line naming the bad field, before any compute.

  config.languages holds specs of lj.languages.from_spec, and census specs
  (lagjax.analysis.automata.expand): "census:Q", "census_sample:Q,size,seed" and
  "dfa:<rows>:<accepting>", each expanded into its entries.
  """
  for field, allowed in (("layouts", tuple(horizons.LAYOUTS)),
                         ("plans", horizons.PLAN_NAMES),
                         ("dynamics", horizons.DYNAMICS)):
    values = tuple(config[field])
    if not values:
      raise ValueError(f"config.{field} must name at least one of {', '.join(allowed)}.")
    for value in values:
      if value not in allowed:
        raise ValueError(f"config.{field}: unknown {field[:-1]} {value!r}; allowed: "
                         f"{', '.join(allowed)}.")
  try:
    settings = horizons.Horizons(**config.horizons.to_dict())
  except (ValueError, TypeError) as error:
    raise ValueError(f"config.{str(error).replace('horizons ', 'horizons.', 1)}") from error
  entries = []
  try:
    for spec in config.languages:
      census = automata.expand(spec)
      if census is None:
        lang = languages.from_spec(spec)
        star_free = (regular.is_star_free(lang) if isinstance(lang, languages.AutomatonLabels)
                     else "n/a")
        entries.append(Entry(spec, language_name(spec), lang, star_free))
      else:
        entries += [Entry(e.name, e.name, e.language(), e.star_free) for e in census]
  except (ValueError, TypeError) as error:
    raise ValueError(f"config.languages: {error}") from error
  if not entries:
    raise ValueError("config.languages must name at least one language.")
  return entries, settings


def language_name(spec: str) -> str:
  """The row name of a config.languages entry: 'tomita:3' -> 'tomita_3', an automaton file
  'path/to/mine.json' -> 'mine', a factory 'module:function' -> 'function'."""
  if spec.endswith(".json"):
    return os.path.splitext(os.path.basename(spec))[0]
  name, _, args = spec.partition(":")
  if name not in languages.LANGUAGES and args.isidentifier():
    return args
  return spec.replace(":", "_").replace(",", "_")


class Store:
  """The finished (language, layout) pairs: one chunk each in the sweep's resumable chunk
  store (lagjax/sweep/chunk_store.py, workdir/chunks), read back in pair order.

  Pair i is chunk i (group 0): its rows, flow curves, wall time and θ*, written atomically
  once the pair is finished, so a stopped run keeps every finished pair and several processes
  can each write their own pairs (experiments/atlas.py). `config_json` (the config as metadata
  records it) stamps the store (store.json); a store with another stamp, or None (no
  resume), is emptied first, by process 0 alone (`prepare`); the other processes wait for
  the stamp (`wait_for_stamp`) before they read the store.

  Args:
    workdir: the run's folder.
    pairs: the run's (spec, layout) pairs, in order.
  """

  def __init__(self, workdir: str, pairs: list[tuple[str, str]]):
    self.workdir = workdir
    self.pairs = list(pairs)
    self.chunks = chunk_store.ChunkStore(workdir)
    # index -> rows, curves, seconds, θ* of the pair's R* (lists)
    self.finished: dict[int, tuple[list, list, float, dict]] = {}
    self.reload()

  @property
  def rows(self) -> list[dict]:
    """The finished pairs' rows, in pair order."""
    return [row for i in sorted(self.finished) for row in self.finished[i][0]]

  @property
  def curves(self) -> list[dict]:
    """The finished pairs' flow curve points, in pair order."""
    return [point for i in sorted(self.finished) for point in self.finished[i][1]]

  @property
  def seconds(self) -> dict:
    """{"spec/layout": wall seconds} of the finished pairs."""
    return {"/".join(self.pairs[i]): self.finished[i][2] for i in sorted(self.finished)}

  @staticmethod
  def _stamp(config_json: str | None) -> str | None:
    return None if config_json is None else hashlib.sha256(config_json.encode()).hexdigest()

  @staticmethod
  def _stamped(workdir: str, stamp: str | None) -> bool:
    """Whether store.json holds `stamp` (never for None: a run without resume)."""
    try:
      with open(os.path.join(workdir, STAMP)) as f:
        return stamp is not None and json.load(f).get("config_sha256") == stamp
    except (OSError, ValueError):
      return False

  @staticmethod
  def prepare(workdir: str, config_json: str | None) -> None:
    """Empties the store unless store.json holds `config_json`'s stamp; records the stamp."""
    stamp = Store._stamp(config_json)
    stamp_path = os.path.join(workdir, STAMP)
    if not Store._stamped(workdir, stamp):
      shutil.rmtree(os.path.join(workdir, "chunks"), ignore_errors=True)
      for name in (ROWS, CURVES):
        if os.path.exists(os.path.join(workdir, name)):
          os.remove(os.path.join(workdir, name))
    with open(stamp_path, "w") as f:
      json.dump({"config_sha256": stamp}, f)

  def reload(self) -> None:
    """Reads every finished pair's chunk (those other processes wrote too)."""
    self.finished = {}
    for index in range(len(self.pairs)):
      if self.chunks.has(0, index):
        stored = self.chunks.load(0, index)
        self.finished[index] = (json.loads(str(stored["rows"])),
                                json.loads(str(stored["curves"])), float(stored["seconds"]),
                                # None: a chunk written before chunks stored θ*
                                json.loads(str(stored["theta"])) if "theta" in stored
                                else None)

  @staticmethod
  def wait_for_stamp(workdir: str, config_json: str, timeout: float = STAMP_TIMEOUT) -> None:
    """Blocks until store.json holds `config_json`'s stamp: process 0 has prepared the store
    (a store it resumes holds the stamp already), so it empties nothing this process writes.

    Raises:
      TimeoutError: when process 0 has not prepared the store within `timeout` seconds.
    """
    stamp, deadline = Store._stamp(config_json), time.monotonic() + timeout
    while not Store._stamped(workdir, stamp):
      if time.monotonic() > deadline:
        raise TimeoutError(f"process 0 did not prepare the store in {workdir} within "
                           f"{timeout:g} s; start it with the same --config and --workdir.")
      time.sleep(POLL_SECONDS)

  def share(self, process_index: int, process_count: int) -> list[int]:
    """The unfinished pairs process `process_index` of `process_count` computes: the sweep's
    split (`processes.my_chunks`) of every pair, those in the store left out. The split
    depends on the pairs alone, so the processes agree on it whenever each reads the store."""
    return [i for i in processes.my_chunks(len(self.pairs), process_index, process_count)
            if i not in self.finished]

  def wait_until_complete(self, progress: Callable, timeout: float) -> None:
    """Waits until every pair's chunk file exists (the other processes' shares), reporting
    progress(finished, pairs) at each change; `reload` then reads them.

    Raises:
      TimeoutError: when pairs are still missing after `timeout` seconds.
    """
    deadline, reported = time.monotonic() + timeout, None
    missing = [i for i in range(len(self.pairs)) if i not in self.finished]
    while True:
      missing = [i for i in missing if not self.chunks.has(0, i)]
      finished = len(self.pairs) - len(missing)
      if finished != reported:
        progress(finished, len(self.pairs))
        reported = finished
      if not missing:
        return
      if time.monotonic() > deadline:
        raise TimeoutError(f"{len(missing)} pairs were still missing after {timeout:g} s; "
                           "rerun the processes that stopped with the same command to resume.")
      time.sleep(POLL_SECONDS)

  def has(self, index: int) -> bool:
    """Whether pair `index` is finished (by this process, or found on disk at reload)."""
    return index in self.finished

  def r_star(self, index: int) -> tuple[float, float]:
    """(R*, its error) of finished pair `index`."""
    first = self.finished[index][0][0]
    return first["r_star"], first["r_star_error"]

  def theta(self, index: int) -> dict | None:
    """θ* of finished pair `index`'s R* (the row's optimum), as arrays; None where its chunk
    predates stored θ*."""
    stored = self.finished[index][3]
    return None if stored is None else {name: np.asarray(value)
                                        for name, value in stored.items()}

  def add(self, index: int, name: str, found: horizons.Row, star_free) -> None:
    """Stores finished pair `index` (shown as `name`: two specs may share a name, e.g. a file
    and a factory): its rows, its flow curves and its optimum's θ*, as JSON (floats
    round-trip exactly); a pair stored again replaces its chunk."""
    spec, layout = self.pairs[index]
    rows = [{"spec": spec, "name": name, "star_free": star_free,
             **{c: record[c] for c in horizons.COLUMNS}} for record in found.records]
    curves = [{"language": spec, "layout": layout, "plan": plan, "time": float(t),
               "risk": float(r)}
              for (plan, kind), (times, risks) in found.curves.items() if kind == "flow"
              for t, r in zip(times, risks)]
    theta = {key: np.asarray(value).tolist() for key, value in found.optimum.theta.items()}
    seconds = round(found.seconds, 1)
    self.chunks.save(0, index, {"rows": np.asarray(json.dumps(rows)),
                                "curves": np.asarray(json.dumps(curves)),
                                "seconds": np.asarray(seconds),
                                "theta": np.asarray(json.dumps(theta))})
    # As read back: JSON turns tuples into lists, and a resumed run sees only the JSON.
    self.finished[index] = (json.loads(json.dumps(rows)), json.loads(json.dumps(curves)),
                            seconds, json.loads(json.dumps(theta)))

  def write_csv(self) -> None:
    """rows.csv and curves.csv of the finished pairs, in pair order: the same bytes whatever
    the processes that computed them (wall times live in metadata.json)."""
    for rows, path in ((self.rows, ROWS), (self.curves, CURVES)):
      if rows:
        common.write_csv(rows, os.path.join(self.workdir, path))


def nest(store, pairs, settings, config) -> list[int]:
  """Computes again each pair whose R* lies above the R* of a layout of the run that its
  layout contains (docs/theory.md §2b, §10), and returns their indices.

  horizons.Optima restarts each optimum from the contained layouts' optima, but a row can then
  lower its own R* by a restart from a run's end (horizons.row), which the layouts containing
  it never saw. Here, once every pair is in the store, such a pair's optimum is restarted from
  the contained pairs' θ*, widened (horizons.lower_optimum), and its row computed again
  against it. Contained layouts go first, so a pair computed again reaches the layouts that
  contain it. The pass reads only the store's rows, so the files do not depend on how many
  processes wrote them, and a pass over its own result computes nothing.
  """
  layouts = tuple(config.layouts)
  contains = {layout: [other for other in layouts if other != layout and
                       horizons.LAYOUTS[layout].contains(horizons.LAYOUTS[other])]
              for layout in layouts}
  where = {(entry.spec, layout): i for i, (entry, layout) in enumerate(pairs)}
  again = []
  for i in sorted(range(len(pairs)), key=lambda i: len(contains[pairs[i][1]])):
    entry, layout = pairs[i]
    r_star, error = store.r_star(i)
    slack = max(error, optimum.NOISE * max(1.0, abs(r_star)))
    thetas = {other: store.theta(where[entry.spec, other]) for other in contains[layout]
              if store.r_star(where[entry.spec, other])[0] < r_star - slack}
    unknown = [other for other, theta in thetas.items() if theta is None]
    if unknown:
      logging.warning("%s under %s: R* %.9g is above the %s rows', whose θ* the store does not "
                      "hold (chunks from before θ* was stored); rerun without resume to mend.",
                      entry.spec, layout, r_star, ", ".join(unknown))
    lower = [other for other, theta in thetas.items() if theta is not None]
    starts = [direct.widen(thetas[other], horizons.LAYOUTS[layout]) for other in lower]
    started = time.perf_counter()
    found = horizons.lower_optimum(
        entry.lang, layout, r_star, starts, settings,
        f"restarted from the {', '.join(lower)} rows' optima")
    if found is None:
      continue
    logging.info("%s under %s: R* %.9g is above the %s rows'; computing the pair again against "
                 "%.9g.", entry.spec, layout, r_star, ", ".join(lower), float(found.risk))
    store.add(i, entry.name, since(horizons.row(
        entry.lang, layout, horizons=settings, found=found, plan_names=tuple(config.plans),
        dynamics=tuple(config.dynamics)), started), entry.star_free)
    again.append(i)
  return again


def since(row: horizons.Row, started: float) -> horizons.Row:
  """`row` with its seconds counted from `started` (a time.perf_counter() reading): a pair's
  wall time, the R* it was given included. horizons.row given R* times its runs only, and
  the binary computes R* before the row (horizons.Optima; the nesting pass's restart), so
  without this a pair's time left out lj.optimum, about half of it. An optimum computed for a
  contained layout counts in the pair whose call computed it."""
  return dataclasses.replace(row, seconds=time.perf_counter() - started)


def _cell(value) -> str:
  if isinstance(value, bool):
    return "yes" if value else "no"
  if isinstance(value, float):
    return f"{value:.4g}"
  return str(value)


def verdicts(rows: list[dict]) -> list[dict]:
  """One line per (language, layout): R*, the plans that learned under each dynamics, and
  joint flow's τ_ε, half-time ratio, plateau and tail (docs/theory.md §10)."""
  lines = []
  pairs = list(dict.fromkeys((row["name"], row["layout"]) for row in rows))
  for name, layout in pairs:
    mine = [row for row in rows if row["name"] == name and row["layout"] == layout]
    first = mine[0]
    line = {"language": name, "star_free": _cell(first["star_free"]), "layout": layout,
            "R*": f"{first['r_star']:.6g} ({first['optimum']})"}
    for kind in horizons.DYNAMICS:
      learned = [row["plan"] for row in mine if row["dynamics"] == kind and row["learned"]]
      line[f"learned ({kind})"] = ", ".join(learned) or "none"
    joint = next((row for row in mine if row["plan"] == "joint" and row["dynamics"] == "flow"),
                 None)
    if joint is not None:
      line["joint flow τ_ε"] = _cell(joint["tau_eps"])
      ratio = joint["half_time_ratio"]
      line["t_α/t_β"] = (_cell(ratio) + (" (attention lags)" if ratio > 1 else "")
                         if isinstance(ratio, float) else ratio)
      plateau = joint["plateau_level"]
      left = joint["plateau_exit"]
      left = f"left at t = {left:.4g}" if isinstance(left, float) else left
      line["plateau"] = ("none" if isinstance(plateau, str) else
                         f"{plateau:.4g}, {left}; {joint['plateau_saddle']} "
                         f"(λ = {_cell(joint['plateau_lambda'])})")
      line["tail"] = joint["tail"]
    lines.append(line)
  return lines


LEGEND = """Columns of the full rows (docs/theory.md §10). R* (`r_star`): lj.optimum's value, the \
certified minimum or, for "infimum at infinity", the limit of R along the ray; `optimum`, \
`grad_norm`, `min_eigenvalue`, `agreeing_starts`: its certificate. `etas`: GD's chosen step \
sizes (η; attention_first η2/η3; three_phase η_out/η2) and whether the grid was extended; \
"rate 1" for the flow. `excess` = final risk − R*; `learned`: excess ≤ ε. The plateau: the \
first record t ≥ 1 with excess > ε where R falls by at most 1 % over the next decade; \
`plateau_exit`: the first record whose excess is at most half the plateau's (the record \
grid: 20 per decade for the flow, every step for GD); `plateau_saddle`, `plateau_lambda`: the \
exact Hessian's verdict and most negative eigenvalue at the critical point Newton finds from \
the plateau's point (saddles.saddle). `tau_eps`: the first time (flow) or recorded step (GD) \
with R ≤ R* + ε; `half_time_*`: when attention and output first made half their move up to \
τ_ε, `half_time_ratio` = attention/output (> 1: attention lags). `tail`: R − R* ~ t^(−a) \
on the tail window (tails.fit_tail), or why there is no power-law tail. `regime`: the GD run's \
label (run_label, from its risk curve alone). A cell without a number says why."""


def write(workdir: str, store: Store, settings: horizons.Horizons, config) -> None:
  """rows.csv, curves.csv, atlas.md, heatmap.png and curves.png from the store's rows (the
  pairs finished so far); census.md and census.png when census languages are among them."""
  if not store.rows:
    return
  store.write_csv()
  heatmap(store.rows, os.path.join(workdir, "heatmap.png"))
  figure_curves(store, os.path.join(workdir, "curves.png"), settings.epsilon)
  h = settings
  with open(os.path.join(workdir, "atlas.md"), "w") as f:
    f.write("# Atlas of regular languages, second edition\n\n")
    f.write(f"Written by `{common.command_as_typed()}`. From θ0 = 0, every plan under "
            f"gradient flow (Rodas5P, rtol {h.rtol:g}, atol {h.atol:g}) to t = {h.t1:g} "
            f"(three_phase: output for {h.settle:g}, attention for {h.attention:g}, then "
            f"output; attention_first: attention for {h.attention:g}, then output) and under "
            f"GD for {h.gd_steps} steps on the grids η ∈ {h.gd_grid}, η2 ∈ "
            f"{h.gd_attention_grid}, extended at a chosen edge within {h.gd_cap}. R* from "
            f"lj.optimum ({h.optimum_starts} starts, {h.optimum_iterations} L-BFGS "
            f"iterations, then Newton). Learned: R − R* ≤ ε = {h.epsilon:g}. "
            f"{len(store.seconds)} (language, layout) pairs, "
            f"{sum(store.seconds.values()):.0f} s of compute. Figures: heatmap.png (excess "
            "risk), curves.png (R(t) and R(t) − R* of joint gradient flow).\n\n")
    f.write("## Verdicts\n\n" + common.markdown_table(verdicts(store.rows)) + "\n")
    f.write("## All rows\n\n" + LEGEND + "\n\n")
    columns = ["name", "star_free"] + [c for c in horizons.COLUMNS if c != "language"]
    f.write(common.markdown_table([{c: _cell(row[c]) for c in columns} for row in store.rows]))
  if any(is_census(row) for row in store.rows):
    write_census(workdir, store.rows,
                 f"Written by `{common.command_as_typed()}`, from the rows of atlas.md (the same "
                 f"horizons: flow to t = {h.t1:g}, GD for {h.gd_steps} steps, ε = "
                 f"{h.epsilon:g}). Languages: {', '.join(config.languages)} (census "
                 "classes up to renaming and complement, on the strings of length ≥ 1; "
                 "docs/theory.md §10a).")


def is_census(row: dict) -> bool:
  """Whether a row's language came from a census spec (automata.expand)."""
  return str(row["spec"]).startswith("dfa:")


def _fraction(hits: int, total: int) -> str:
  return f"{hits}/{total} ({hits / total:.0%})" if total else "none"


def census_tables(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
  """The census's three tables (docs/theory.md §10a) from the census rows: per (layout, plan,
  dynamics) the fraction learned from zero, split into star-free and not; the fraction where
  attention lags (half-time ratio > 1, among the runs that learned and moved both groups);
  and per (layout, dynamics) the languages where joint learns and three_phase does not, or
  the reverse."""
  census = [row for row in rows if is_census(row)]
  keys = list(dict.fromkeys((r["layout"], r["plan"], r["dynamics"]) for r in census))
  learned, lags = [], []
  for layout, plan, kind in keys:
    mine = [r for r in census if (r["layout"], r["plan"], r["dynamics"]) == (layout, plan, kind)]
    line = {"layout": layout, "plan": plan, "dynamics": kind,
            "learned": _fraction(sum(r["learned"] for r in mine), len(mine))}
    for label, flag in (("star-free", True), ("not star-free", False)):
      part = [r for r in mine if r["star_free"] is flag]
      line[label] = _fraction(sum(r["learned"] for r in part), len(part))
    learned.append(line)
    ratios = [r["half_time_ratio"] for r in mine if isinstance(r["half_time_ratio"], float)]
    lags.append({"layout": layout, "plan": plan, "dynamics": kind,
                 "attention lags (ratio > 1)": _fraction(sum(x > 1 for x in ratios),
                                                          len(ratios))})
  differ = []
  for layout, kind in dict.fromkeys((r["layout"], r["dynamics"]) for r in census):
    mine = [r for r in census if (r["layout"], r["dynamics"]) == (layout, kind)]
    joint, three = ({r["name"]: r["learned"] for r in mine if r["plan"] == plan}
                    for plan in ("joint", "three_phase"))
    names = [n for n in joint if n in three]
    differ.append({"layout": layout, "dynamics": kind,
                   "joint learns, three_phase not": ", ".join(
                       n for n in names if joint[n] and not three[n]) or "none",
                   "three_phase learns, joint not": ", ".join(
                       n for n in names if three[n] and not joint[n]) or "none"})
  return learned, lags, differ


def write_census(workdir: str, rows: list[dict], header: str) -> None:
  """census.md (the three census tables) and census.png (the learned fractions)."""
  learned, lags, differ = census_tables(rows)
  with open(os.path.join(workdir, "census.md"), "w") as f:
    f.write("# Census of small binary automata\n\n" + header + "\n\n")
    f.write("## Learned from θ0 = 0 (excess over R* ≤ ε)\n\n" + common.markdown_table(learned)
            + "\n## Attention lags\n\n" + common.markdown_table(lags)
            + "\n## Joint against three_phase\n\n" + common.markdown_table(differ))
  census = [row for row in rows if is_census(row)]
  plt = common.pyplot()
  kinds, layouts, plans = (list(dict.fromkeys(r[key] for r in census))
                           for key in ("dynamics", "layout", "plan"))
  fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 3.6), squeeze=False,
                           sharey=True)
  width = 0.8 / len(layouts)

  def share(kind, layout, plan, star_free=None):
    learned = [r["learned"] for r in census
               if (r["dynamics"], r["layout"], r["plan"]) == (kind, layout, plan)
               and (star_free is None or r["star_free"] is star_free)]
    return np.mean(learned) if learned else np.nan

  for ax, kind in zip(axes[0], kinds):
    for k, layout in enumerate(layouts):
      x = np.arange(len(plans)) + k * width
      ax.bar(x, [share(kind, layout, p) for p in plans], width, label=layout)
      for flag, marker in ((True, "o"), (False, "x")):
        ax.plot(x, [share(kind, layout, p, flag) for p in plans], marker, color="k", ms=4)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xticks(np.arange(len(plans)) + 0.4 - width / 2,
                  [p.replace("_", " ") for p in plans], fontsize=7)
    ax.set_title(f"{kind}: fraction learned (o star-free, x not)", fontsize=9)
  axes[0][0].set_ylabel("fraction of census languages")
  common.save_figure(fig, os.path.join(workdir, "census.png"), legend=axes[0][-1])


def heatmap(rows: list[dict], path: str) -> str:
  """Languages × (plan, dynamics) per layout, coloured by log10 of the excess risk over the
  certified optimum (clipped to [1e-8, 1]); * = star-free, a dot marks a learned cell."""
  plt = common.pyplot()
  layouts = list(dict.fromkeys(row["layout"] for row in rows))
  names = list(dict.fromkeys(row["name"] for row in rows))
  columns = [(plan, kind) for plan in horizons.PLAN_NAMES for kind in horizons.DYNAMICS
             if any(r["plan"] == plan and r["dynamics"] == kind for r in rows)]
  fig, axes = plt.subplots(1, len(layouts), figsize=(0.5 * len(columns) * len(layouts) + 2,
                                                     0.32 * len(names) + 2.2),
                           sharey=True, squeeze=False)
  star = {row["name"]: row["star_free"] is True for row in rows}
  image = None
  for ax, layout in zip(axes[0], layouts):
    grid = np.full((len(names), len(columns)), np.nan)
    for row in rows:
      if row["layout"] == layout:
        i, j = names.index(row["name"]), columns.index((row["plan"], row["dynamics"]))
        grid[i, j] = np.log10(np.clip(row["excess"], 1e-8, 1.0))
        if row["learned"]:
          ax.plot(j, i, "w.", ms=3)
    image = ax.imshow(grid, vmin=-8, vmax=0, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(columns)), [f"{p.replace('_', ' ')}\n{k}" for p, k in columns],
                  fontsize=6, rotation=90)
    ax.set_yticks(range(len(names)), [f"{n}{' *' if star[n] else ''}" for n in names],
                  fontsize=7)
    ax.set_title(layout, fontsize=9)
  fig.colorbar(image, ax=axes[0].tolist(), label="log10 (R_final − R*) (dot: learned)")
  fig.suptitle("Excess risk over the certified optimum, from θ0 = 0 (* = star-free)",
               fontsize=10)
  fig.savefig(path, dpi=130, bbox_inches="tight")
  plt.close(fig)
  return path


def figure_curves(store: Store, path: str, epsilon: float) -> str:
  """Joint gradient flow per layout (one column each) on log axes, one line per language: R(t)
  on the top row and the excess R(t) − R* over the certified optimum on the bottom row (where
  the curves near R* ≈ 0.4 separate). A circle marks the plateau's start, a square where it is
  left, a cross τ_ε; the dashed line is ε. Excess at or below roundoff (NOISE) is not drawn."""
  plt = common.pyplot()
  layouts = list(dict.fromkeys(row["layout"] for row in store.rows))
  names = list(dict.fromkeys(row["name"] for row in store.rows))
  colors = plt.get_cmap("tab20")(np.linspace(0.0, 1.0, 20))
  color_of = {name: colors[i % 20] for i, name in enumerate(names)}
  fig, axes = plt.subplots(2, len(layouts), figsize=(4.2 * len(layouts), 7.0), sharex=True,
                           sharey="row", squeeze=False)
  for column, layout in enumerate(layouts):
    top, bottom = axes[0][column], axes[1][column]
    for row in store.rows:
      if row["layout"] != layout or row["plan"] != "joint" or row["dynamics"] != "flow":
        continue
      points = [(c["time"], c["risk"]) for c in store.curves
                if c["language"] == row["spec"] and c["layout"] == layout and c["plan"] == "joint"
                and c["time"] > 0]
      if not points:
        continue
      t, r = map(np.asarray, zip(*points))
      excess = r - row["r_star"]
      shown = excess > optimum.NOISE
      color = color_of[row["name"]]
      top.loglog(t, r, lw=1, color=color, label=row["name"])
      bottom.loglog(t[shown], excess[shown], lw=1, color=color)
      marks = []
      if isinstance(row["plateau_level"], float):
        marks.append(("o", t[np.argmin(np.abs(r - row["plateau_level"]))]))
        if isinstance(row["plateau_exit"], float):
          marks.append(("s", row["plateau_exit"]))
      if isinstance(row["tau_eps"], float):
        marks.append(("x", row["tau_eps"]))
      for marker, when in marks:
        level = np.interp(np.log(when), np.log(t), r)
        for ax, value in ((top, level), (bottom, level - row["r_star"])):
          if value > optimum.NOISE:
            ax.plot(when, value, marker, color=color, ms=4, mfc="none")
    bottom.axhline(epsilon, color="0.5", lw=0.8, ls="--")
    bottom.set_xlabel("t (time units)")
    top.set_title(f"joint gradient flow, {layout}", fontsize=9)
  axes[0][0].set_ylabel("R(t)")
  axes[1][0].set_ylabel("R(t) − R*")
  axes[0][-1].legend(fontsize=6, ncol=2)
  fig.suptitle("Joint gradient flow from θ0 = 0: o plateau, □ plateau left, × τ_ε, "
               "- - ε", fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=130)
  plt.close(fig)
  return path
