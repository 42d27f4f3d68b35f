"""The Laplace route (lagjax/risk/laplace.py, docs/theory.md §3a): the attention moments read
from its grid (the grid's sizing is tests/risk/test_quadrature.py).

These tests close blind spots of the issue-17 mutation campaign
(docs/results/mutation/campaign.md): each kills the surviving mutant named in its docstring and
passes on the real code. The route's agreement with the other routes and with brute force is
tests/risk/test_routes.py.
"""

import jax
import numpy as np

import lagjax as lj
from lagjax.risk import laplace, quadrature

LAPLACE = lj.risk.ROUTES["laplace"]


def _three_letters():
  """d = 3, uniform π, geometric lengths of mean 2: strings often lack the top-score token,
  so every score window carries mass."""
  return lj.occurrence(3, 0, length=lj.geometric(0.5))


def test_attention_moments_with_cls_give_the_laplace_risk():
  """With CLS, R(β) = ½ βᵀHβ - gᵀβ + ½ from attention_moments (docs/theory.md 3a) equals the
  Laplace route's risk at the same θ, and the default grid equals one sized explicitly for
  G + 1 windows. Scores 25 apart, CLS lowest (it is in every string, so a token scored far
  below it would carry no mass): the 4 windows (3 groups + CLS) need 473 lattice points, more
  than a grid for 2 windows (348) holds, and a string of token 2 only (probability 0.2) needs
  the window of token 2. Both sides are the same
  trapezoid sums on the same nodes (same step, window and node count), so they differ by
  float64 rounding only: sums of < 10³ terms of size < 10, far below 1e-10.
  Kills: attention_moments with num_groups - int(cls) windows; group_moments dividing by
  the CLS decay e^{-t u_cls} in H instead of multiplying."""
  lang = _three_letters()
  params = {"alpha": np.array([0.0, -25.0, -50.0]), "beta": np.array([1.0, -0.5, 2.0]),
            "alpha_cls": np.asarray(-75.0), "beta_cls": np.asarray(0.7)}
  width = quadrature.window_width(lang)
  default = laplace.attention_moments(lang, cls=True)
  explicit = laplace.attention_moments(lang, cls=True, num_points=4 * width)
  route = LAPLACE.build(lang, layout=lj.models.direct.Layout(cls=True))

  @jax.jit  # one compiled program
  def evaluate(params):
    return default(params), explicit(params), route.report(params)["grid_covered"], \
        route.risk(params)

  (hessian, g), explicit, covered, risk = evaluate(params)
  np.testing.assert_allclose(hessian, explicit[0], rtol=0, atol=1e-12)
  np.testing.assert_allclose(g, explicit[1], rtol=0, atol=1e-12)
  beta = np.concatenate([params["beta"], [params["beta_cls"]]])
  from_moments = 0.5 * beta @ np.asarray(hessian) @ beta - np.asarray(g) @ beta + 0.5
  assert bool(covered)
  assert abs(from_moments - float(risk)) < 1e-10
