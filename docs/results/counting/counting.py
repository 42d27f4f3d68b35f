"""The counting languages in the atlas (issue 37 item 4; docs/theory.md §1d, §3e, §3g, §10).

  python docs/results/counting/counting.py            # the committed run: counting.md/.csv/.png
  python docs/results/counting/counting.py --quick    # short horizon: counting_quick.csv

For each counting language (majority, Dyck-1, aⁿbⁿ; plurality(0, 3) with --languages) and
each of the atlas's four layouts of the direct model (§2b): the certified optimum R* of
lj.optimum (§3e) and every plan of the atlas (§5: joint, output_only, attention_only,
attention_first, three_phase) run from θ0 = 0 by exact population GD on the count route
(§3g) for `--steps` steps, at the best point of a small step-size grid (the chosen η is
marked "edge" where it is an end of its grid). A row records the final risk, the excess
over R*, learned (excess ≤ 1e-3), τ_ε (the first recorded step with R ≤ R* + 1e-3) and
joint-style half-times of attention and output up to τ_ε with their ratio (§6b).

Why not experiments/atlas.py: the atlas binary stacks automata (AutomatonLabels) and its
60-step horizon and 2-start best risk are too short (issue 38). The plans here are the
atlas's (lagjax.analysis.atlas: the same slots and phase layout, run by the same training
loop, runner.make_loop), with the count route's risk in place of the transfer route's.

Class weights: Dyck-1 and aⁿbⁿ take the balanced risk ½E[ℓ | y = +1] + ½E[ℓ | y = -1]
(default_class_weights(), §1d), majority and plurality the population risk. lj.optimum and
lj.train pass no route options, so the balanced risk reaches them as the loss
ℓ_w(f, y) = w_y·½(f - y)², w± = ½/P(y = ±1), which the count route sums with the same
weights as class_weights="balanced" (checked below at every optimum, to 1e-12).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import lagjax as lj  # noqa: E402
from lagjax import models  # noqa: E402
from lagjax.analysis import atlas  # noqa: E402
from lagjax.data import languages  # noqa: E402
from lagjax.data import partition as partition_lib  # noqa: E402
from lagjax.dynamics import metrics, plans, runner  # noqa: E402
from lagjax.models import direct  # noqa: E402
from lagjax.risk import count as count_lib  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
LANGUAGES = ("majority", "dyck1", "anbn")
LAYOUTS = ("cls", "last", "cls+first_last", "last+first_last")   # cheapest first
# A run learned when R(T) - R* <= LEARNED; τ_ε is the first time R <= R* + LEARNED.
LEARNED = 1e-3
JOINT_GRID = (1.0, 2.0, 4.0)
OUTPUT_GRID = (1.0, 2.0, 4.0)
ATTENTION_STEP_GRID = (1.0, 10.0, 100.0)   # three_phase's single attention step η2
FULL = {"steps": 1000, "records": 48, "starts": 2, "iterations": 40, "newton_steps": 6}
QUICK = {"steps": 40, "records": 8, "starts": 2, "iterations": 20, "newton_steps": 4}
COLUMNS = ("language", "layout", "class_weights", "plan", "etas", "eta_at_edge", "steps",
           "final_risk", "optimum_risk", "optimum_status", "optimum_error", "excess", "learned",
           "tau_eps", "half_time_alpha", "half_time_beta", "half_time_ratio", "risk_at_zero",
           "final_error", "optimum_error_rate")


class WeightedSquared:
  """ℓ_w(f, y) = w_y·½(f - y)²: the squared loss with class weights (w₊, w₋), hashable so the
  engines' compile caches take it."""

  def __init__(self, positive: float, negative: float):
    self.positive, self.negative = float(positive), float(negative)

  def __call__(self, f, y):
    return jnp.where(y > 0, self.positive, self.negative) * 0.5 * (f - y) ** 2

  def __hash__(self):
    return hash((WeightedSquared, self.positive, self.negative))

  def __eq__(self, other):
    return isinstance(other, WeightedSquared) and (other.positive, other.negative) == (
        self.positive, self.negative)


