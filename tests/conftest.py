"""The suite runs in float64, the one explicit opt-in lagjax asks of its users."""

import jax

jax.config.update("jax_enable_x64", True)
