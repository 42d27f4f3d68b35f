"""Config files of the experiment binaries, and the fields several of them share."""


def paper_three_phase(config) -> None:
  """The paper's sufficient three-phase step sizes (η1, η2, η3) = (d, d², 1), T = 300
  (docs/theory.md §5), as config.eta1_over_d, eta2_over_d2, eta3 and steps."""
  config.eta1_over_d = 1.0   # η1 = eta1_over_d · d
  config.eta2_over_d2 = 1.0  # η2 = eta2_over_d2 · d²
  config.eta3 = 1.0
  config.steps = 300