def class_weights(lang) -> str:
  return getattr(lang, "default_class_weights", lambda: "population")()


def objective_loss(lang, default_route_balanced: bool | None = None):
  """The loss that gives lang's default-weighted risk through a route with the count route's
  *default* class weights: "squared" where those already are the language's, else
  WeightedSquared. The route's default is read, not assumed: at β = 1 everywhere f ≡ 1, and
  the population risk is 1 - E y while the balanced one is 1."""
  if class_weights(lang) == "population":
    return "squared"
  if default_route_balanced is None:
    ones = direct.zero_params(lang.d) | {"beta": jnp.ones(lang.d)}
    value = float(lj.risk_fn(lang, route="count").risk(ones))
    default_route_balanced = abs(value - 1.0) < 1e-9
  if default_route_balanced:
    return "squared"
  positive = float(lang.positive_rate())
  return WeightedSquared(0.5 / positive, 0.5 / (1.0 - positive))


def risk_route(lang, layout_name: str):
  """The count route with lang's default class weights, given explicitly (§3g)."""
  layout = atlas.LAYOUTS[layout_name]
  return lj.risk_fn(lang, route="count", class_weights=class_weights(lang), **layout._asdict())


def information_floor(lang, layout_name: str) -> float:
  """The least risk of ANY function of what the layout reads (docs/theory.md §3g): of the
  counts c (CLS query, no tables), (c, last token) (last query), (c, first, last) (position
  tables). Per row of the count route's enumeration with weighted label masses P, N the best
  f = (P - N)/(P + N) costs ½[P(f - 1)² + N(f + 1)²] = 2PN/(P + N). The one-layer model is
  one such function, so R* ≥ this floor; the gap is the model's, not the information's."""
  layout = atlas.LAYOUTS[layout_name]
  enum = count_lib.enumeration(lang, partition_lib.singletons(lang.d), lang.length,
                               lang.pi_array, 1e-12, layout)
  positive, negative = np.asarray(enum.positive), np.asarray(enum.negative)
  if class_weights(lang) == "balanced":
    rate = float(lang.positive_rate())
    positive, negative = positive * 0.5 / rate, negative * 0.5 / (1.0 - rate)
  total = positive + negative
  return float(np.sum(np.where(total > 0, 2 * positive * negative / np.where(total > 0, total,
                                                                            1.0), 0.0)))


