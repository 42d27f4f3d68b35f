"""Config for the census of small automata (docs/theory.md §10a), run by experiments.atlas:

  python -m experiments.atlas --config experiments/configs/census.py --workdir runs/census
  python -m experiments.atlas --config experiments/configs/census.py --workdir runs/census \
      --num_processes=2 --process_id=0   # and process_id=1, same workdir

Every binary language whose minimal complete DFA has at most 2 states, and a seeded sample of
200 with exactly 3 (lagjax.analysis.automata: one per class up to renaming and complement,
one-class-per-length languages dropped), through the atlas's rows on every layout and plan at
the atlas's horizons. Besides the atlas's files the run writes census.md (the fraction
learned per plan and layout, split into star-free and not; the fraction where attention lags;
joint against three_phase) and census.png. Each (language, layout) is one chunk of the sweep's
resumable store; with P processes, process p takes the pairs i ≡ p (mod P) not yet finished.

`:quick` is every language with at most 2 states, the CLS layout, at the atlas's quick
horizons (t = 10³, 300 GD steps).
"""

from experiments.configs import atlas

VARIANTS = ("quick",)


def get_config(variant: str | None = None):
  config = atlas.get_config("quick" if variant == "quick" else None).unlock()
  config.languages = (("census:2",) if variant == "quick"
                      else ("census:2", "census_sample:3,200,0"))
  return config.lock()
