"""Does exact gradient noise predict the divergences of Table 1's per-phase OR row? (issue 36
item 4; docs/theory.md §3f, §5d).

Table 1's sampled row (OR, d = 50, direct attention, three_phase_per_phase, (η_out, η_attn) =
(3, 3·10⁴), SGD on fresh minibatches of B = 32, T = 1000: 250 output, 250 attention, 500 output
steps) diverged in 3 of 8 test seeds; the exact population run converges. This script:

1. runs the exact tied population plan (lj.train, sharpness=1);
2. at the state before the first attention step computes the exact Σ(θ) (lj.gradient_noise on
   token groups {0, 1}, {2}, {3..49} and CLS: letter 2 alone gives one non-OR letter's own
   per-token noise, which the two-group tie cannot show) and the step noise η·sd/(k_g·√B) per
   token, against the mean step;
3. samples K perturbed states (β from phase 1's SGD covariance over its 250 steps, α from one
   attention step with minibatch noise η_attn²·Σ/B), continues the rest of the plan exactly
   (lj.train's runner on the same groups, sharpness=1) and counts the runs that diverge or
   whose output phase has η_out·λ_max > 2.

Run: nice -n 10 python docs/results/noise/noise_or.py [K]  (K = 8: about 4 min on 2 shared
CPU cores)
"""

import math
import sys
import time

import jax
import jax.flatten_util
import numpy as np

jax.config.update("jax_enable_x64", True)
import lagjax as lj  # noqa: E402
from experiments import table1_exact, table1_protocol  # noqa: E402
from experiments.configs import table1 as table1_config  # noqa: E402
from lagjax.models import direct  # noqa: E402

ETA_OUT, ETA_ATTN = 3.0, 3e4
NUM_PERTURBED = int(sys.argv[1]) if len(sys.argv) > 1 else 8


def plan_of(steps1, steps2, steps3):
  """three_phase with Table 1's step sizes and the given phase lengths (0: phase dropped)."""
  phases = (("output", ETA_OUT, steps1), ("attention", ETA_ATTN, steps2),
            ("output", ETA_OUT, steps3))
  return lj.plans.Plan(tuple(lj.plans.Phase(*p) for p in phases if p[2] > 0))


