"""The atlas's files (experiments/atlas.py writes them; docs/theory.md §10): atlas.csv,
atlas.md with the Huang, Liang & Yang comparisons and a legend, heatmap.png, metadata.json.

No flags here, so tests (and other code) can import it beside another binary's module.
"""

from __future__ import annotations

import os
import time

import numpy as np

from experiments import common
from lagjax.analysis import atlas
from lagjax.data import languages


def language_name(spec: str) -> str:
  """The row name of a config.languages entry: 'tomita:3' -> 'tomita_3', an automaton file
  'path/to/mine.json' -> 'mine', a factory 'module:function' -> 'function'."""
  if spec.endswith(".json"):
    return os.path.splitext(os.path.basename(spec))[0]
  name, _, args = spec.partition(":")
  if name not in languages.LANGUAGES and args.isidentifier():
    return args
  return spec.replace(":", "_").replace(",", "_")


def write(experiment, results, langs, names, star_free, settings):
  """atlas.csv, atlas.md, heatmap.png and metadata.json for the layouts finished so far."""
  workdir, started = experiment.workdir, experiment.started
  rows = []
  for layout, table in results.items():
    for i, lang in enumerate(langs):
      row = {"language": names[i], "layout": layout, "star_free": star_free[i],
             "positive_rate": round(lang.positive_rate(), 6), "p": lang.length.p,
             "best_risk": table["best_risk"][i], "grad_norm": table["best_grad_norm"][i]}
      for plan in atlas.PLAN_NAMES:
        row[plan] = table[plan][i]
        row[plan + "_etas"] = "/".join(f"{e:g}" for e in table[plan + "_etas"][i])
      # Empty where undefined (the library's -1), never a number a reader could take.
      row.update(tau_eps=reached(int(table["tau_epsilon"][i])),
                 half_time_ratio=reached(table["half_time_ratio"][i]),
                 grid_covered=bool(table["grid_covered"][i]))
      rows.append(row)
  common.write_csv(rows, os.path.join(workdir, "atlas.csv"))
  figure = heatmap(results, names, star_free, os.path.join(workdir, "heatmap.png"))
  comparisons = huang_liang_yang(results, names, settings)
  with open(os.path.join(workdir, "atlas.md"), "w") as f:
    f.write("# Atlas of regular languages (exact population GD, transfer route)\n\n")
    f.write(f"Command: `python -m experiments.atlas --config experiments/configs/atlas.py`. "
            f"Every plan runs {settings.steps} steps from θ0 = 0; step sizes from "
            f"{settings.grid} (three_phase: η3 = η1); best risk: L-BFGS from "
            f"{settings.starts} starts, {settings.iterations} iterations (an upper bound on "
            f"the infimum; ‖∇R‖ there in grad_norm). Excess risk in {os.path.basename(figure)}."
            "\n\n")
    f.write("## Comparison with Huang, Liang & Yang (ICML 2025)\n\n" + comparisons + "\n\n")
    f.write("## All rows\n\n" + LEGEND + "\n\n" + common.markdown_table(
        [{**row, **{column: row[column] if row[column] != "" else NOT_REACHED[column]
                    for column in NOT_REACHED}} for row in rows]) + "\n")
  experiment.write_metadata(
      seconds=round(time.time() - started, 1),
      layouts_finished=list(results),
      settings={k: getattr(settings, k) for k in settings.__dataclass_fields__},
      languages={name: {"language": lang.describe(), "length_law": str(lang.length)}
                 for name, lang in zip(names, langs)})


# What atlas.md prints where a lag column is undefined (atlas.csv leaves the cell empty).
NOT_REACHED = {"tau_eps": "not reached", "half_time_ratio": "undefined"}
LEGEND = ("tau_eps (τ_ε): the first recorded step of joint GD at its chosen step size with risk "
          "<= best risk + epsilon; \"not reached\" when it never gets there. half_time_ratio: "
          "t_α/t_β, the step at which attention (α) has made half its move up to τ_ε over the "
          "step at which the output (β) has (> 1: attention lags); \"undefined\" when τ_ε is "
          "not reached or either half-time is 0. atlas.csv leaves both cells empty then.")


def reached(value):
  """A lag column's value, or "" where the library reports -1 (undefined)."""
  return "" if value == -1 else value


def huang_liang_yang(results, names, settings) -> str:
  """Even pairs: does attention move first under joint GD (half-time ratio t_α/t_β < 1), and
  does t·(R(t) - R_best) level off? Parity: is there a positive floor?"""
  lines = []
  for layout, table in results.items():
    if "even_pairs" in names:
      i = names.index("even_pairs")
      steps, curve = table["steps"], table["joint_curve"][i]
      marks = [len(steps) // 4, len(steps) // 2, len(steps) - 1]
      scaled = ", ".join(f"t={steps[m]}: {steps[m] * (curve[m] - table['best_risk'][i]):.3g}"
                         for m in marks)
      ratio, tau = table["half_time_ratio"][i], table["tau_epsilon"][i]
      ratio = NOT_REACHED["half_time_ratio"] if ratio == -1 else f"{ratio:.3g}"
      tau = NOT_REACHED["tau_eps"] if tau == -1 else tau
      lines.append(f"- even pairs, {layout}: best risk {table['best_risk'][i]:.4f}; joint GD "
                   f"half-time ratio t_α/t_β = {ratio} "
                   f"(τ_ε = {tau}); t·(R(t) - R_best): {scaled}.")
    if "parity" in names:
      i = names.index("parity")
      lines.append(f"- parity, {layout}: best risk found {table['best_risk'][i]:.4f} "
                   f"(‖∇R‖ = {table['best_grad_norm'][i]:.2g}).")
  return "\n".join(lines)


def heatmap(results, names, star_free, path) -> str:
  """Languages × plans per layout, coloured by excess risk R_final - R_best; * = star-free."""
  plt = common.pyplot()

  layouts = list(results)
  fig, axes = plt.subplots(1, len(layouts), figsize=(3.2 * len(layouts) + 1, 0.32 * len(names)
                                                      + 2), sharey=True, squeeze=False)
  labels = [f"{n}{' *' if s else ''}" for n, s in zip(names, star_free)]
  for ax, layout in zip(axes[0], layouts):
    table = results[layout]
    excess = np.stack([table[p] - table["best_risk"] for p in atlas.PLAN_NAMES], axis=1)
    image = ax.imshow(np.clip(excess, 0, 0.5), vmin=0, vmax=0.5, cmap="viridis",
                      aspect="auto")
    ax.set_xticks(range(len(atlas.PLAN_NAMES)), [p.replace("_", "\n") for p in
                                                 atlas.PLAN_NAMES], fontsize=7)
    ax.set_yticks(range(len(names)), labels, fontsize=7)
    ax.set_title(layout, fontsize=9)
  fig.colorbar(image, ax=axes[0].tolist(), label="excess risk R_T − R_best (clipped at 0.5)")
  fig.suptitle("Exact population GD from θ0 = 0 on regular languages (* = star-free)",
               fontsize=10)
  fig.savefig(path, dpi=130, bbox_inches="tight")
  plt.close(fig)
  return path
