"""Config for experiments.table1: six tasks x five plans x seeds (THEORY.md section 7).

Models: the general single-layer transformer of lagjax.transformer (one-hot
embeddings, CLS query, scalar output) for occurrence, OR, AND (2 heads) and even
pairs (2 heads, first/last markers); last-token query with current ⊕ previous
token features and k logits for the ICL bigram; the SLR model of §7 for SLR.
Plans: every phase uses plain SGD with one step size η per plan, chosen on
`validation_seeds` seeds (never the test seeds) from `eta_grid` by the final
held-out metric. Phase lengths: three_phase T/4 output, T/4 attention, T/2 output;
attention_first T/2 attention, T/2 output; the others T.
`--config.quick=True` shrinks everything to a CI smoke test.
"""

import ml_collections


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  config.quick = False
  config.tasks = ("occurrence", "or", "and", "even_pairs", "icl_bigram", "slr")
  config.plans = ("joint", "three_phase", "attention_first", "output_only", "attention_only")
  config.width = 50            # alphabet size d, ICL k, SLR dimension m
  config.max_len = 64          # lengths are drawn conditioned on n <= max_len
  config.heads = ml_collections.ConfigDict(
      {"occurrence": 1, "or": 1, "and": 2, "even_pairs": 2, "icl_bigram": 1, "slr": 1})
  config.steps = 400           # T
  config.batch_size = 32
  config.record_every = 20
  config.test_size = 1024
  config.init_scale = 0.1
  config.eta_grid = (0.3, 1.0, 3.0)
  config.validation_seeds = 2
  config.num_seeds = 5
  config.seed = 0
  return config.lock()