def plan_entries(steps: int):
  """[(plan name, step sizes, Plan)]: the atlas's plans (lagjax/analysis/atlas.py plan_grid:
  three_phase is steps // 2 output steps, one attention step, the rest output; attention_first
  one attention step, the rest output) on this script's grids."""
  entries = []
  for eta in JOINT_GRID:
    entries.append(("joint", (eta,), plans.joint(eta, steps)))
  for eta in OUTPUT_GRID:
    entries.append(("output_only", (eta,), plans.output_only(eta, steps)))
  entries.append(("attention_only", (1.0,), plans.attention_only(1.0, steps)))
  for eta in OUTPUT_GRID[:2]:
    entries.append(("attention_first", (1.0, eta), plans.attention_first(1.0, eta, steps - 1)))
  for eta2 in ATTENTION_STEP_GRID:
    entries.append(("three_phase", (1.0, eta2, 1.0),
                    plans.three_phase(1.0, eta2, 1.0, steps - steps // 2 - 1, steps1=steps // 2)))
  return entries


def train_all(lang, layout_name: str, steps: int, records: int):
  """Every plan entry from θ0 = 0, vmapped through the one training loop (runner.make_loop,
  as lagjax/analysis/atlas.py runs it). Returns (entries, record steps, records, diverged)."""
  layout = atlas.LAYOUTS[layout_name]
  route = risk_route(lang, layout_name)
  entries = plan_entries(steps)
  data = jax.tree_util.tree_map(lambda *leaves: jnp.stack(leaves),
                                *[plan.data(num_slots=len(atlas.SLOTS)) for _, _, plan in entries])
  grid = runner.record_grid(steps, records)
  value_and_grad = jax.value_and_grad(route.risk)

  def record(params):
    return {"risk": route.risk(params), "alpha": direct.attention_vector(params),
            "beta": direct.output_vector(params)}

  labels = lambda params: models.group_labels(direct.PARAM_GROUPS, params)  # noqa: E731
  loop = runner.make_loop(atlas.SLOTS, labels,
                          lambda key: (lambda params, t, phase: value_and_grad(params)),
                          record, num_steps=steps, record_steps=grid)
  zero = direct.zero_params(lang.d, layout)
  trace = jax.jit(jax.vmap(lambda plan_data: loop(zero, jax.random.key(0), plan_data)))(data)
  trace = jax.block_until_ready(trace)
  return entries, grid, trace


def certified_optimum(lang, layout_name: str, settings: dict):
  """lj.optimum on the count route with lang's default class weights, and the check that the
  loss-weighted objective equals class_weights="balanced" at θ* (to 1e-12)."""
  loss = objective_loss(lang)
  found = lj.optimum(lang, layout_name, route="count", loss=loss, num_starts=settings["starts"],
                     iterations=settings["iterations"], newton_steps=settings["newton_steps"])
  theta = jax.tree_util.tree_map(jnp.asarray, found.theta)
  direct_value = float(risk_route(lang, layout_name).risk(theta))
  if abs(direct_value - found.confirmed_risk) > 1e-12:
    raise AssertionError(f"{lang.describe()} {layout_name}: the weighted loss gives "
                         f"{found.confirmed_risk!r}, class_weights gives {direct_value!r}.")
  return found


def rows_of(lang, spec: str, layout_name: str, settings: dict):
  """The rows of one (language, layout): one per plan, at its best grid point."""
  found = certified_optimum(lang, layout_name, settings)
  entries, grid, trace = train_all(lang, layout_name, settings["steps"], settings["records"])
  risk = np.asarray(trace.risk)                                      # (P, R)
  final = np.where(np.asarray(trace.diverged), np.inf, risk[:, -1])
  best_recorded = float(np.nanmin(np.where(np.isfinite(risk), risk, np.inf)))
  # R*: the certified value; where a run went below it (the optimum not converged), the
  # smallest risk recorded, and the status says so.
  reference = min(found.risk, best_recorded)
  status = found.status if reference == found.risk else f"{found.status}; runs went lower"
  # The 0-1 error (population-weighted, §3g) at each chosen run's end and at θ*.
  report = jax.jit(risk_route(lang, layout_name).report)
  optimum_error_rate = float(report(jax.tree_util.tree_map(jnp.asarray, found.theta))["error"])
  rows, curves = [], {}
  for name in atlas.PLAN_NAMES:
    index = [i for i, (plan, _, _) in enumerate(entries) if plan == name]
    choice = index[int(np.argmin(final[index]))]
    etas = entries[choice][1]
    grid_of = {"joint": JOINT_GRID, "output_only": OUTPUT_GRID}.get(name)
    edge = bool(grid_of and len(grid_of) > 1 and etas[0] in (grid_of[0], grid_of[-1]))
    lag = metrics.horizon_free_lag(trace.alpha[choice], trace.beta[choice], trace.risk[choice],
                                   reference + LEARNED, grid)
    tau = int(lag.tau_eps)
    excess = float(final[choice] - reference)
    rows.append({
        "language": spec, "layout": layout_name, "class_weights": class_weights(lang),
        "plan": name, "etas": "/".join(f"{eta:g}" for eta in etas), "eta_at_edge": edge,
        "steps": settings["steps"], "final_risk": float(final[choice]),
        "optimum_risk": float(found.risk), "optimum_status": status,
        "optimum_error": float(found.risk_error), "excess": excess,
        "learned": bool(excess <= LEARNED),
        "tau_eps": tau if tau >= 0 else "",
        "half_time_alpha": int(lag.half_time_alpha) if tau >= 0 else "",
        "half_time_beta": int(lag.half_time_beta) if tau >= 0 else "",
        "half_time_ratio": (float(lag.half_time_ratio)
                            if tau >= 0 and np.isfinite(float(lag.half_time_ratio))
                            and float(lag.half_time_ratio) > 0 else ""),
        "risk_at_zero": float(risk[choice, 0]),
        "final_error": float(report(jax.tree_util.tree_map(
            lambda leaf, i=choice: leaf[i], trace.params))["error"]),
        "optimum_error_rate": optimum_error_rate})
    curves[name] = risk[choice]
  return rows, grid, curves, found


def git_commit() -> str:
  try:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=HERE, check=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"


def fmt(value) -> str:
  if isinstance(value, float):
    return f"{value:.6g}"
  return str(value)


def write_csv(path: str, rows) -> None:
  with open(path, "w", newline="") as handle:
    writer = csv.DictWriter(handle, COLUMNS)
    writer.writeheader()
    for row in rows:
      writer.writerow({key: (repr(value) if isinstance(value, float) else value)
                       for key, value in row.items()})


def verdicts(rows, floors):
  """One line per (language, layout): R(0), the information floor, R*, which plans learned,
  the best plan, joint's lag."""
  cells = {}
  for row in rows:
    cells.setdefault((row["language"], row["layout"]), []).append(row)
  lines = ["| language | layout | weights | R(0) | floor | R* (status) | learned by | best plan: "
           "R(T), 0-1 error | joint: τ_ε, t_α/t_β |", "|---|---|---|---|---|---|---|---|---|"]
  for (language, layout), cell in cells.items():
    by_plan = {row["plan"]: row for row in cell}
    learned = [row["plan"] for row in cell if str(row["learned"]) == "True"]
    best = min(cell, key=lambda row: float(row["final_risk"]))
    joint = by_plan["joint"]
    ratio = joint["half_time_ratio"]
    ratio = fmt(float(ratio)) if ratio not in ("", None) else "undefined"
    lag = "not reached" if joint["tau_eps"] in ("", None) else f"{joint['tau_eps']}, {ratio}"
    lines.append(
        f"| {language} | {layout} | {joint['class_weights']} | {fmt(float(joint['risk_at_zero']))} "
        f"| {fmt(floors[(language, layout)])} "
        f"| {fmt(float(joint['optimum_risk']))} ({joint['optimum_status']}) "
        f"| {', '.join(learned) or 'none'} | {best['plan']}: {fmt(float(best['final_risk']))}, "
        f"{fmt(float(best['final_error']))} | {lag} |")
  return lines


def write_report(out: str) -> None:
  """counting.md (verdicts first, then every row) and counting.png from counting.csv,
  counting.json and counting.npz in `out`."""
  with open(os.path.join(out, "counting.csv")) as handle:
    rows = list(csv.DictReader(handle))
  with open(os.path.join(out, "counting.json")) as handle:
    meta = json.load(handle)
  settings = meta["settings"]
  floors = {}
  for row in rows:
    key = (row["language"], row["layout"])
    if key not in floors:
      floors[key] = information_floor(languages.from_spec(key[0]), key[1])
  with open(os.path.join(out, "floors.csv"), "w", newline="") as handle:
    writer = csv.writer(handle)
    writer.writerow(("language", "layout", "information_floor"))
    writer.writerows((*key, repr(value)) for key, value in floors.items())
  lines = [
      "# The counting languages in the atlas (exact population GD, count route)", "",
      f"Command: `{meta['command']}` (docs/results/counting/counting.py); commit "
      f"{meta['commit']}, {meta['date']}, {meta['machine']}, jax {meta['jax']}; "
      f"{meta['seconds']:.0f} s on a shared, heavily loaded 2-core machine.", "",
      f"Every plan of the atlas runs {settings['steps']} GD steps from θ0 = 0 on the count route "
      f"(docs/theory.md §3g): joint and output_only at η ∈ {JOINT_GRID}, attention_only at "
      f"η = 1, attention_first (one attention step at η = 1, then output at η ∈ "
      f"{OUTPUT_GRID[:2]}), three_phase ({settings['steps'] // 2} output steps at η = 1, one "
      f"attention step at η2 ∈ {ATTENTION_STEP_GRID}, the rest output at η = 1); each plan at "
      "its best grid point (eta_at_edge: the chosen η is an end of its grid). "
      f"Records at {len(runner.record_grid(settings['steps'], settings['records']))} steps "
      f"(runner.record_grid, K = {settings['records']}), so τ_ε and the half-times are "
      "recorded steps. R*: lj.optimum (docs/theory.md §3e) with "
      f"{settings['starts']} starts, {settings['iterations']} L-BFGS iterations and "
      f"{settings['newton_steps']} Newton steps; where a run went below it, the smallest "
      "recorded risk (status '…; runs went lower'). learned: R(T) − R* ≤ 1e-3; τ_ε: the first "
      "recorded step with R ≤ R* + 1e-3; t_α/t_β: the half-time ratio up to τ_ε (§6b, > 1: "
      "attention lags). Dyck-1 and aⁿbⁿ: balanced risk ½E[ℓ | y = +1] + ½E[ℓ | y = −1] "
      "(their default_class_weights, §1d); majority: population risk. final_error: the "
      "population 0-1 error (sign 0 counts as an error) at the run's end; optimum_error_rate: "
      "at θ*. floor (floors.csv): the least risk of any function of what the layout reads "
      "(the counts; with the last query also the last token; with position tables the first "
      "and last tokens), from the count route's label masses (information_floor), so "
      "R* ≥ floor.", "", "## Verdicts", ""]
  lines += verdicts(rows, floors)
  lines += ["", "![R(t) − R* per language, best layout](counting.png)", "",
            "## All rows", "", "| " + " | ".join(COLUMNS) + " |",
            "|" + "---|" * len(COLUMNS)]
  for row in rows:
    cells = []
    for column in COLUMNS:
      value = row[column]
      try:
        cells.append(fmt(float(value)) if column not in ("steps", "tau_eps", "half_time_alpha",
                                                         "half_time_beta", "etas") else value)
      except ValueError:
        cells.append(value)
      if column in ("tau_eps", "half_time_alpha", "half_time_beta",
                    "half_time_ratio") and value == "":
        cells[-1] = "not reached" if column == "tau_eps" else "undefined"
    lines.append("| " + " | ".join(cells) + " |")
  with open(os.path.join(out, "counting.md"), "w") as handle:
    handle.write("\n".join(lines) + "\n")
  plot(out, rows)


def plot(out: str, rows) -> None:
  """R(t) − R* on log axes, one panel per language, at its layout of smallest R*."""
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  curves = np.load(os.path.join(out, "counting.npz"))
  languages_ = list(dict.fromkeys(row["language"] for row in rows))
  figure, axes = plt.subplots(1, len(languages_), figsize=(4.2 * len(languages_), 3.4),
                              squeeze=False)
  for axis, language in zip(axes[0], languages_):
    cell = [row for row in rows if row["language"] == language]
    best = min(cell, key=lambda row: float(row["optimum_risk"]))
    layout, reference = best["layout"], min(float(row["optimum_risk"]) for row in cell
                                            if row["layout"] == best["layout"])
    reference = min(reference, *(float(row["final_risk"]) for row in cell
                                 if row["layout"] == layout))
    steps = curves[f"{language}|{layout}|steps"]
    for plan in ("joint", "output_only", "three_phase", "attention_first"):
      excess = curves[f"{language}|{layout}|{plan}"] - reference
      keep = (steps >= 1) & np.isfinite(excess)
      axis.loglog(steps[keep], np.maximum(excess[keep], 1e-16), label=plan,
                  ls="--" if plan == "attention_first" else "-")
    axis.axhline(LEARNED, color="grey", lw=0.8, ls=":")
    axis.set_title(f"{language}, {layout}", fontsize=10)
    axis.set_xlabel("GD step t")
  axes[0][0].set_ylabel("R(t) − R*")
  axes[0][0].legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(os.path.join(out, "counting.png"), dpi=120)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true", help="short horizon, few starts")
  parser.add_argument("--languages", default=",".join(LANGUAGES),
                      help="from_spec names, ';'-separated when a spec has commas")
  parser.add_argument("--layouts", default=",".join(LAYOUTS))
  parser.add_argument("--steps", type=int, default=None)
  parser.add_argument("--out", default=HERE)
  parser.add_argument("--report", action="store_true",
                      help="only rewrite counting.md and counting.png from the files in --out")
  parser.add_argument("--resume", action="store_true",
                      help="keep the cells already in --out's files and compute the others")
  args = parser.parse_args(argv)
  if args.report:
    write_report(args.out)
    return 0
  settings = dict(QUICK if args.quick else FULL)
  if args.steps is not None:
    settings["steps"] = args.steps
  specs = [spec for spec in args.languages.split(";" if ";" in args.languages else ",") if spec]
  layouts = [name for name in args.layouts.split(",") if name]
  for name in layouts:
    if name not in LAYOUTS:
      print(f"--layouts: unknown layout {name!r}; allowed: {', '.join(LAYOUTS)}.")
      return 2
  os.makedirs(args.out, exist_ok=True)
  stem = "counting_quick" if args.quick else "counting"
  csv_path, curves_path = (os.path.join(args.out, stem + suffix) for suffix in (".csv", ".npz"))
  rows, curves, done = [], {}, set()
  if args.resume and os.path.exists(csv_path):
    # Cells already in the files are kept (same settings: checked) and not recomputed.
    with open(csv_path) as handle:
      rows = list(csv.DictReader(handle))
    if any(int(row["steps"]) != settings["steps"] for row in rows):
      print(f"--resume: {csv_path} has another horizon; rerun without --resume.")
      return 2
    done = {(row["language"], row["layout"]) for row in rows}
    if os.path.exists(curves_path):
      curves = dict(np.load(curves_path))
  started = time.time()
  for spec in specs:
    lang = languages.from_spec(spec)
    for layout_name in layouts:
      if (spec, layout_name) in done:
        continue
      cell = time.time()
      cell_rows, grid, cell_curves, found = rows_of(lang, spec, layout_name, settings)
      rows += cell_rows
      curves[f"{spec}|{layout_name}|steps"] = grid
      curves |= {f"{spec}|{layout_name}|{plan}": curve for plan, curve in cell_curves.items()}
      # Written after every cell, so a stopped run keeps what it computed (--resume).
      write_csv(csv_path, rows)
      np.savez(curves_path, **curves)
      print(f"{spec} {layout_name}: R* = {found.risk:.10g} ({found.status}), "
            + ", ".join(f"{r['plan']} {r['final_risk']:.6g}" for r in cell_rows)
            + f" [{time.time() - cell:.0f} s]", flush=True)
  elapsed = time.time() - started
  json_path = os.path.join(args.out, stem + ".json")
  previous = 0.0
  if args.resume and os.path.exists(json_path):
    with open(json_path) as handle:
      previous = json.load(handle).get("seconds", 0.0)
  metadata = {"command": "python docs/results/counting/counting.py" + (" " + " ".join(
      sys.argv[1:]) if argv is None and sys.argv[1:] else ""), "settings": settings,
              "commit": git_commit(), "date": datetime.datetime.now(
                  datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.platform()}",
              "jax": jax.__version__, "seconds": round(previous + elapsed, 1)}
  with open(json_path, "w") as handle:
    json.dump(metadata, handle, indent=1)
  if not args.quick:
    write_report(args.out)
  print(f"wrote {stem}.csv in {elapsed:.0f} s", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
