"""Config for experiments.table1: six tasks x five plans x seeds (docs/theory.md section 7).

Every task has its own block under `task_settings` (model, lengths, optimizer,
steps T and the step-size grid), so one field can be changed from the command
line, e.g. --config.task_settings.even_pairs.heads=1. "and" and "or" are Python
keywords, which ml_collections cannot parse after a dot; index them instead:
'--config.task_settings["and"].heads=1'.

Models (`model`). "transformer": the general single-layer transformer of
lagjax.models.transformer with fixed one-hot embeddings, for every token task; "direct":
the (α, β) model of docs/theory.md section 2 from θ0 = 0 (occurrence, OR, AND only; the
heads/query/positional fields are then unused); "slr": the SLR model of section 7.
The defaults:
- occurrence, OR: one head, CLS query, no positions, scalar output.
- AND: two heads (the paper's two-head problem).
- even pairs: two heads, first/last markers, the *last token* as query. With the
  CLS query one head cannot express first = last: the sign of f is the sign of a
  softmax numerator that is additive in the first and the last token
  (docs/decisions/layouts-and-ties.md). Two CLS heads can, but SGD did not find it in 2000 steps.
- ICL bigram: last-token query on current ⊕ previous one-hot features, k logits.

Lengths. max_len None is the smallest N with P(n > N) <= 1e-3 under the task's
law, so the balanced geometric laws of occurrence/OR/AND stay balanced (a
max_len of 64 leaves only 20% positives for AND at d = 50). The ICL bigram uses
k = 10 tokens and mean length 50: at k = 50 (max_len 64) the Bayes predictor is
only 0.004 nats better than the uniform one and no plan learned anything.

Attention (`attention_variants`). Every transformer task runs every plan under both
parameterisations of its attention: "kqv" (W_Q, W_K, W_V, W_O, readout from a
small init, `init_scale`) and "direct" (per-head score and value maps from zero, the
(α, β) parameterisation the paper's theory covers).

Optimizers and step sizes. Plain SGD on fresh minibatches, except Adam for the
ICL bigram, where SGD from the small init did not leave the KQV saddle within
5000 steps. joint, output_only and attention_only use one η from the task's
`eta_grid`. three_phase and attention_first have two: η_out for the output
phases and η_attn = m·η_out for the attention phase, m from
`attention_multipliers`; their plain rows keep m = 1 (one η), their
"_per_phase" rows choose m too. Step sizes are chosen on `validation_seeds`
seeds (never the test seeds) by the final held-out loss, the metric breaking ties
(`select_by`: "loss", or "metric" for the reverse); diverged validation seeds lose.
When a plan's chosen η is an edge of its grid, the grid grows by its own ratio at
that edge until the choice is interior or the next point leaves `eta_cap`
(experiments/table1_selection.py); the table marks extended and capped cells.

Exact rows (`exact`). Occurrence, OR and AND also get rows computed by exact
population gradient descent on the direct (α, β) model from θ0 = 0, with the same
plans, phase fractions, T and grids (experiments/table1_exact.py): no seeds. Even
pairs has them too, by the transfer route: its 39 candidates at T = 2000 take 45 s on this
2-core CPU (CHANGELOG.md, version 3).

Your own language (`language`). A language spec of lj.languages.from_spec: a registered
family ('tomita:3'), an automaton file 'path.json' (transitions, accepting, start, pi, name)
or a factory 'module:function' on the Python path; "" for none. It gets exact rows, beside
the tasks' (or alone, with --config.tasks='()'), named like its atlas row (the file's stem,
the function's name): the direct (α, β) model with CLS from θ0 = 0 by exact population GD on
the route "auto" picks (the transfer route for an automaton), with the plans, phase fractions
and the selection rule of the other rows, and the settings of `task_settings.language`: `d`
(None: the language's own alphabet size; an integer for a family or factory that takes one),
the model's `query` ("cls" or "last") and `positional` ("none" or "first_last") tables, and
the optimizer, T and step-size grid as for a task. Its length law is the language's own
(lj.regular's balanced geometric law for a file); a factory can set another.

Phase lengths (`phase_fractions`): three_phase T/4 output, T/4 attention, T/2 output;
attention_first T/2 attention, T/2 output; the others T.
Every plan of a (task, attention) runs through one compiled runner, in blocks of
`validation_seeds` seeds x `chunk_size` plans (0: the table rows of a task). The plans
of a block share each seed's minibatches (common random numbers, as the protocol always
had), which are sampled once for all of them. With `count_form`,
models that read only token counts (CLS query, no positions), or counts and the
first and last token (first/last markers), train on count vectors: the same
strings and numbers at V or V + 2 entries instead of max_len.

`--config experiments/configs/table1.py:quick` is the CI smoke variant (small width,
20 steps, 2 seeds; experiments.table1_protocol.quick). It is built before the command
line's overrides, so `--config.num_seeds=3` or an `eta_grid` given on the command line
holds in it as in the full config.
"""

