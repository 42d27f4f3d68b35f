"""The suite runs in float64, the one explicit opt-in lagjax asks of its users. Binaries
started by the tests keep their compilation cache in a folder of this session only."""

import os
import tempfile

import jax

jax.config.update("jax_enable_x64", True)
os.environ.setdefault("LAGJAX_COMPILATION_CACHE",
                      tempfile.mkdtemp(prefix="lagjax-test-compilation-cache-"))
