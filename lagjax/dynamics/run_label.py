"""The regime of a run, from its risk curve (and sharpness): one label per run
(docs/theory.md section 5d).

With R_0 … R_T the recorded risks, tol the rise tolerance relative to R_0, and the tail
the last `tail_fraction` of the records, the labels, in order of precedence, are:

- "diverged": the run diverged (docs/theory.md §5);
- "oscillating": the tail neither converges nor settles: it rises by more than tol·R_0
  somewhere, and the range of its second half is at least `contraction` times that of its
  first half. The period is the smallest p ≤ max_period with which the tail's pattern of
  rises and falls, sign(R_{t+1} − R_t) (0 within tol·R_0), repeats (0: aperiodic), so a
  two-step cycle that drifts slowly still has period 2;
- "edge_of_stability": given the sharpness λ_t and step sizes η, abs(η·λ_t − 2) ≤ 2·band on
  at least `eos_fraction` of the records;
- "catapult": the risk rises by more than tol·R_0 at some step, and R_T < R_0;
- "non_monotone": it rises so, and R_T ≥ R_0;
- "monotone": it never rises by more than tol·R_0.

Every test is a reduction over the records with static shapes, so `label_code` jits and
vmaps over a sweep's runs.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lagjax import validation

LABELS = ("monotone", "catapult", "non_monotone", "edge_of_stability", "oscillating", "diverged")
RISE_TOLERANCE = 1e-9      # relative to R_0: far above roundoff of the exact risks (≈1e-15)
TAIL_FRACTION = 0.25
CONTRACTION = 0.5
MAX_PERIOD = 8
EOS_BAND = 0.05            # |η·λ_max − 2| ≤ 0.1
EOS_FRACTION = 0.5


class RunLabel(NamedTuple):
  """A run's regime (docs/theory.md §5d).

  Attributes:
    code: the index of the label in LABELS (an int array; vmaps).
    period: the detected period of an oscillating run (0: aperiodic or not oscillating).
    max_rise: the largest rise R_{t+1} − R_t over the run, relative to R_0.

  Example:
    >>> label = lj.dynamics.run_label.label_code(jnp.array([1.0, 0.5] * 8))
    >>> label.label, int(label.period), float(label.max_rise)
    ('oscillating', 2, 0.5)
  """

  code: jnp.ndarray
  period: jnp.ndarray
  max_rise: jnp.ndarray

  @property
  def label(self) -> str:
    """The label's name (a concrete, unbatched run)."""
    return LABELS[int(self.code)]


def _check_fraction(name: str, value) -> float:
  value = validation.check_real(name, value)
  if not 0.0 < value <= 1.0:
    raise ValueError(f"{name} must be in (0, 1]; got {value!r}.")
  return value


