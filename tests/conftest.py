"""The suite runs in float64, the one explicit opt-in lagjax asks of its users. Binaries
started by the tests keep their compilation cache in a folder of this session only.

The suite is mostly XLA compilation (BUILD_NOTES.md, "Test suite"), so the tests and the
binaries they start compile with cheaper XLA CPU settings: LLVM at optimisation level 0 and
the classic elemental emitters instead of the newer fusion emitters. Both emit the same IEEE
float64 operations (roundoff may differ in the last bits where an order of summation does);
no test compares numbers across settings. XLA aborts the process on a flag it does not know,
so a child process checks the flags first (a newer jaxlib may drop one); without them the
suite runs as before, only slower. Every process of the run shares one persistent
compilation cache (below).
"""

import os
import subprocess
import sys
import tempfile

import jax

# Test modules mirror the package in subfolders (tests/risk/, tests/dynamics/, ...); the
# helpers they share (enumeration.py) stay here, importable from every subfolder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FAST_COMPILE_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def _flags_accepted(flags: str) -> bool:
  probe = subprocess.run([sys.executable, "-c", "import jax.numpy as j; j.ones(2).sum()"],
                         env=dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu"),
                         capture_output=True, timeout=300)
  return probe.returncode == 0


_flags = os.environ.get("XLA_FLAGS", "")
if FAST_COMPILE_FLAGS not in _flags and _flags_accepted(f"{_flags} {FAST_COMPILE_FLAGS}"):
  os.environ["XLA_FLAGS"] = f"{_flags} {FAST_COMPILE_FLAGS}".strip()
jax.config.update("jax_enable_x64", True)
CACHE = os.environ.setdefault("LAGJAX_COMPILATION_CACHE",
                              tempfile.mkdtemp(prefix="lagjax-test-compilation-cache-"))
# One persistent compilation cache for the whole run: both xdist workers (they inherit the
# controller's folder), the binaries the tests start, and the kernels that execute the
# tutorials. A program compiled once anywhere is loaded, not compiled, everywhere else.
for _name, _value in (("JAX_COMPILATION_CACHE_DIR", CACHE),
                      ("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0"),
                      ("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")):
  os.environ.setdefault(_name, _value)
jax.config.update("jax_compilation_cache_dir", os.environ["JAX_COMPILATION_CACHE_DIR"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

# The files of longest run time first (worker seconds of one run, BUILD_NOTES.md "Test suite
# time"), so that with `--dist loadfile` the two workers finish together: xdist's default
# order, most tests first, started the one-test site build last and left a worker idle
# for two minutes at the end. pyproject's addopts pass --no-loadscope-reorder to keep this.
LONGEST_FIRST = ("test_docs.py", "test_sweep.py", "test_layouts.py", "test_table1.py",
                 "test_experiments.py", "test_docstrings.py", "test_routes.py",
                 "test_scaling.py", "test_transfer.py", "test_transformer.py",
                 "test_regimes.py", "test_train.py", "test_readme.py",
                 "test_regimes_binary.py", "test_erf_slr.py", "test_closed_form.py",
                 "test_mutants.py")


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  items.sort(key=lambda item: rank.get(item.path.name, len(rank)))   # stable: keeps the rest
