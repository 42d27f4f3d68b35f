"""Tail exponents: R(t) − R* ~ C·t^(−a) on a window [t_lo, t_hi] of a run (docs/theory.md
§10b).

`fit_tail` reads a dense trajectory (times, risks) and the optimum R*:

1. the excess e(t) = R(t) − R* is kept where it stands above the noise of R: the solver
   (or the route) gives R to a relative error δ (default 1e-8, lj.flow's rtol), so
   σ(ln e) = δ·abs(R)/e, and points with e ≤ NOISE_MARGIN·δ·abs(R) (ln e uncertain by more than
   1 %) are dropped;
2. the global fit: weighted least squares of ln e = ln C − a·ln t with weights 1/σ(ln e)²;
   its standard error comes from those σ (known noise, no residual rescaling);
3. the local exponents: the same fit on `pieces` equal pieces of the window in ln t;
4. the rule, "one power" iff every local exponent is at least `min_exponent` (a smaller one
   is a plateau: over two decades t^(−0.05) moves e by 21 %) and their spread,
   max − min, is at most `max_spread`·a + 4·(the largest local standard error). A log
   correction passes: e = 1/(t ln t) has local exponents 1 + 1/ln t, 1.109 to 1.072 on
   [10⁴, 10⁶]; an exponential fails: its local exponent t/τ grows 100-fold over two decades;
5. the interval: from the smallest to the largest of the local exponents, widened to cover
   a ± 2 standard errors of the global fit, so that it holds both the drift of the local
   exponent across the window and the noise.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lagjax import validation

DEFAULT_WINDOW = (1e4, 1e6)
NOISE_MARGIN = 100.0    # keep e > 100·δ|R|: ln e known to 1 %
MIN_POINTS = 8          # records in the window above the noise, and
MIN_DECADES = 1.0       # the decades of t they must span
NO_TAIL = "no power-law tail"


@dataclasses.dataclass(frozen=True)
class TailFit:
  """What `fit_tail` found on its window (docs/theory.md §10b).

  Attributes:
    power_law: whether the local exponents are consistent with one power.
    exponent: a of the global weighted fit (NaN when too few points were usable).
    interval: (low, high), the local exponents' range widened to a ± 2 standard errors.
    standard_error: the global fit's standard error of a under the stated noise.
    constant: C of the global fit.
    local_exponents: a on each piece of the window, in order of t.
    window: (t_lo, t_hi).
    num_points: the records used (in the window, above the noise).
    reason: why there is no power-law tail ("" when there is one).

  Example:
    >>> t = np.geomspace(1.0, 1e6, 121)
    >>> lj.analysis.tails.fit_tail(t, 0.1 + 2.0 / t, 0.1)   # doctest: +ELLIPSIS
    TailFit(a = 1.0000 in [1.0000, 1.0000], C = 2, 41 points on [1e+04, 1e+06])
  """

  power_law: bool
  exponent: float
  interval: tuple[float, float]
  standard_error: float
  constant: float
  local_exponents: tuple[float, ...]
  window: tuple[float, float]
  num_points: int
  reason: str

  @property
  def verdict(self) -> str:
    """The row's cell: "a = 1.00 [0.99, 1.01]" or "no power-law tail (why)"."""
    if self.power_law:
      return f"a = {self.exponent:.4g} [{self.interval[0]:.4g}, {self.interval[1]:.4g}]"
    return f"{NO_TAIL} ({self.reason})"

  def __repr__(self) -> str:
    where = (f"{self.num_points} points on [{self.window[0]:.0e}, {self.window[1]:.0e}]")
    if self.power_law:
      return (f"TailFit(a = {self.exponent:.4f} in [{self.interval[0]:.4f}, "
              f"{self.interval[1]:.4f}], C = {self.constant:.4g}, {where})")
    return f"TailFit({NO_TAIL}: {self.reason}; {where})"


def _weighted_slope(log_t, log_e, sigma):
  """(intercept, slope, standard error of the slope) of ln e on ln t, weights 1/σ²."""
  weights = 1.0 / sigma**2
  design = np.stack([np.ones_like(log_t), log_t], axis=1)
  normal = design.T @ (weights[:, None] * design)
  solution = np.linalg.solve(normal, design.T @ (weights * log_e))
  covariance = np.linalg.inv(normal)
  return solution[0], solution[1], float(np.sqrt(covariance[1, 1]))