def label_code(risk, *, diverged=False, sharpness=None, etas=None,
               tolerance: float = RISE_TOLERANCE, tail_fraction: float = TAIL_FRACTION,
               contraction: float = CONTRACTION, max_period: int = MAX_PERIOD,
               eos_band: float = EOS_BAND, eos_fraction: float = EOS_FRACTION) -> RunLabel:
  """Labels a run by the rules of the module docstring (docs/theory.md §5d).

  Args:
    risk: (R,) the recorded risks, R ≥ 8 (every step, for periods to mean steps).
    diverged: whether the run diverged (a bool array).
    sharpness: (R,) λ_max at the records, or None (then never "edge_of_stability").
    etas: the step size at the records, (R,) or a scalar; needed with sharpness.
    tolerance: the rise tolerance tol, relative to R_0; > 0.
    tail_fraction: the tail's share of the records, in (0, 1].
    contraction: a tail whose second half's range is below this fraction of its first
      half's converges; in (0, 1].
    max_period: the longest period looked for, ≥ 1.
    eos_band: the half-width of the band around η·λ = 2, relative to 2; > 0.
    eos_fraction: the share of records in the band that makes "edge_of_stability".

  Returns:
    A RunLabel (code, period, max_rise); `.label` reads it by name.

  Raises:
    ValueError: a tolerance ≤ 0, a fraction outside (0, 1], fewer than 8 records, or
      sharpness without etas.

  Example:
    GD on ½x² at η = 0.5 and at η = 4; a risk that cycles; a rise, then a fall below the
    start:

    >>> label, t = lj.dynamics.run_label.label_code, jnp.arange(40.0)
    >>> label(0.5 * 0.25 ** t).label, label(0.5 * 9.0 ** t, diverged=jnp.array(True)).label
    ('monotone', 'diverged')
    >>> run = label(jnp.array([1.0, 0.5] * 8))
    >>> run.label, int(run.period)
    ('oscillating', 2)
    >>> label(jnp.array([1.0, 2.0, 0.5, 0.2, 0.1, 0.05, 0.02, 0.01])).label
    'catapult'
    >>> lj.dynamics.run_label.label_code(jnp.ones(8), tolerance=0.0)
    Traceback (most recent call last):
    ...
    ValueError: tolerance must be > 0 (the rise tolerance, relative to R_0); got 0.0.
  """
  tolerance = validation.check_real("tolerance", tolerance)
  if not tolerance > 0.0:
    raise ValueError(f"tolerance must be > 0 (the rise tolerance, relative to R_0); "
                     f"got {tolerance!r}.")
  tail_fraction = _check_fraction("tail_fraction", tail_fraction)
  contraction = _check_fraction("contraction", contraction)
  eos_fraction = _check_fraction("eos_fraction", eos_fraction)
  eos_band = validation.check_real("eos_band", eos_band)
  if not eos_band > 0.0:
    raise ValueError(f"eos_band must be > 0; got {eos_band!r}.")
  if isinstance(max_period, bool) or not isinstance(max_period, int) or max_period < 1:
    raise ValueError(f"max_period must be an integer ≥ 1; got {max_period!r}.")
  risk = jnp.asarray(risk)
  num_records = risk.shape[-1]
  if num_records < 8:
    raise ValueError(f"risk must hold at least 8 records to be labelled; got {num_records}.")
  if sharpness is not None and etas is None:
    raise ValueError("etas must be given with sharpness (η·λ_max is compared with 2).")
  tail_length = max(4, int(np.ceil(tail_fraction * num_records)))
  # One compiled program per shape and setting: called on a concrete run, the rules below
  # would otherwise compile each of their few dozen operations on its own.
  return _label(risk, jnp.asarray(diverged), sharpness, etas, tolerance=tolerance,
                tail_length=tail_length, contraction=contraction, max_period=max_period,
                eos_band=eos_band, eos_fraction=eos_fraction)


@functools.partial(jax.jit, static_argnames=("tolerance", "tail_length", "contraction",
                                             "max_period", "eos_band", "eos_fraction"))
def _label(risk, diverged, sharpness, etas, *, tolerance, tail_length, contraction, max_period,
           eos_band, eos_fraction) -> RunLabel:
  """label_code's rules on checked arguments (module docstring)."""
  scale = tolerance * jnp.abs(risk[0])
  rises = jnp.diff(risk)
  max_rise = rises.max() / jnp.abs(risk[0])
  rose = rises.max() > scale

  tail = risk[-tail_length:]
  half = tail_length // 2
  tail_range = tail.max() - tail.min()
  first_range = tail[:half].max() - tail[:half].min()
  second_range = tail[half:].max() - tail[half:].min()
  # A tail that never rises is converging, however slowly (a 1/t tail shrinks its range
  # by less than half between the halves, and is no oscillation).
  tail_rises = jnp.diff(tail).max() > scale
  oscillating = tail_rises & (tail_range > scale) & (second_range >= contraction * first_range)
  periods = np.arange(1, min(max_period, tail_length - 2) + 1)
  moves = jnp.diff(tail)
  pattern = jnp.where(jnp.abs(moves) <= scale, 0, jnp.sign(moves))
  repeats = jnp.stack([jnp.all(pattern[p:] == pattern[:-p]) for p in periods])
  period = jnp.where(oscillating & repeats.any(), jnp.asarray(periods)[jnp.argmax(repeats)], 0)

  if sharpness is None:
    on_edge = jnp.asarray(False)
  else:
    in_band = jnp.abs(jnp.asarray(etas) * jnp.asarray(sharpness) - 2.0) <= 2.0 * eos_band
    on_edge = in_band.mean() >= eos_fraction

  code = jnp.where(rose, jnp.where(risk[-1] < risk[0], 1, 2), 0)
  code = jnp.where(on_edge, 3, code)
  code = jnp.where(oscillating, 4, code)
  code = jnp.where(diverged, 5, code)
  return RunLabel(code, period, max_rise)


__all__ = ["CONTRACTION", "EOS_BAND", "EOS_FRACTION", "LABELS", "MAX_PERIOD", "RISE_TOLERANCE",
           "RunLabel", "TAIL_FRACTION", "label_code"]