import ml_collections

LANGUAGE_GRID = (0.3, 1.0, 3.0, 10.0)
LANGUAGE_CAP = (0.01, 100.0)  # the grid extends by its ratio (3.33) within these bounds


def _language_settings() -> ml_collections.ConfigDict:
  """The settings of config.language's exact rows (a direct model, no sampled fields)."""
  return ml_collections.ConfigDict(dict(
      d=ml_collections.FieldReference(None, field_type=int), query="cls", positional="none",
      optimizer="sgd", steps=1000, eta_grid=LANGUAGE_GRID, eta_cap=LANGUAGE_CAP,
      select_by="loss"))


def _settings(**fields) -> ml_collections.ConfigDict:
  defaults = dict(model="transformer", heads=1, query="cls", positional="none", max_len=None,
                  optimizer="sgd", select_by="loss", exact=False)
  return ml_collections.ConfigDict(dict(defaults, **fields))


VARIANTS = ("quick",)


def get_config(variant: str | None = None) -> ml_collections.ConfigDict:
  """The full Table 1 config, or the named variant of it ('path:quick')."""
  if variant not in (None, "", *VARIANTS):
    raise ValueError(f"unknown config variant {variant!r} of table1.py; allowed: "
                     f"{', '.join(VARIANTS)} (as --config experiments/configs/table1.py:quick).")
  config = ml_collections.ConfigDict()
  config.tasks = ("occurrence", "or", "and", "even_pairs", "icl_bigram", "slr")
  config.plans = ("joint", "three_phase", "attention_first", "output_only", "attention_only")
  config.width = 50            # alphabet size d of occurrence/OR/AND, SLR width m
  config.batch_size = 32
  config.records = 40          # records per run (held-out metric and parameters)
  config.test_size = 512
  config.init_scale = 0.1
  config.validation_seeds = 2
  config.num_seeds = 8
  config.seed = 0
  config.attention_variants = ("kqv", "direct")
  config.attention_multipliers = (1.0, 100.0, 10000.0)
  config.phase_fractions = ml_collections.ConfigDict({"three_phase": (0.25, 0.25),
                                                      "attention_first": (0.5,)})
  config.chunk_size = 8
  config.count_form = True     # order-free models train on count vectors (same numbers)
  config.block_threads = 2     # (task, attention) blocks run at once in one process
  # XLA's backend optimisation level: None is XLA's default; the quick variant uses 0, which
  # compiles 3-4x faster (its 20-step runs are all compilation), with the CPU fusion
  # emitters off as well (lagjax.xla_flags.backend_optimization).
  config.xla_backend_optimization_level = ml_collections.FieldReference(None, field_type=int)
  config.task_settings = ml_collections.ConfigDict({
      "occurrence": _settings(steps=1000, eta_grid=LANGUAGE_GRID, eta_cap=LANGUAGE_CAP,
                              exact=True),
      "or": _settings(steps=1000, eta_grid=LANGUAGE_GRID, eta_cap=LANGUAGE_CAP, exact=True),
      "and": _settings(heads=2, steps=2000, eta_grid=LANGUAGE_GRID, eta_cap=LANGUAGE_CAP,
                       exact=True),
      "even_pairs": _settings(heads=2, query="last", positional="first_last", steps=2000,
                              eta_grid=(0.3, 1.0, 1.5), eta_cap=(0.01, 10.0), exact=True),
      "icl_bigram": _settings(query="last", k=10, mean_length=50, max_len=128, steps=5000,
                              optimizer="adam", eta_grid=(0.001, 0.003, 0.01),
                              eta_cap=(1e-4, 0.1)),
      "slr": _settings(model="slr", steps=1000, eta_grid=(0.01, 0.03, 0.1), eta_cap=(1e-3, 1.0)),
      "language": _language_settings(),   # config.language's exact rows
  })
  # A language spec (lj.languages.from_spec): 'name[:args]', 'path.json' or 'module:function'.
  config.language = ""
  if variant == "quick":
    from experiments import table1_protocol  # the one place the smoke settings live
    table1_protocol.quick(config)
  return config.lock()
