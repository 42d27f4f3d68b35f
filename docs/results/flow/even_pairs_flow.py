"""Even pairs under gradient flow to t = 10⁶: the README's figure (docs/theory.md §5).

The 17-parameter model of issue 35 (last-token query, first/last position tables, CLS
token) flows from θ0 = 0 under joint flow at rate 1 (lj.flow, Kvaerno5, rtol 1e-8); GD at
η = 1 for 1000 steps (lj.train) is drawn on the same axes, t = step. Writes
even_pairs_flow.png and even_pairs_flow.md beside this file:

  python docs/results/flow/even_pairs_flow.py
"""

import os
import time

import jax

jax.config.update("jax_enable_x64", True)

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import lagjax as lj  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
HORIZON = 10**6
EPSILON = 1e-2


def main():
  lang = lj.languages.from_spec("even_pairs")
  theta0 = lj.init_params(lang.d, cls=True, query="last", positions="first_last")
  # A geometric grid with every power of ten on it, so R(10^k) is a record.
  times = np.unique(np.concatenate([[0.0], np.geomspace(1.0, HORIZON, 61),
                                    10.0 ** np.arange(7)]))
  start = time.time()
  run = lj.flow(lang, lj.plans.joint(1.0, HORIZON), theta0, records=times)
  first = time.time() - start
  start = time.time()
  stopped = lj.flow(lang, lj.plans.joint(1.0, HORIZON), theta0, records=times,
                    epsilon=EPSILON)
  second = time.time() - start
  gd = lj.train(lang, lj.plans.joint(1.0, 1000), theta0, record_every=10)

  time_axis, risk = np.asarray(run.time), np.asarray(run.risk)
  tau, plateau_exit = float(stopped.tau_eps), float(run.plateau_exit)
  figure, axes = plt.subplots(figsize=(6.4, 4.2))
  axes.loglog(time_axis[1:], risk[1:], color="C0", label="gradient flow (lj.flow)")
  shown = np.unique(np.geomspace(1, len(gd.steps) - 1, 16).astype(int))  # even on log axes
  axes.loglog(np.asarray(gd.steps)[shown], np.asarray(gd.risk)[shown], "o", ms=3, color="C1",
              label="GD at η = 1 (lj.train), t = step")
  axes.axvspan(time_axis[1], plateau_exit, color="0.5", alpha=0.12, lw=0,
               label=f"plateau, left at t = {plateau_exit:.0f}")
  axes.axvline(tau, color="C3", ls="--", label=f"τ_ε = {tau:.0f} (ε = {EPSILON:g})")
  axes.axhline(EPSILON, color="C3", lw=0.6, ls="--")
  axes.set_xlabel("t")
  axes.set_ylabel("population risk R(t)")
  axes.set_title("Even pairs, last-token query, first/last tables, CLS")
  axes.legend(loc="lower left", fontsize=8)
  figure.tight_layout()
  figure.savefig(os.path.join(HERE, "even_pairs_flow.png"), dpi=150)

  at = {t: float(risk[np.flatnonzero(time_axis == t)[0]]) for t in (1e3, 1e4, 1e5, 1e6)}
  lines = ["# Even pairs under gradient flow to t = 10⁶", "",
           "Written by `python docs/results/flow/even_pairs_flow.py` (lj.flow, Kvaerno5, "
           "rtol 1e-8, atol 1e-10).", "",
           "![R(t) of the flow and of GD at η = 1, log axes](even_pairs_flow.png)", "",
           "| t | R(t) |", "|---|---|"]
  lines += [f"| {t:.0e} | {value:.4e} |" for t, value in at.items()]
  lines += ["", f"- GD at η = 1 after 1000 steps: R = {float(gd.risk[-1]):.4e} "
            f"(flow at t = 10³: {at[1e3]:.4e})",
            f"- plateau exit (R(t) ≤ ½ R(t/10)): t = {plateau_exit:.4g}",
            f"- τ_ε (ε = {EPSILON:g}): t = {tau:.6g}",
            f"- solver steps {int(run.num_steps)}, rejected {int(run.num_rejected)}; "
            f"first call {first:.1f} s (compiling), second {second:.1f} s"]
  with open(os.path.join(HERE, "even_pairs_flow.md"), "w") as handle:
    handle.write("\n".join(lines) + "\n")
  print("\n".join(lines))


if __name__ == "__main__":
  main()
