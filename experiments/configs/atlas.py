"""Config for experiments.atlas: every built-in language × four layouts (docs/theory.md §10)."""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  # "name" or "name:arg,arg" of a registered language, an automaton file "path.json" or a
  # factory "module:function" (lj.languages.from_spec).
  config.languages = ("parity", "first", "even_pairs", "tomita:1", "tomita:2", "tomita:3",
                      "tomita:4", "tomita:5", "tomita:6", "tomita:7", "dyck:2",
                      "cycle_navigation:3", "mod_count:1,3,1", "contains:1,0,1",
                      "occurrence_automaton:3")
  config.layouts = ("cls", "cls+first_last", "last+first_last", "last")
  config.steps = 60            # every plan's length
  config.grid = (1.0, 4.0)     # step sizes of every plan's grid (three_phase: η3 = η1)
  config.record_every = 2
  config.starts = 2            # L-BFGS starts for the best risk (zero, then N(0, 1))
  config.iterations = 30
  config.epsilon = 0.01        # τ_ε: first step with R <= best risk + epsilon
  return config.lock()
