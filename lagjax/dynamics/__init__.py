"""The dynamics layer (docs/theory.md section 5): training plans and the engines that run them.

- `plans`: phases, plans as data, the registry of named plans;
- `runner`: the one training loop (divergence rule, record grids);
- `trajectory`: the one run record every engine returns (`Trajectory`);
- `train`: plans on a language with exact population or empirical gradients;
- `output_phase`: the output phase in closed form, the attention gradient at α = 0 (§4-5);
- `closed_form`: the closed-form engine, O(1)-in-T plans;
- `flow`: plans as exact population gradient flow, solved by diffrax (lj.flow);
- `engines`: the engine contract (supports, build) over closed_form, train and flow;
- `task_train`: plans on sampled tasks;
- `erf_train`: exact projected GD of the erf SLR model (section 7b);
- `metrics`: attention-lag metrics of a trajectory (section 6);
- `sharpness`: the top eigenvalues of the risk's Hessian (section 5d);
- `run_label`: the regime of a run from its risk curve (section 5d).
"""

from lagjax.dynamics import (
    closed_form,
    engines,
    erf_train,
    flow,
    metrics,
    output_phase,
    plans,
    run_label,
    runner,
    sharpness,
    task_train,
    train,
    trajectory,
)

__all__ = ["closed_form", "engines", "erf_train", "flow", "metrics", "output_phase", "plans",
           "run_label", "runner", "sharpness", "task_train", "train", "trajectory"]