def main():
  start = time.time()
  config = table1_config.get_config()
  batch, steps = config.batch_size, config.task_settings["or"].steps
  first, second = (int(steps * f) for f in config.phase_fractions["three_phase"])
  lang, theta0 = table1_exact.language_and_theta0("or", config)
  plan = table1_protocol.make_plan("three_phase", {"eta1": ETA_OUT, "eta2": ETA_ATTN,
                                                   "eta3": ETA_OUT}, steps, "sgd", (0.25, 0.25))
  print(f"OR d={lang.d}, B={batch}, T={steps}, phases {first}/{second}/{steps - first - second}")
  run = lj.train(lang, plan, theta0, tied=True, sharpness=1)
  risk, sharp = np.asarray(run.risk), np.asarray(run.sharpness)[:, 0]
  print(f"exact run: diverged={bool(run.diverged)}, R at steps 0/{first}/{first + 1}/"
        f"{first + second}/{steps}: " + ", ".join(f"{risk[i]:.4g}" for i in
                                                  (0, first, first + 1, first + second, steps)))
  print(f"  sharpness λ_max (per-token metric, trained groups) before steps {first}, "
        f"{first + 1}, {first + second}: {sharp[first]:.4g}, {sharp[first + 1]:.3g}, "
        f"{sharp[first + second]:.4g}; η_out·λ in phase 3 = {ETA_OUT * sharp[first + second]:.3g}")
  alpha1 = np.asarray(run.alpha)[first + 1]
  print(f"  α after the first attention step: letters {alpha1[0]:.2f}, others {alpha1[2]:.2f}, "
        f"CLS {float(np.asarray(run.params['alpha_cls'])):.2f}")

  # 2. The state before the first attention step, on groups {0,1}, {2}, {3..49}.
  partition = lj.partition.Partition(((0, 1), (2,), tuple(range(3, lang.d))))
  before = lj.train(lang, plan_of(first, 0, 0), theta0, tied=True).params
  grouped = direct.group_params(partition, {k: np.asarray(v) for k, v in before.items()})
  noise = lj.gradient_noise(lang, grouped, partition=partition, method="exact")
  flat, unravel = jax.flatten_util.ravel_pytree(grouped)
  sizes = np.asarray(jax.flatten_util.ravel_pytree(unravel(np.ones_like(flat)) | {
      "alpha": partition.sizes, "beta": partition.sizes})[0])
  names = [f"{p}[{g}]" for p, g in zip(
      ["alpha"] * 3 + ["alpha_cls"] + ["beta"] * 3 + ["beta_cls"],
      ["0,1", "2", "3..49", "", "0,1", "2", "3..49", ""], strict=True)]
  mean, cov = np.asarray(noise.mean), np.asarray(noise.covariance)
  sd = np.sqrt(np.diag(cov))
  is_alpha = np.array([n.startswith("alpha") for n in names])
  print(f"exact Σ at step {first} (mass left out {noise.mass_left_out:.1e}); per token, one step:")
  print(f"  {'param':12s} {'mean step':>12s} {'noise sd':>12s}  (-η·∂R/k, η·sd/(k√B))")
  for i, name in enumerate(names):
    eta = ETA_ATTN if is_alpha[i] else ETA_OUT
    step_sd = eta * sd[i] / (sizes[i] * np.sqrt(batch))
    print(f"  {name:12s} {-eta * mean[i] / sizes[i]:12.4g} {step_sd:12.4g}")

  # The event that decides phase 3: the CLS token out-scoring the OR letters after the first
  # attention step (then every string attends to CLS, the β-Hessian's top eigenvalue is
  # E[w_cls²] = 1 and η_out·λ_max = 3 > 2). Its probability under the step's Gaussian noise at
  # the exact β (phase 1's β noise left out here; the runs below include it):
  contrast = np.zeros_like(flat)
  contrast[names.index("alpha_cls[]")] = 1.0
  contrast[names.index("alpha[0,1]")] = -1.0
  step_mean = -ETA_ATTN * mean / sizes
  step_cov = ETA_ATTN ** 2 * cov / np.outer(sizes, sizes) / batch
  gap, gap_sd = float(contrast @ step_mean), float(np.sqrt(contrast @ step_cov @ contrast))
  print(f"α_cls - α(0,1) after the first attention step: {gap:.1f} ± {gap_sd:.1f} (one sd); "
        f"P(> 0) = {0.5 * math.erfc(-gap / (gap_sd * math.sqrt(2))):.3f}")

  # 3. K perturbed states: β from phase 1's SGD covariance (u = √k θ, plain GD there:
  # C ← (I - ηH) C (I - ηH) + η² Σ_u / B over its steps), α from one noisy attention step.
  root_k = np.sqrt(sizes)
  beta_idx = np.flatnonzero(~is_alpha)
  route = lj.risk_fn(lang, partition=partition, cls=True)
  hess = np.asarray(jax.hessian(lambda x: route.risk(unravel(x)))(flat))
  h_u = (hess / np.outer(root_k, root_k))[np.ix_(beta_idx, beta_idx)]
  sigma_u = (cov / np.outer(root_k, root_k))[np.ix_(beta_idx, beta_idx)]
  step = np.eye(len(beta_idx)) - ETA_OUT * h_u
  accumulated = np.zeros_like(h_u)  # after phase 1's steps, from C = 0 (Σ frozen at its end)
  for _ in range(first):
    accumulated = step @ accumulated @ step.T + ETA_OUT ** 2 * sigma_u / batch
  beta_cov = accumulated / np.outer(root_k[beta_idx], root_k[beta_idx])
  print(f"phase-1 accumulated β sd per token: {np.sqrt(np.diag(beta_cov)).round(4).tolist()}; "
        f"η_out·λ(H_β) = {(ETA_OUT * np.linalg.eigvalsh(h_u)).round(3).tolist()}")
  alpha_idx = np.flatnonzero(is_alpha)
  rng = np.random.default_rng(0)
  starts = []
  for _ in range(NUM_PERTURBED):
    x = np.array(flat, dtype=float)
    x[beta_idx] += rng.multivariate_normal(np.zeros(len(beta_idx)), beta_cov)
    # one attention step of minibatch SGD at the perturbed β: mean + noise, per token (/k_g)
    moments = lj.gradient_noise(lang, unravel(x), partition=partition, method="exact")
    grad = np.asarray(moments.mean)[alpha_idx] + rng.multivariate_normal(
        np.zeros(len(alpha_idx)), np.asarray(moments.covariance)[np.ix_(alpha_idx, alpha_idx)]
        / batch)
    x[alpha_idx] -= ETA_ATTN * grad / sizes[alpha_idx]
    starts.append(x)
  rest_plan = plan_of(0, second - 1, steps - first - second)
  runner = lj.dynamics.train.make_runner(lang, rest_plan.slots(), partition,
                                         num_steps=steps - first - 1,
                                         layout=direct.layout(grouped), sharpness=1)
  runs = jax.jit(jax.vmap(lambda x: runner(unravel(x), jax.random.key(0), rest_plan.data())))(
      np.stack(starts))
  diverged, where = np.asarray(runs.diverged), np.asarray(runs.diverged_step)
  final = np.asarray(runs.risk)[:, -1]
  lam3 = np.asarray(runs.sharpness)[:, second - 1, 0]
  print("perturbed starts (per-token α after the first attention step) and outcomes:")
  for k, x in enumerate(starts):
    a = x[alpha_idx]
    step = first + 1 + where[k] if diverged[k] else -1
    print(f"  {k:2d}: α(0,1)={a[0]:8.1f} α(2)={a[1]:8.1f} α(3..49)={a[2]:7.1f} "
          f"α_cls={a[3]:8.1f}  diverged={bool(diverged[k])} at step {step:4d}  "
          f"final R={final[k]:.3g}  η_out·λ_max(phase 3 start)={ETA_OUT * lam3[k]:.3f}")
  unstable = np.sum(~diverged & (ETA_OUT * lam3 > 2))
  print(f"perturbed runs: {diverged.sum()}/{NUM_PERTURBED} diverged "
        f"({diverged.mean():.2f}; Table 1's sampled row: 3/8 = 0.375), {unstable} more with "
        f"η_out·λ_max > 2 in phase 3; {time.time() - start:.0f} s")


if __name__ == "__main__":
  main()