def fit_tail(times, risks, r_star: float, *, window=DEFAULT_WINDOW, rtol: float = 1e-8,
             pieces: int = 4, min_exponent: float = 0.05,
             max_spread: float = 0.2) -> TailFit:
  """Fits R(t) − R* ~ C·t^(−a) on the records of a run inside `window` (docs/theory.md §10b).

  The rule and the interval are those of the module docstring: a weighted least-squares fit
  of ln(R − R*) on ln t under relative noise `rtol` on R, local exponents on `pieces` pieces
  of the window, "one power" iff all of them are ≥ min_exponent and their spread is at most
  max_spread·a + 4 local standard errors.

  Args:
    times: (N,) record times, increasing (e.g. a Trajectory's `time`).
    risks: (N,) R at those times.
    r_star: the optimum R* (a certified optimum or an infimum's limit).
    window: (t_lo, t_hi), 0 < t_lo < t_hi.
    rtol: the relative error of each R (the solver's tolerance).
    pieces: how many pieces of the window give local exponents, at least 2.
    min_exponent: the smallest exponent told apart from a plateau.
    max_spread: the relative spread of the local exponents allowed for one power.

  Returns:
    A TailFit; `verdict` says "a = … [low, high]" or "no power-law tail (why)".

  Raises:
    ValueError: one line naming the field, for times and risks of different lengths or not
      finite, times not increasing, a window outside 0 < t_lo < t_hi, a non-finite r_star, or
      rtol, pieces, min_exponent, max_spread out of range.

  Example:
    >>> t = np.geomspace(1.0, 1e6, 121)
    >>> tails = lj.analysis.tails
    >>> tails.fit_tail(t, 0.2 + 0.5 / np.sqrt(t), 0.2).verdict
    'a = 0.5 [0.5, 0.5]'
    >>> tails.fit_tail(t, 0.2 + np.exp(-t / 2e5), 0.2).verdict
    'no power-law tail (local exponents 0.092 to 2.3 differ by more than 0.2·a)'
    >>> tails.fit_tail(t, np.full_like(t, 0.25), 0.2).verdict   # a plateau above R*
    'no power-law tail (a local exponent 0 is below 0.05: a plateau)'
  """
  times = np.asarray(times, np.float64)
  risks = np.asarray(risks, np.float64)
  if times.ndim != 1 or risks.shape != times.shape:
    raise ValueError(f"times and risks must be 1-D of one length; got shapes {times.shape} "
                     f"and {risks.shape}.")
  if not (np.all(np.isfinite(times)) and np.all(np.isfinite(risks))):
    raise ValueError("times and risks must be finite.")
  if np.any(np.diff(times) <= 0):
    raise ValueError("times must be strictly increasing.")
  r_star = validation.check_real("r_star", r_star)
  window = tuple(float(t) for t in window) if np.ndim(window) == 1 and len(window) == 2 else ()
  if not window or not 0 < window[0] < window[1] < np.inf:
    raise ValueError(f"window must be (t_lo, t_hi) with 0 < t_lo < t_hi < inf; got {window}.")
  rtol = validation.check_real("rtol", rtol, minimum=0.0, strict=True)
  pieces = validation.check_int("pieces", pieces, 2)
  min_exponent = validation.check_real("min_exponent", min_exponent, minimum=0.0)
  max_spread = validation.check_real("max_spread", max_spread, minimum=0.0)

  inside = (times >= window[0]) & (times <= window[1])
  excess = risks - r_star
  noise = rtol * np.maximum(np.abs(risks), np.finfo(np.float64).tiny)
  usable = inside & (excess > NOISE_MARGIN * noise)
  count = int(usable.sum())

  def no_tail(reason, exponent=np.nan, standard_error=np.nan, constant=np.nan, local=()):
    return TailFit(False, float(exponent), (np.nan, np.nan), float(standard_error),
                   float(constant), tuple(local), window, count, reason)

  if count < MIN_POINTS or np.log10(times[usable][-1] / times[usable][0]) < MIN_DECADES:
    if count < int(inside.sum()):
      first = float(times[inside & ~usable][0])
      return no_tail(f"R − R* is within {NOISE_MARGIN:.0f}·rtol·R of zero from t = {first:.3g}")
    return no_tail(f"{count} records in the window; {MIN_POINTS} spanning "
                   f"{MIN_DECADES:g} decade are needed")
  log_t, log_e = np.log(times[usable]), np.log(excess[usable])
  sigma = noise[usable] / excess[usable]
  intercept, slope, standard_error = _weighted_slope(log_t, log_e, sigma)
  exponent, constant = -slope, float(np.exp(intercept))

  edges = np.linspace(log_t[0], log_t[-1], pieces + 1)
  local, local_errors = [], []
  for k in range(pieces):
    piece = (log_t >= edges[k]) & (log_t <= edges[k + 1])
    if piece.sum() < 2:
      return no_tail(f"a piece of the window holds {int(piece.sum())} record(s); record more "
                     "densely", exponent, standard_error, constant)
    _, piece_slope, piece_error = _weighted_slope(log_t[piece], log_e[piece], sigma[piece])
    local.append(-piece_slope)
    local_errors.append(piece_error)
  low, high = min(local), max(local)
  if low < min_exponent:
    return no_tail(f"a local exponent {round(low, 4) + 0.0:.2g} is below {min_exponent:g}: "
                   "a plateau",
                   exponent, standard_error, constant, local)
  if high - low > max_spread * abs(exponent) + 4.0 * max(local_errors):
    return no_tail(f"local exponents {low:.2g} to {high:.2g} differ by more than "
                   f"{max_spread:g}·a", exponent, standard_error, constant, local)
  interval = (min(low, exponent - 2.0 * standard_error),
              max(high, exponent + 2.0 * standard_error))
  return TailFit(True, float(exponent), (float(interval[0]), float(interval[1])),
                 standard_error, constant, tuple(local), window, count, "")


__all__ = ["DEFAULT_WINDOW", "NO_TAIL", "TailFit", "fit_tail"]
