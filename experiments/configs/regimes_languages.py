"""Config for the language table of experiments.regimes (docs/theory.md §8.8).

  python -m experiments.regimes --config experiments/configs/regimes_languages.py \
      --workdir docs/results/regimes

The built-in regular languages on the plain model (CLS query, no position tables), each
on its own alphabet and default length law, through the transfer route.
"""

import ml_collections

from experiments.configs import regimes


def get_config() -> ml_collections.ConfigDict:
  config = regimes.get_config().unlock()
  config.languages = ("parity", "even_pairs", *(f"tomita:{k}" for k in range(1, 8)))
  return config.lock()
