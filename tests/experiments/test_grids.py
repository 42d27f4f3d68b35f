"""The one grid builder of the experiments (experiments/grids.py)."""

import numpy as np
import pytest

from experiments import grids


def test_a_grid_is_its_points_or_num_points_on_its_scale():
  assert grids.values(grids.spec(1.0, 100.0, 3), "config.eta").tolist() == [1.0, 10.0, 100.0]
  assert grids.values(grids.spec(0.0, 1.0, 3, scale="linear"), "config.eta").tolist() == [
      0.0, 0.5, 1.0]
  explicit = grids.values(grids.spec(1.0, 100.0, 3, points=(2.0, 5.0)), "config.eta")
  assert explicit.tolist() == [2.0, 5.0] and explicit.dtype == np.float64
  # The spacing is computed in one place, bit for bit as the binaries computed it before.
  assert np.array_equal(grids.points(1.0, 1e4, 512), np.geomspace(1.0, 1e4, 512))
  assert np.array_equal(grids.points(0.0, 3.0, 7, "linear"), np.linspace(0.0, 3.0, 7))


@pytest.mark.parametrize("grid, message", [
    (grids.spec(1.0, 2.0, 3, scale="cubic"),
     "config.eta1.scale must be one of ('log', 'linear'); got 'cubic'."),
    (grids.spec(1.0, 2.0, 0), "config.eta1.num must be >= 1 (the grid is empty); got 0."),
    (grids.spec(0.0, 2.0, 3), "config.eta1: a log grid needs start, stop > 0; got 0.0, 2.0."),
])
def test_a_bad_grid_is_refused_naming_its_field(grid, message):
  with pytest.raises(ValueError) as error:
    grids.values(grid, "config.eta1")
  assert str(error.value) == message
