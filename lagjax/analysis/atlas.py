"""The atlas of regular languages: what one attention layer learns from zero (docs/theory.md §10).

For every language and each of the four layouts of the direct model (§2b), by exact
population GD on the transfer route (§3d):

- the best squared risk found (L-BFGS from several starts: an upper bound on the infimum,
  with ‖∇R‖ at the point found);
- the final risk of each of the five plans of §5 at its best step sizes on a grid;
- joint GD's horizon-free lag (§6b): τ_ε to within ε of the best risk and the half-time
  ratio t_α/t_β.

All languages run in one compiled program per layout: their automata are padded to a
common number of states Q and tokens d (a padded token has π = 0, a padded state is
unreachable, so neither changes any sum) and passed as arrays, so jax.vmap runs languages
× step sizes together through the one training loop (lagjax/dynamics/runner.py).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lagjax import models, validation
from lagjax.data import languages, lengths
from lagjax.dynamics import metrics, plans, runner
from lagjax.models import direct
from lagjax.risk import automaton as automaton_lib
from lagjax.risk import coverage, quadrature, transfer

LAYOUTS = {"cls": direct.Layout(), "cls+first_last": direct.Layout(positions="first_last"),
           "last": direct.Layout(query="last"),
           "last+first_last": direct.Layout(query="last", positions="first_last")}
# The plans of the registry (plans.PLANS), those with more step sizes first: the atlas's
# column order (three_phase, attention_first, then the one-step-size plans).
PLAN_NAMES = tuple(sorted(plans.plan_names(), key=lambda name: -len(plans.PLANS[name].step_sizes)))
SLOTS = (plans.Slot(),) * 3       # every plan here is at most three population SGD phases


@dataclasses.dataclass(frozen=True)
class Settings:
  """What the atlas computes (docs/theory.md §10): plan lengths, step-size grid, L-BFGS budget.

  Frozen and hashable: it is a static argument of the atlas's compiled programs, so one
  Settings compiles once per layout.

  Attributes:
    steps: length of every plan (three_phase: steps // 2 output steps, one attention step,
      the rest output; attention_first: one attention step, the rest output); at least 3,
      so that every phase of three_phase has a step.
    grid: the step sizes of every plan's grid (three_phase ties η3 = η1).
    record_every: record the risk and the parameters every this many steps.
    starts: L-BFGS starts for the best risk (zero, then starts - 1 draws from N(0, 1)).
    iterations: L-BFGS iterations per start.
    extra_points: quadrature nodes beyond one window that the first grid holds (the
      smallest grid of risk/coverage.py's ladder that does); where θ needs more, the
      stage runs again on a larger grid of the ladder.
    epsilon: τ_ε is the first step with R <= best risk + epsilon (§6b).

  Raises:
    ValueError: naming the field, for steps < 3, record_every, starts or iterations < 1,
      extra_points < 0, epsilon <= 0, or an empty grid or a step size that is not > 0.

  Example:
    >>> from lagjax.analysis import atlas
    >>> settings = atlas.Settings(steps=8, grid=(1.0,))
    >>> settings.steps, settings.grid, settings.starts
    (8, (1.0,), 4)
  """

  steps: int = 200
  grid: tuple[float, ...] = (0.5, 2.0, 8.0)
  record_every: int = 2
  starts: int = 4
  iterations: int = 60
  extra_points: int = 128
  epsilon: float = 0.01

  def __post_init__(self):
    # Checked here, not in plan_grid: a bad field is named where it is set.
    checked = {"steps": validation.check_int("atlas steps", self.steps, 3),
               "record_every": validation.check_int("atlas record_every", self.record_every, 1),
               "starts": validation.check_int("atlas starts", self.starts, 1),
               "iterations": validation.check_int("atlas iterations", self.iterations, 1),
               "extra_points": validation.check_int("atlas extra_points", self.extra_points, 0),
               "epsilon": validation.check_positive("atlas epsilon", self.epsilon)}
    grid = tuple(self.grid) if isinstance(self.grid, (tuple, list)) else ()
    if not grid:
      raise ValueError(f"atlas grid must be a non-empty tuple of step sizes > 0; got "
                       f"{self.grid!r}.")
    checked["grid"] = tuple(validation.check_positive("atlas grid step size", eta) for eta in grid)
    for name, value in checked.items():
      object.__setattr__(self, name, value)


class Automata:
  """Regular languages padded to common (d, Q) and stacked as arrays (docs/theory.md §10).

  Each language's automaton (`risk.automaton.Automaton`, §3d) is padded to the largest number of
  tokens d and states Q: a padded token has π = 0 and a padded state is unreachable, so
  neither changes any sum, and jax.vmap runs all L languages through one program.

  Args:
    langs: regular languages (AutomatonLabels) with geometric length laws; ValueError
      otherwise.

  Attributes:
    d: the common number of tokens, max d over `langs`.
    num_states: the common number of states Q.
    automaton: a `risk.automaton.Automaton` of stacked arrays: letters (L, d, Q, Q),
      accepting (L, Q), start (L, Q).
    p: the geometric length laws' p (L,).
    left: the widest quadrature window's left extent, max of 38 + log E[n] (§3a).

  Example:
    >>> from lagjax.analysis import atlas
    >>> langs = [lj.languages.from_spec("parity"), lj.languages.from_spec("even_pairs")]
    >>> automata = atlas.Automata(langs)     # 2 and 5 states, both on d = 2 tokens
    >>> automata.d, automata.num_states, automata.automaton.letters.shape
    (2, 5, (2, 2, 5, 5))
    >>> round(automata.left, 6)    # 38 + ln E[n], E[n] = 1/p = 10 for Geometric(0.1)
    40.302585
  """

  def __init__(self, langs):
    for lang in langs:
      languages.check_language(lang, "the atlas")
      if not isinstance(lang, languages.AutomatonLabels):
        raise ValueError(f"the atlas needs regular languages (AutomatonLabels); got "
                         f"{lang.describe()}.")
      # The atlas stacks the laws' stop probabilities into one array (geometric below).
      lengths.check_law(lang.length, "the atlas", ("geometric",))
    arrays = [automaton_lib.automaton_arrays(lang) for lang in langs]
    self.d = max(lang.d for lang in langs)
    self.num_states = max(a.letters.shape[-1] for a in arrays)
    size, tokens = self.num_states, self.d

    def pad(a):
      letters = np.zeros((tokens, size, size))
      q, d = a.letters.shape[-1], a.letters.shape[0]
      letters[:d, :q, :q] = a.letters
      return (letters, np.pad(np.asarray(a.accepting), (0, size - q)),
              np.pad(np.asarray(a.start), (0, size - q)))

    letters, accepting, start = map(np.stack, zip(*map(pad, arrays)))
    self.automaton = automaton_lib.Automaton(jnp.asarray(letters), jnp.asarray(accepting),
                                             jnp.asarray(start))
    self.p = jnp.asarray([lang.length.stop_probability for lang in langs])
    self.left = max(quadrature.window_left(lang) for lang in langs)


def geometric(p):
  """Geometric(p) for a traced p (unflattening skips the eager validation)."""
  return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(lengths.Geometric(0.5)), [p])


def plan_grid(settings: Settings):
  """Every plan of §5 at every point of the step-size grid, as one batch of plan data (§10).

  Per step size η of the grid: joint, output_only and attention_only; per pair (η, η') of
  grid points: attention_first(η, η') and three_phase(η, η', η) (η3 = η1). Every plan
  lasts settings.steps steps on three slots (plans.PlanData, §5), so all P of them run
  vmapped through one compiled training loop.

  Args:
    settings: the atlas's Settings (steps and grid are read).

  Returns:
    ([(plan name, step sizes)] of length P, plans.PlanData with leaves stacked to (P, 3)
    (trains: (P, 3, 2))), in the same order.

  Example:
    >>> from lagjax.analysis import atlas
    >>> entries, data = atlas.plan_grid(atlas.Settings(steps=8, grid=(1.0,)))
    >>> [name for name, _ in entries]
    ['joint', 'output_only', 'attention_only', 'attention_first', 'three_phase']
    >>> data.steps.shape, data.steps[-1].tolist()   # three_phase: 4 output, 1 attention, 3
    ((5, 3), [4, 1, 3])
  """
  steps, grid = settings.steps, settings.grid
  entries = []
  for eta in grid:
    entries += [("joint", (eta,), plans.joint(eta, steps)),
                ("output_only", (eta,), plans.output_only(eta, steps)),
                ("attention_only", (eta,), plans.attention_only(eta, steps))]
  for first, second in itertools.product(grid, grid):
    entries.append(("attention_first", (first, second),
                    plans.attention_first(first, second, steps - 1)))
    entries.append(("three_phase", (first, second, first),
                    plans.three_phase(first, second, first, steps - steps // 2 - 1,
                                      steps1=steps // 2)))
  data = [plan.data(num_slots=len(SLOTS)) for _, _, plan in entries]
  return [(name, etas) for name, etas, _ in entries], jax.tree_util.tree_map(
      lambda *leaves: jnp.stack(leaves), *data)


def _risk_fn(automaton, p, left, num_points):
  """(risk, nodes needed) by the transfer route's own report (transfer.report_fn) on the
  padded arrays: NaN, value and gradient, where the grid does not cover θ (§3a, §3d)."""
  report = transfer.report_fn(automaton, geometric(p), step=quadrature.STEP, left=left,
                              width=quadrature.window_width(None, quadrature.STEP, left),
                              num_points=num_points)

  def risk_and_needed(params):
    out = report(params)
    return out["risk"], out["grid_points_needed"]

  return risk_and_needed


def _resized(stage, windows: int, settings: Settings, left: float, needed_of):
  """stage(num_points) on the smallest grid of the ladder (risk/coverage.py) holding one
  window plus settings.extra_points nodes, re-sized while a run stopped because of it."""
  first = coverage.size_covering(None, quadrature.window_width(None, quadrature.STEP, left)
                                 + settings.extra_points, windows, left=left)
  return coverage.resize(stage, None, windows, stopped_at=needed_of, left=left,
                         num_points=first or coverage.ladder(None, windows, left=left)[-1])


@functools.partial(jax.jit, static_argnames=("layout", "settings", "left", "num_points"))
def _train_all(automaton, p, data, *, layout, settings, left, num_points):
  """Records of every (language, plan entry): risk, attention and output vectors (L, P, R,
  ...), the grid nodes each state needs and divergence."""
  size = automaton.letters.shape[1]
  labels = functools.partial(models.group_labels, direct.PARAM_GROUPS)

  def one(automaton, p, data):
    # Jitted, so the risk is traced once for its gradient and its record (same values).
    report = jax.jit(_risk_fn(automaton, p, left, num_points))
    value_and_grad = jax.value_and_grad(lambda params: report(params)[0])

    def record(params):
      risk, needed = report(params)
      return {"risk": risk, "needed": needed, "alpha": direct.attention_vector(params),
              "beta": direct.output_vector(params)}

    loop = runner.make_loop(SLOTS, labels, lambda key: (lambda params, t, phase:
                                                        value_and_grad(params)),
                            record, num_steps=settings.steps,
                            record_every=settings.record_every)
    trace = loop(direct.zero_params(size, layout), jax.random.key(0), data)
    return dict(trace.records, steps=trace.steps, risk=trace.risk, alpha=trace.alpha,
                beta=trace.beta), trace.diverged

  over_plans = jax.vmap(one, in_axes=(None, None, 0))
  return jax.vmap(over_plans, in_axes=(0, 0, None))(automaton, p, data)


@functools.partial(jax.jit, static_argnames=("layout", "settings", "left", "num_points"))
def _best_risk(automaton, p, key, *, layout, settings, left, num_points):
  """Min over L-BFGS starts of the risk reached, ‖∇R‖ there, and the most grid nodes an
  iterate whose risk was NaN needed (0 if none was), per language (L,)."""
  size = automaton.letters.shape[1]
  zero = direct.zero_params(size, layout)
  points_needed = coverage.needed_fn(None, left=left)

  def one(automaton, p, key):
    # Jitted, so the risk is traced once for L-BFGS's many calls (the same values; it
    # halves the tracing of this program).
    report = jax.jit(_risk_fn(automaton, p, left, num_points))

    def risk(params):
      return report(params)[0]

    solver = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(risk)

    def grid_stop(value, params):
      """The nodes an iterate with finite params but a NaN risk needs (else 0): the grid
      stopped L-BFGS there (later iterates may be NaN themselves)."""
      finite_params = jnp.all(jnp.array([jnp.all(jnp.isfinite(leaf))
                                         for leaf in jax.tree_util.tree_leaves(params)]))
      return jnp.where(jnp.isfinite(value) | ~finite_params, 0.0, points_needed(params))

    def minimize(start):
      def step(carry, _):
        params, state, stop = carry
        value, grad = value_and_grad(params, state=state)
        updates, state = solver.update(grad, state, params, value=value, grad=grad,
                                       value_fn=risk)
        stop = jnp.maximum(stop, grid_stop(value, params))
        return (optax.apply_updates(params, updates), state, stop), None

      (params, _, stop), _ = jax.lax.scan(step, (start, solver.init(start), 0.0), None,
                                          settings.iterations)
      value, grad = jax.value_and_grad(risk)(params)
      norm = jnp.sqrt(sum(jnp.sum(g ** 2) for g in jax.tree_util.tree_leaves(grad)))
      stop = jnp.maximum(stop, grid_stop(value, params))
      return jnp.where(jnp.isfinite(value), value, jnp.inf), norm, stop

    def draw(start_key):
      return {name: jax.random.normal(jax.random.fold_in(start_key, i), value.shape)
              for i, (name, value) in enumerate(zero.items())}

    draws = jax.vmap(draw)(jax.random.split(key, settings.starts - 1))
    starts = jax.tree_util.tree_map(lambda z, d: jnp.concatenate([z[None], d]), zero, draws)
    values, norms, needed = jax.vmap(minimize)(starts)
    best = jnp.argmin(values)
    return values[best], norms[best], needed.max()

  keys = jax.random.split(key, p.shape[0])
  return jax.vmap(one)(automaton, p, keys)


def run(langs, layout: direct.Layout, settings: Settings = Settings(), progress=None) -> dict:
  """The atlas rows of `langs` under one layout (docs/theory.md §10).

  Exact population GD on the transfer route (§3d) from θ0 = 0: the best squared risk
  found by L-BFGS (an upper bound on inf R, lowered to the smallest risk any plan
  recorded), every plan of `plan_grid` at its best grid point, and joint GD's
  horizon-free lag (§6b) with ε = best risk + settings.epsilon. Two compiled programs
  (L-BFGS, training), cached per layout, settings and array shapes.

  Args:
    langs: regular languages with geometric length laws (see Automata).
    layout: the direct model's layout (§2b), e.g. LAYOUTS["cls"].
    settings: what to compute (Settings).
    progress: optional progress(done, total) callback over the two compiled stages (the
      best risk, then the plans): (0, 2) before, (1, 2) between, (2, 2) after, each once the
      stage's computation has finished (not when it was dispatched). This
      module prints nothing; a binary renders it.

  Returns:
    A dict: best_risk, best_grad_norm (‖∇R‖ at the L-BFGS point), grid_covered (L,);
    for each name of PLAN_NAMES its final risk at its best step sizes (L,) (diverged runs
    excluded) and, under name + "_etas", those step sizes (a list of L tuples);
    joint_choice (L,), the index of joint GD's best entry of plan_grid; tau_epsilon and
    half_time_ratio (L,) of that run; joint_curve (L, R), its recorded risks; steps (R,),
    the recorded steps.

  Example:
    Parity (2 states) padded beside even pairs (5 states), so both run in one program:

    >>> from lagjax.analysis import atlas
    >>> settings = atlas.Settings(steps=4, grid=(1.0,), record_every=2, starts=1,
    ...                           iterations=1)
    >>> langs = [lj.languages.from_spec("parity"), lj.languages.from_spec("even_pairs")]
    >>> rows = atlas.run(langs, atlas.LAYOUTS["cls"], settings)
    >>> rows["attention_only"].tolist()   # β stays 0, so attention gets no gradient: R(0) = ½
    [0.5, 0.5]
    >>> rows["steps"].tolist(), (rows["best_risk"] <= rows["joint"]).tolist()
    ([0, 2, 4], [True, True])
  """
  automata = Automata(langs)
  entries, data = plan_grid(settings)
  missing = sorted(set(PLAN_NAMES) - {plan for plan, _ in entries})
  if missing:  # a plan registered after the atlas was written
    raise ValueError(f"the atlas has no step-size grid for the plans {missing} of the registry "
                     "(lagjax/analysis/atlas.py plan_grid).")
  progress = progress or (lambda done, total: None)
  progress(0, 2)
  # Each stage is waited for before it is reported: JAX dispatches asynchronously, so an
  # unwaited stage would be reported done at once and the run look finished while it computes.
  # Both stages run on the transfer route's report, each re-sized on the ladder of
  # risk/coverage.py while a start or a run stopped because of its grid (§3a).
  windows = coverage.windows(automata.d, layout)
  best, grad_norm, _ = jax.block_until_ready(_resized(
      lambda num_points: _best_risk(automata.automaton, automata.p, jax.random.key(1),
                                    layout=layout, settings=settings, left=automata.left,
                                    num_points=num_points),
      windows, settings, automata.left, lambda out: float(np.max(out[2]))).result)
  progress(1, 2)
  trained = _resized(
      lambda num_points: _train_all(automata.automaton, automata.p, data, layout=layout,
                                    settings=settings, left=automata.left,
                                    num_points=num_points),
      windows, settings, automata.left,
      lambda out: float(np.max(out[0]["needed"])))
  records, diverged = jax.block_until_ready(trained.result)
  progress(2, 2)
  risk = np.asarray(records["risk"])                                   # (L, P, R)
  final = np.where(np.asarray(diverged), np.inf, risk[..., -1])
  best = np.minimum(np.asarray(best), np.nanmin(np.where(np.isfinite(risk), risk, np.inf),
                                                axis=(1, 2)))
  rows = {"best_risk": best, "best_grad_norm": np.asarray(grad_norm),
          "grid_covered": (np.asarray(records["needed"]) <= trained.num_points).all(axis=(1, 2))}
  steps = np.asarray(records["steps"])[0, 0]
  for name in PLAN_NAMES:
    index = np.array([i for i, (plan, _) in enumerate(entries) if plan == name])
    choice = index[np.argmin(final[:, index], axis=1)]
    rows[name] = final[np.arange(len(langs)), choice]
    rows[name + "_etas"] = [entries[i][1] for i in choice]
    if name == "joint":
      rows["joint_choice"] = choice
  lag = [metrics.horizon_free_lag(records["alpha"][row, i], records["beta"][row, i],
                                  records["risk"][row, i], best[row] + settings.epsilon, steps)
         for row, i in enumerate(rows["joint_choice"])]
  rows["tau_epsilon"] = np.array([int(m.tau_eps) for m in lag])
  rows["half_time_ratio"] = np.array([float(m.half_time_ratio) for m in lag])
  joint_risk = risk[np.arange(len(langs)), rows["joint_choice"]]       # (L, R)
  rows["joint_curve"] = joint_risk
  rows["steps"] = steps
  return rows


__all__ = ["Automata", "LAYOUTS", "PLAN_NAMES", "Settings", "plan_grid", "run"]
