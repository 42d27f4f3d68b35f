"""Grids of the experiments (step sizes, alphabet sizes): built by one function from a config.

A grid config is `spec(start, stop, num, scale, points)`: the explicit `points` when given,
else `num` points from start to stop, log-spaced (scale "log") or evenly spaced ("linear").
`values` reads and validates one, naming the config field; `points` is the one place the
spacing is computed, for the binaries' fixed grids too. Numpy and ml_collections only, so
config files can import it.
"""

from __future__ import annotations

import ml_collections
import numpy as np

SCALES = ("log", "linear")


def spec(start, stop, num, scale="log", points=()) -> ml_collections.ConfigDict:
  """A grid config: `points` if given, else `num` points from start to stop on `scale`."""
  return ml_collections.ConfigDict(
      dict(start=float(start), stop=float(stop), num=int(num), scale=scale,
           points=tuple(float(v) for v in points)))


def points(start, stop, num, scale: str = "log") -> np.ndarray:
  """`num` float64 points from start to stop, log-spaced (np.geomspace) or linear."""
  if scale == "log":
    return np.geomspace(start, stop, num)
  return np.linspace(start, stop, num)


def values(grid, field: str) -> np.ndarray:
  """The points of grid config `grid` (spec), validated; errors name `field` ("config.eta1").

  Raises:
    ValueError: one line, for an unknown scale, num < 1, a log grid through 0, or an empty grid.
  """
  if grid.points:
    return np.asarray(grid.points, dtype=np.float64)
  if grid.scale not in SCALES:
    raise ValueError(f"{field}.scale must be one of {SCALES}; got {grid.scale!r}.")
  if grid.num < 1:
    raise ValueError(f"{field}.num must be >= 1 (the grid is empty); got {grid.num}.")
  if grid.scale == "log" and (grid.start <= 0 or grid.stop <= 0):
    raise ValueError(f"{field}: a log grid needs start, stop > 0; got {grid.start}, {grid.stop}.")
  return points(grid.start, grid.stop, grid.num, grid.scale)
