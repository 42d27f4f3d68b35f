"""The output phase in closed form, and the attention gradient at α = 0 (docs/theory.md §4, §5).

At fixed α the squared risk is R(β) = ½ βᵀHβ - gᵀβ + ½ with H = E[W Wᵀ],
g = E[y W] (risk.moments). Gradient descent with the per-token
gradient on tied groups of sizes k (metric D = diag(k)) is::

    β_{t+1} = β_t - η D^{-1} (H β_t - g).

In z = Qᵀ D^{1/2} β, with D^{-1/2} H D^{-1/2} = Q Λ Qᵀ and b = Qᵀ D^{-1/2} g,
each coordinate evolves alone::

    z_T = (1 - ηλ)^T z_0 + η b S_T(λ),   S_T(λ) = Σ_{s<T} (1 - ηλ)^s,

with S_T = (1 - (1-ηλ)^T)/(ηλ) (computed with log1p/expm1, accurate for tiny
ηλ) and S_T = T at ηλ = 0; T = ∞ gives the minimizer on the range of H when
every ``|1 - ηλ| < 1``. There, directions with λ <= NULL_RTOL·λ_max count as the null
space of H: in exact arithmetic g has no component there, so the computed one is
roundoff, and b/λ would turn it into garbage (NaN at a CLS score spread of 50).

Under gradient flow (the flow form of an output phase: rate r, duration t) the same
coordinates solve dz/dt = -rλ z + r b exactly, z(t) = e^{-rλt} z(0) + b (1 - e^{-rλt})/λ,
through the same eigendecomposition (output_flow_solver), including t = ∞; it is GD's limit
η → 0 at ηT = t.

The risk at fixed α is evaluated as a sum of squares (quadratic_risk), >= 0 by
construction, not as the expanded ½βᵀHβ - gᵀβ + ½, which cancels near zero risk.

While α = 0, the attention gradient is a quadratic form in β (zero_score_constants).

This module is the mathematics; the closed-form engine that runs plans with it is
lagjax/dynamics/closed_form.py, and the regimes (lagjax/analysis/regimes.py) read it too.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from lagjax import linalg

NULL_RTOL = 1e-12


def output_gd(hessian, target, sizes, beta0, eta, steps):
  """β after `steps` GD steps of size η on ½βᵀHβ - gᵀβ in the metric diag(sizes): the
  output phase in closed form, β_T = D^{-1/2} Q z_T (docs/theory.md §5).

  Args:
    hessian: H (G, G).
    target: g (G,).
    sizes: group sizes k (G,) (1 for CLS), the metric D = diag(k).
    beta0: initial β (G,).
    eta: step size η.
    steps: number of steps T (may be jnp.inf).

  Returns:
    β_T (G,). Non-finite or huge when some ``|1 - ηλ| > 1`` (the run diverges).

  Example:
    Two one-hot masses W, one per class (P = ½ each): H = ½I, g = (½, -½), and
    β = H⁻¹g = (1, -1) fits y exactly. With η = 1 every ηλ = ½:

    >>> H, g, sizes = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5]), jnp.ones(2)
    >>> output_gd = lj.dynamics.output_phase.output_gd
    >>> np.round(np.asarray(output_gd(H, g, sizes, jnp.zeros(2), 1.0, 1)), 6).tolist()
    [0.5, -0.5]
    >>> np.round(np.asarray(output_gd(H, g, sizes, jnp.zeros(2), 1.0, jnp.inf)),
    ...          6).tolist()  # T = ∞: the minimizer
    [1.0, -1.0]
  """
  return output_gd_path(hessian, target, sizes, beta0, eta, jnp.asarray(steps)[None])[0]


def output_gd_path(hessian, target, sizes, beta0, eta, steps):
  """β_t for every t in `steps` (R,), from one eigendecomposition; returns (R, G).

  The closed form β_t = D^{-1/2} Q [(1 - ηλ)^t z_0 + η b S_t(λ)] of docs/theory.md §5 at
  each recorded t, so a record at t = 10⁶ costs what one at t = 1 does.

  Args:
    hessian, target, sizes, beta0, eta: H, g, the group sizes, β_0 and η, as for
      `output_gd_solver`.
    steps: (R,) step counts t (may include jnp.inf).

  Returns:
    (R, G) β_t, one row per entry of steps.

  Example:
    >>> H, g, sizes = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5]), jnp.ones(2)  # β* = (1, -1)
    >>> path = lj.dynamics.output_phase.output_gd_path(H, g, sizes, jnp.zeros(2), 1.0,
    ...                                                jnp.array([1.0, 2.0, jnp.inf]))
    >>> np.round(np.asarray(path), 6).tolist()  # β_t = (1 - 2^-t) β*
    [[0.5, -0.5], [0.75, -0.75], [1.0, -1.0]]
  """
  return output_gd_solver(hessian, target, sizes, beta0, eta)(steps)


def output_gd_solver(hessian, target, sizes, beta0, eta):
  """steps (R,) -> β_t (R, G) of output_gd_path, with the eigendecomposition done once, so
  that further step counts (divergence location) cost O(R G²) (docs/theory.md §5).

  Args:
    hessian: H (G, G).
    target: g (G,).
    sizes: group sizes k (G,) (1 for CLS).
    beta0: initial β (G,).
    eta: step size η.

  Returns:
    A function steps (R,) -> (R, G) β_t, jittable.

  Example:
    >>> H, g, sizes = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5]), jnp.ones(2)  # β* = (1, -1)
    >>> solver = lj.dynamics.output_phase.output_gd_solver(H, g, sizes, jnp.zeros(2), 1.0)
    >>> np.round(np.asarray(solver(jnp.array([3.0]))), 6).tolist()  # (1 - 2^-3) β*
    [[0.875, -0.875]]
  """
  root = jnp.sqrt(sizes)
  eigenvalues, basis = linalg.symmetric_eigh(hessian / root[:, None] / root[None, :])
  z0 = basis.T @ (root * beta0)
  b = basis.T @ (target / root)
  rate = eta * jnp.maximum(eigenvalues, 0.0)                       # ηλ per direction, (G,)
  return functools.partial(_output_gd_at, eigenvalues, basis, root, z0, eta * b, rate)


def _output_gd_at(eigenvalues, basis, root, z0, drive, rate, steps):
  """β_t = D^{-1/2} Q z_t for every t in steps (R,) (see the module docstring)."""
  t = jnp.asarray(steps, dtype=jnp.float64)[:, None]               # (R, 1)
  # (1 - ηλ)^t = sign · exp(t log|1 - ηλ|), with log1p for small ηλ so that slow
  # directions keep full precision; t = ∞ gives 0 (contracting) or ∞ (not).
  contracting = rate < 1.0
  log_abs = jnp.where(contracting, jnp.log1p(-jnp.where(contracting, rate, 0.0)),
                      jnp.log(jnp.abs(1.0 - jnp.where(contracting, 2.0, rate))))
  finite_t = jnp.where(jnp.isinf(t), 0.0, t)
  sign = jnp.where(~contracting & (jnp.mod(finite_t, 2) == 1), -1.0, 1.0)
  exponent = jnp.where(rate == 0, 0.0, t * log_abs)                 # no ∞·0
  power = jnp.where(t == 0, 1.0, sign * jnp.exp(exponent))
  # (1 - ηλ)^∞ oscillates without decay when ηλ = 2: call it divergent.
  power = jnp.where(jnp.isinf(t) & (rate == 2.0), jnp.inf, power)
  # S_t = Σ_{s<t} (1 - ηλ)^s = (1 - power)/(ηλ), via expm1 when contracting, t when ηλ = 0.
  geometric_sum = jnp.where(
      rate == 0, t,
      jnp.where(contracting, -jnp.expm1(exponent), 1.0 - power) / jnp.where(rate == 0, 1.0, rate))
  null = jnp.isinf(t) & (eigenvalues <= NULL_RTOL * eigenvalues[-1])  # (R, G)
  z = jnp.where(null, z0, power * z0 + jnp.where(drive == 0, 0.0, drive * geometric_sum))
  return (z @ basis.T) / root


def output_flow(hessian, target, sizes, beta0, rate, time):
  """β(t) of the gradient flow dβ/dt = -r D^{-1}(Hβ - g) at fixed α: the flow form of an
  output phase (rate r, duration t), solved exactly (docs/theory.md §5, the linear phase).

  Args:
    hessian: H (G, G).
    target: g (G,).
    sizes: group sizes k (G,) (1 for CLS), the metric D = diag(k).
    beta0: β(0) (G,).
    rate: the phase's rate r (>= 0), its step size η under GD.
    time: the time t (>= 0, may be jnp.inf).

  Returns:
    β(t) (G,).

  Example:
    Two one-hot masses W, one per class: H = ½I, g = (½, -½), β* = (1, -1), and
    β(t) = (1 - e^{-t/2}) β* at r = 1:

    >>> H, g, sizes = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5]), jnp.ones(2)
    >>> output_flow = lj.dynamics.output_phase.output_flow
    >>> np.round(np.asarray(output_flow(H, g, sizes, jnp.zeros(2), 1.0, 2 * np.log(2))),
    ...          6).tolist()
    [0.5, -0.5]
    >>> np.round(np.asarray(output_flow(H, g, sizes, jnp.zeros(2), 1.0, jnp.inf)), 6).tolist()
    [1.0, -1.0]
  """
  return output_flow_solver(hessian, target, sizes, beta0, rate)(jnp.asarray(time)[None])[0]


def output_flow_path(hessian, target, sizes, beta0, rate, times):
  """(β(t), R(β(t))) at every t of `times` (R,) from one eigendecomposition: the linear
  phase's path and its risk (docs/theory.md §5, the linear phase).

  Args:
    hessian, target, sizes, beta0, rate: H, g, the group sizes, β(0) and r, as for
      `output_flow_solver`.
    times: (R,) times t >= 0 (may include jnp.inf).

  Returns:
    (β (R, G), R (R,)), the risk as the sum of squares of `quadratic_risk`.

  Example:
    >>> H, g, sizes = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5]), jnp.ones(2)  # β* = (1, -1)
    >>> beta, risk = lj.dynamics.output_phase.output_flow_path(
    ...     H, g, sizes, jnp.zeros(2), 1.0, jnp.array([0.0, 2 * np.log(2), jnp.inf]))
    >>> np.round(np.asarray(risk), 6).tolist()  # R = ½ e^{-t}
    [0.5, 0.125, 0.0]
  """
  beta = output_flow_solver(hessian, target, sizes, beta0, rate)(times)
  return beta, gram_risk(gram_factors(hessian, target), beta)


def output_flow_solver(hessian, target, sizes, beta0, rate):
  """times (R,) -> β(t) (R, G) of the linear phase dβ/dt = -r D^{-1}(Hβ - g), with the
  eigendecomposition done once (docs/theory.md §5, the linear phase).

  In z = Qᵀ D^{1/2} β (D^{-1/2} H D^{-1/2} = Q Λ Qᵀ, b = Qᵀ D^{-1/2} g) each coordinate
  solves dz/dt = -rλ z + r b alone::

    z(t) = e^{-rλt} z(0) + r b E_t(λ),   E_t(λ) = (1 - e^{-rλt})/(rλ) = -expm1(-rλt)/(rλ),

  E_t = t at rλ = 0, so β(t) = β* + D^{-1/2} Q e^{-rΛt} Qᵀ D^{1/2} (β(0) - β*) on the range
  of H. Directions with λ <= NULL_RTOL·λ_max are H's null space, where g has no component in
  exact arithmetic: they stay at z(0) for every t (no drift of roundoff times t), and
  t = ∞ gives the minimizer closest to β(0) in the metric D. The same eigendecomposition as
  `output_gd_solver`; this is its limit η → 0 at ηT = t (the GD ↔ flow correspondence).

  Args:
    hessian: H (G, G).
    target: g (G,).
    sizes: group sizes k (G,) (1 for CLS).
    beta0: β(0) (G,).
    rate: r (>= 0).

  Returns:
    A function times (R,) -> (R, G) β(t), jittable.

  Example:
    >>> H, g, sizes = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5]), jnp.ones(2)  # β* = (1, -1)
    >>> solver = lj.dynamics.output_phase.output_flow_solver(H, g, sizes, jnp.zeros(2), 2.0)
    >>> np.round(np.asarray(solver(jnp.array([np.log(4.0)]))), 6).tolist()  # 1 - e^{-rt/2}
    [[0.75, -0.75]]
  """
  root = jnp.sqrt(sizes)
  eigenvalues, basis = linalg.symmetric_eigh(hessian / root[:, None] / root[None, :])
  eigenvalues = jnp.maximum(eigenvalues, 0.0)
  null = eigenvalues <= NULL_RTOL * eigenvalues[-1]                 # (G,): includes H = 0
  z0 = basis.T @ (root * beta0)
  drive = jnp.where(null, 0.0, rate * (basis.T @ (target / root)))  # r b, 0 on the null space
  return functools.partial(_output_flow_at, basis, root, z0, drive,
                           jnp.where(null, 0.0, rate * eigenvalues))


def _output_flow_at(basis, root, z0, drive, decay, times):
  """β(t) = D^{-1/2} Q z(t) for every t in times (R,) (see output_flow_solver)."""
  t = jnp.asarray(times, dtype=jnp.float64)[:, None]               # (R, 1)
  still = decay == 0                                                # rλ = 0: z stays (drive 0)
  exponent = jnp.where(still, 0.0, -decay * t)                      # no ∞·0
  # E_t = -expm1(-rλt)/(rλ): full precision for small rλt, 1/(rλ) at t = ∞.
  relaxed = jnp.where(still, 0.0, -jnp.expm1(exponent) / jnp.where(still, 1.0, decay))
  z = jnp.exp(exponent) * z0 + drive * relaxed
  return (z @ basis.T) / root


def quadratic_risk(hessian, target, beta):
  """R(β) = ½ E[(βᵀW - y)²] = ½ βᵀHβ - gᵀβ + ½ at fixed α, in a form that cannot cancel
  (docs/theory.md §3a; numerics).

  With v = (β, 1) and the Gram matrix M = E[(W, -y)(W, -y)ᵀ] = [[H, -g], [-gᵀ, 1]]
  (PSD: y² = 1), R = ½ vᵀMv = ½ Σ_i μ_i⁺ (u_iᵀv)² = ½ ‖S v‖², S = diag(√μ⁺) Uᵀ,
  over the eigenpairs (μ_i, u_i) of M, with μ⁺ = max(μ, 0). A sum of squares, so
  R >= 0 by construction. Jacobi (linalg.symmetric_eigh) is backward stable, so this is the
  exact risk of a Gram matrix within c·ε·‖M‖ of the computed one (ε = 2^-53): the same absolute
  error bound c·ε·‖M‖·‖v‖² as the expanded form, which can come out negative
  near a zero-risk minimizer (-2.7e-15 at the end of the three-phase plan).

  Args:
    hessian: H (G, G).
    target: g (G,).
    beta: β (..., G).

  Returns:
    R (...,).

  Example:
    >>> H, g = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5])  # one-hot W per class: β* = (1, -1)
    >>> beta = jnp.array([[0.0, 0.0], [0.5, -0.5], [1.0, -1.0]])
    >>> np.round(np.asarray(lj.dynamics.output_phase.quadratic_risk(H, g, beta)), 6).tolist()
    [0.5, 0.125, 0.0]
  """
  return gram_risk(gram_factors(hessian, target), beta)


def gram_factors(hessian, target):
  """S = diag(√μ⁺) Uᵀ from the eigenpairs of M = [[H, -g], [-gᵀ, 1]], so that SᵀS = M up
  to roundoff and R(β) = ½ ‖S (β, 1)‖² (quadratic_risk); (G+1, G+1).

  Computed once per fixed α (docs/theory.md §5, numerics), then `gram_risk` evaluates
  every β.

  Args:
    hessian: H (G, G).
    target: g (G,).

  Returns:
    S (G+1, G+1).

  Example:
    >>> H, g = 0.5 * jnp.eye(2), jnp.array([0.5, -0.5])
    >>> S = lj.dynamics.output_phase.gram_factors(H, g)
    >>> S.shape
    (3, 3)
    >>> bool(jnp.allclose(S.T @ S, jnp.array([[0.5, 0, -0.5], [0, 0.5, 0.5], [-0.5, 0.5, 1]])))
    True
  """
  column = -target[:, None]
  gram = jnp.block([[hessian, column], [column.T, jnp.ones((1, 1), column.dtype)]])
  eigenvalues, basis = linalg.symmetric_eigh(gram)
  return jnp.sqrt(jnp.maximum(eigenvalues, 0.0))[:, None] * basis.T


def gram_risk(root, beta):
  """R = ½ ‖S (β, 1)‖² with S = gram_factors(H, g); beta (..., G) -> (...,)
  (docs/theory.md §5, numerics).

  Args:
    root: S = gram_factors(H, g), (G+1, G+1).
    beta: β (..., G).

  Returns:
    R (...,), >= 0 by construction.

  Example:
    >>> S = lj.dynamics.output_phase.gram_factors(0.5 * jnp.eye(2), jnp.array([0.5, -0.5]))
    >>> round(float(lj.dynamics.output_phase.gram_risk(S, jnp.zeros(2))), 6)  # R(0) = ½
    0.5
  """
  return 0.5 * ((beta @ root[:, :-1].T + root[:, -1]) ** 2).sum(-1)


def zero_score_constants(moments_at, size: int):
  """(H, g, B, C) at α = 0 for moments_at(α) -> (H, g) on stacked scores α (size,).

  While α = 0 the attention gradient is a quadratic form in β with no constant
  term (docs/theory.md §5), ∂R/∂α_j = ½ βᵀ ∂_jH β - ∂_j gᵀ β = (Bβ + ½ C[β, β])_j
  with B = -(∂g)ᵀ and C_j = ∂_jH; the closed form's attention step from zero and
  the regime laws (lagjax/analysis/regimes.py) both read these (§4, §8.1).

  Args:
    moments_at: α (size,) -> (H, g), e.g. ``risk.moments.moments_fn`` at β-free params.
    size: the number of stacked scores (G, or G + 1 with the CLS token).

  Returns:
    The tuple (H, g, B, C), with H (size, size) and g (size,) at α = 0, B (size, size)
    and C (size, size, size), C[j] = ∂_jH.

  Example:
    >>> lang = lj.occurrence(3)
    >>> moments = lj.risk.moments.moments_fn(lang, lj.partition.of_language(lang))
    >>> constants = jax.jit(lj.dynamics.output_phase.zero_score_constants, static_argnums=(0, 1))
    >>> H, g, B, C = constants(lambda alpha: moments({"alpha": alpha}), 2)
    >>> np.round(np.asarray(g), 6).tolist()  # (1/d, -1/d) on the groups {a}, the rest (§4)
    [0.333333, -0.333333]
    >>> beta = jnp.array([1.0, -0.5])  # after one output step of η = 3
    >>> gradient = B @ beta + 0.5 * jnp.einsum("jgh,g,h->j", C, beta, beta)
    >>> abs(float(gradient.sum())) < 1e-12  # Σ_g ∂R/∂α_g = 0
    True
    >>> sizes = jnp.array([1.0, 2.0])  # the attention step α = -η2 gradient / k, η2 = 9
    >>> np.round(np.asarray(-9.0 * gradient / sizes), 6).tolist()
    [0.754198, -0.377099]
  """
  origin = jnp.zeros(size)
  hessian, target = moments_at(origin)
  d_hessian, d_target = jax.jacfwd(moments_at)(origin)  # (G, G, G), (G, G): last = ∂α_j
  return hessian, target, -d_target.T, jnp.moveaxis(d_hessian, -1, 0)
