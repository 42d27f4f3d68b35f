"""The suite runs in float64, the one explicit opt-in lagjax asks of its users. Binaries
started by the tests keep their compilation cache in a folder of this session only.

The suite is mostly XLA compilation (docs/decisions/test-suite-speed.md), so the tests and the
binaries they start compile with cheaper XLA CPU settings: LLVM at optimisation level 0 and
the classic elemental emitters instead of the newer fusion emitters, and each program's LLVM
module compiled whole (two workers already fill two cores, so XLA's parallel code generation
only adds work: 7-10 % of a file's CPU). These emit the same IEEE float64 operations
(roundoff may differ in the last bits where an order of summation does); no test compares
numbers across settings. XLA aborts the process on a flag it does not know, so a child
process checks the flags first (a newer jaxlib may drop one); without them the suite runs as
before, only slower. Where a program runs longer than it compiles, the test
opts out: GD → flow and the gradient-flow tutorial compile their flows at LLVM level 2
(lj.flow's optimization_level); the site build's kernels inherit the flags like every other
process the tests start. Those processes share one persistent compilation cache (below).
"""

import os  # noqa: I001  (experiments before jax, below)
import subprocess
import sys
import tempfile

import pytest

# The binaries' JAX setting (closed-over arrays as arguments, experiments/__init__.py) first:
# JAX reads it when it is imported. Importing lagjax adds its own XLA flag (YNNPACK off) and
# computes nothing, so the flags below still reach XLA, which reads them at the first
# computation.
import experiments  # noqa: F401
import jax
from lagjax import xla_flags

# Test modules mirror the package in subfolders (tests/risk/, tests/dynamics/, ...); the
# helpers they share (enumeration.py) stay here, importable from every subfolder.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SUITE_FLAGS = (*xla_flags.FAST_COMPILE, xla_flags.SERIAL_CODEGEN)
FAST_COMPILE_FLAGS = " ".join(SUITE_FLAGS)


def _flags_accepted(flags: str) -> bool:
  probe = subprocess.run([sys.executable, "-c", "import jax.numpy as j; j.ones(2).sum()"],
                         env=dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu"),
                         capture_output=True, timeout=300)
  return probe.returncode == 0


_flags = os.environ.get("XLA_FLAGS", "")
if FAST_COMPILE_FLAGS not in _flags and _flags_accepted(f"{_flags} {FAST_COMPILE_FLAGS}"):
  xla_flags.add(*SUITE_FLAGS)   # lagjax's one writer of XLA_FLAGS
jax.config.update("jax_enable_x64", True)
CACHE = os.environ.setdefault("LAGJAX_COMPILATION_CACHE",
                              tempfile.mkdtemp(prefix="lagjax-test-compilation-cache-"))
# One persistent compilation cache for the processes the tests start: the binaries and the
# kernels that execute the tutorials inherit the folder through the environment, so a program
# one of them compiled is loaded, not compiled, by the next.
xla_flags.enable_compilation_cache(os.environ.get("JAX_COMPILATION_CACHE_DIR", CACHE))
# The test processes themselves (controller and xdist workers) do not use it. Twice, on
# JAX 0.10.2 (CPU), a worker died of a segmentation fault inside executable.serialize() while
# writing a count-route program to the cache (the cause was the map limit below, not the
# cache), and xdist then hung until CI's 90 minutes ran out. The workers gain little from it:
# few programs repeat across test files (docs/decisions/test-suite-speed.md). Set before this
# process compiles anything, which is when JAX reads the option.
jax.config.update("jax_enable_compilation_cache", False)

# The files of longest run time first (worker seconds of one run: docs/decisions/
# test-suite-speed.md; reordered by the per-file sums of `--durations=0` in the full run of
# 2026-12-05), so that with `--dist loadfile` the two workers finish together: xdist's
# default order, most tests first, started the one-test site build last and left a worker
# idle for two minutes at the end.
# pyproject's addopts pass --no-loadscope-reorder to keep this.
# Paths are relative to tests/ (tests/project/test_test_tree.py checks that each exists).
TESTS = os.path.dirname(os.path.abspath(__file__))
LONGEST_FIRST = ("project/test_docs.py", "risk/test_count_route.py", "experiments/test_table1.py",
                 "analysis/test_saddles.py", "analysis/test_atlas.py",
                 "analysis/test_regimes_general.py", "project/test_docstrings.py",
                 "analysis/test_optimum.py", "dynamics/test_flow_oracles.py",
                 "experiments/test_regimes_binary.py", "experiments/test_counting_results.py",
                 "sweep/test_sweep.py", "experiments/test_experiments.py",
                 "dynamics/test_hybrid.py", "models/test_layouts.py", "risk/test_routes.py",
                 "risk/test_transfer.py", "dynamics/test_run_label.py",
                 "analysis/test_horizons.py", "analysis/test_regimes.py", "project/test_readme.py",
                 "dynamics/test_flow.py", "analysis/test_scaling.py",
                 "experiments/test_user_languages.py", "dynamics/test_train.py",
                 "experiments/test_shared_programs.py")


def pytest_collection_modifyitems(items):
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}

  def file_rank(item):
    name = os.path.relpath(str(item.path), TESTS).replace(os.sep, "/")
    return rank.get(name, len(rank))

  items.sort(key=file_rank)   # stable: keeps the rest in collection order


def pytest_runtest_teardown(item, nextitem):
  """Frees every compiled program when a worker moves on to another test file.

  Each XLA CPU executable holds about six memory maps of JIT code and data until JAX's caches
  drop it, and Linux allows a process 65,530 maps (vm.max_map_count). A worker that had run
  most of the suite held over ten thousand programs and died of a segmentation fault in the
  count-route tests, inside XLA's compile or executable.serialize(), whichever next asked for a
  map. Few programs repeat across files (docs/decisions/test-suite-speed.md), so clearing
  costs little.
  """
  if nextitem is None or nextitem.path != item.path:
    jax.clear_caches()


@pytest.fixture
def jit_options(monkeypatch):
  """The compiler_options of every jax.jit call the test makes (None where it passed none):
  where lj.flow's or lj.train's optimization_level must reach the compiler."""
  options = []
  jit = jax.jit

  def spy(fn, **kwargs):
    options.append(kwargs.get("compiler_options"))
    return jit(fn, **kwargs)

  monkeypatch.setattr(jax, "jit", spy)
  return options
