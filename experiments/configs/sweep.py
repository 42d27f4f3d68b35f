"""Phase diagram of the three-phase plan at d = 50 over (η1, η2) (the README's main job).

T = 10^4 output steps in phase 3, evaluated in closed form (O(1) in T).
  python -m experiments.sweep --config experiments/configs/sweep.py --workdir runs/pd
Override any field, e.g. --config.eta1.num=64 --config.d_list='(100,)'.
"""

import ml_collections

from experiments import grids


def get_config() -> ml_collections.ConfigDict:
  config = ml_collections.ConfigDict()
  # Any registered language: occurrence | any_of | all_of (letters below), or a regular one
  # such as even_pairs, parity, 'tomita:3', 'dyck:2' (alphabet {0, 1}: d_list=(2,)); or your
  # own: an automaton file 'path.json' or a factory 'module:function' (lj.languages.from_spec).
  config.language = "occurrence"
  # The length law: "" for the language's balanced geometric law (p = 1/(d-1) for
  # occurrence), else 'geometric:0.1', 'fixed:20' or 'shifted_poisson:3.0'.
  config.length = ""
  config.letters = (0,)
  config.d_list = (50,)
  config.loss = "squared"
  config.route = "auto"
  config.plans = ("three_phase",)    # joint | three_phase | attention_first | output_only | ...
  config.steps_list = (10_000,)      # T
  # "gd": gradient descent, the step sizes below and T steps. "flow": each plan's exact
  # gradient flow (lj.flow, docs/theory.md §5): a phase of k steps at η flows at rate η for
  # k time units (the same path as rate 1 for k·η), so the eta grids are rates and T the
  # last phase's duration; GD at η follows it up to O(η).
  config.dynamics = "gd"
  config.eta1 = grids.spec(1.0, 1e4, 512)
  config.eta2 = grids.spec(1.0, 1e6, 512)
  config.eta3 = grids.spec(1.0, 1.0, 1, points=(1.0,))
  config.eta = grids.spec(1.0, 1.0, 1, points=(1.0,))
  config.n_samples_list = (0,)       # 0: population risk; N > 0: empirical risk of N samples
  config.num_seeds = 1               # seeds per configuration (finite-sample plans)
  config.success_risk = 1e-3         # ε: a configuration succeeds when final risk <= ε
  config.num_records = 64            # records per run (risk curves, lag gap)
  config.chunk_size = 8192
  config.batch_size = 64             # configurations per vmapped batch (lax.map walks them)
  config.max_risk = 1e8              # a risk above this marks divergence
  config.save_trajectories = False
  # Record λ_max of the Hessian at every record and label each run's regime (monotone,
  # catapult, oscillating, …: lj.dynamics.run_label, docs/theory.md §5d): results.csv gains
  # label, period, max_sharpness, end_sharpness, first_unstable_step, initial_sharpness, and
  # phase_diagram.png a regime panel with the line η1 = 2/λ_max(θ0). Off: as fast as before.
  config.sharpness = False
  config.diagram_axes = ("eta1", "eta2")
  # Dash the exact boundary of lj.regimes on phase_diagram.png and name the η1 wall in the
  # regime report (three_phase, population, squared loss; costs one compilation).
  config.exact_boundary = True
  # Risk-vs-step curves for these configurations (nearest grid points), as (η1, η2).
  config.curves = ((50.0, 2500.0), (5.0, 2500.0), (50.0, 25.0), (1000.0, 1e5))
  return config.lock()
