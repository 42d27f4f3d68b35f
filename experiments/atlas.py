"""The atlas of regular languages: which ones one attention layer learns from zero, and where
attention lags (docs/theory.md §10).

  python -m experiments.atlas --config experiments/configs/atlas.py --workdir docs/results/atlas

Writes atlas.csv, atlas.md (with the Huang, Liang & Yang comparisons), heatmap.png and
metadata.json to --workdir.
"""

from __future__ import annotations

import os
import time

import numpy as np
from absl import flags
from ml_collections import config_flags

from experiments import cli, common
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
  names = [spec.replace(":", "_").replace(",", "_") for spec in config.languages]
  star_free = [regular.is_star_free(lang) for lang in langs]
  started, started_utc = experiment.started, experiment.started_utc
  results = {}
  # Two compiled stages per layout (the best risk, then the plans), reported as one total.
  stages = experiment.progress("stages (best risk, plans) of the layouts")
  for k, layout in enumerate(config.layouts):
    results[layout] = atlas.run(
        langs, atlas.LAYOUTS[layout], settings,
        progress=lambda done, total, k=k: stages(k * total + done, len(config.layouts) * total))
    write(workdir, results, langs, names, star_free, settings, started, config, started_utc)
  print(f"wrote {workdir} in {time.time() - started:.0f} s", flush=True)


def write(workdir, results, langs, names, star_free, settings, started, config, started_utc):
  """atlas.csv, atlas.md, heatmap.png and metadata.json for the layouts finished so far."""
  rows = []
  for layout, table in results.items():
    for i, lang in enumerate(langs):
      row = {"language": names[i], "layout": layout, "star_free": star_free[i],
             "positive_rate": round(lang.positive_rate(), 6), "p": lang.length.p,
             "best_risk": table["best_risk"][i], "grad_norm": table["best_grad_norm"][i]}
      for plan in atlas.PLAN_NAMES:
        row[plan] = table[plan][i]
        row[plan + "_etas"] = "/".join(f"{e:g}" for e in table[plan + "_etas"][i])
      row.update(tau_eps=int(table["tau_epsilon"][i]),
                 half_time_ratio=table["half_time_ratio"][i],
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
    f.write("## All rows\n\n" + common.markdown_table(rows) + "\n")
  common.write_metadata(
      workdir, config, started_utc, seconds=round(time.time() - started, 1),
      layouts_finished=list(results),
      settings={k: getattr(settings, k) for k in settings.__dataclass_fields__},
      languages={name: {"language": lang.describe(), "length_law": str(lang.length)}
                 for name, lang in zip(names, langs)})


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
      lines.append(f"- even pairs, {layout}: best risk {table['best_risk'][i]:.4f}; joint GD "
                   f"half-time ratio t_α/t_β = {table['half_time_ratio'][i]:.3g} "
                   f"(τ_ε = {table['tau_epsilon'][i]}); t·(R(t) - R_best): {scaled}.")
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


if __name__ == "__main__":
  cli.run(main)
