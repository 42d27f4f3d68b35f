"""The one XLA flag lagjax sets: YNNPACK fusions off on CPU (docs/decisions/ynnpack-off.md).

XLA's CPU backend hands small dots and reductions to YNNPACK by default. On lagjax's
float64 arrays, a batch of 5×5 products along the quadrature nodes or a vmapped sweep,
that is 1.2–4× slower than XLA's own fused loops; the transfer route (docs/theory.md §3d)
is 2–4× slower with it. `import lagjax` appends
`--xla_cpu_experimental_ynn_fusion_type=` (no library fusions) to XLA_FLAGS unless the
user's XLA_FLAGS already set that option. XLA reads the flags when JAX first computes, so
it applies when lagjax is imported before any JAX computation; `enabled()` says whether
this process asked for it.

Every other XLA flag a process of this project sets goes through `add` here too (the
binaries' backend optimisation level and host device count, the test suite's cheaper
compile settings), and so does the persistent compilation cache
(`enable_compilation_cache`): one place that writes XLA_FLAGS and one that sets the cache.
"""

from __future__ import annotations

import os

YNN_OPTION = "--xla_cpu_experimental_ynn_fusion_type"


def _switch_off_ynn() -> None:
  """Append YNN_OPTION= to XLA_FLAGS unless the user already set the option."""
  flags = os.environ.get("XLA_FLAGS", "")
  if YNN_OPTION not in flags:
    os.environ["XLA_FLAGS"] = f"{flags} {YNN_OPTION}=".strip()


# Cheaper XLA CPU compilation, for smoke configs and the test suite whose time is compiling:
# LLVM at optimisation level 0 and the older loop emitters instead of the fusion emitters.
# Both emit the same IEEE float64 operations (docs/decisions/test-suite-speed.md).
FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
# Each program's LLVM module compiled whole, not split into parts for a thread pool: where
# processes already keep every core busy (the test suite's workers), the split only adds
# work (docs/decisions/test-suite-speed.md).
SERIAL_CODEGEN = "--xla_cpu_parallel_codegen_split_count=1"
CACHE_ENV = "LAGJAX_COMPILATION_CACHE"
DEFAULT_CACHE = os.path.join(os.path.expanduser("~"), ".cache", "lagjax", "xla")


def has(name: str) -> bool:
  """Whether XLA_FLAGS already sets the option `name` (with or without its leading --).

  A setting of speed and compilation, never of the mathematics (docs/theory.md, Numerics).

  Args:
    name: an XLA option name, e.g. "xla_backend_optimization_level".

  Returns:
    True when the name appears in XLA_FLAGS.

  Example:
    >>> lj.xla_flags.has("xla_cpu_experimental_ynn_fusion_type")   # lagjax's own flag
    True
  """
  return name.lstrip("-") in os.environ.get("XLA_FLAGS", "")


def add(*options: str) -> str:
  """Appends each "--name=value" to XLA_FLAGS unless XLA_FLAGS already sets that name.

  A setting of speed and compilation, never of the mathematics (docs/theory.md, Numerics).

  A user's own setting wins. XLA reads the flags when JAX creates its backend, so call
  this before any JAX computation.

  Args:
    *options: XLA options, each "--name=value".

  Returns:
    The new XLA_FLAGS.

  Example:
    >>> # Already set by `import lagjax`, so XLA_FLAGS keeps the user's (here lagjax's) value.
    >>> "ynn_fusion_type=all" in lj.xla_flags.add(f"{lj.xla_flags.YNN_OPTION}=all")
    False
  """
  flags = os.environ.get("XLA_FLAGS", "")
  for option in options:
    if not has(option.split("=", 1)[0]):
      flags = f"{flags} {option}".strip()
  os.environ["XLA_FLAGS"] = flags
  return flags


def backend_optimization(level) -> str:
  """XLA's CPU/GPU backend optimisation level (0-3; None keeps XLA's default, 3).

  A setting of speed and compilation, never of the mathematics (docs/theory.md, Numerics).

  Level 0 compiles 3-4x faster and runs slower (smoke configs whose time is compilation);
  with it, XLA's CPU fusion emitters are off too (FAST_COMPILE: Table 1's quick config,
  cold, 70 -> 52 s). A level already in XLA_FLAGS wins, and then nothing is added.

  Args:
    level: 0-3, or None.

  Returns:
    The new XLA_FLAGS.

  Example:
    >>> import os
    >>> lj.xla_flags.backend_optimization(None) == os.environ.get("XLA_FLAGS", "")
    True
  """
  if level is None or has("xla_backend_optimization_level"):
    return os.environ.get("XLA_FLAGS", "")
  if int(level) == 0:
    return add(*FAST_COMPILE)
  return add(f"--xla_backend_optimization_level={int(level)}")


def compiler_options(level) -> dict | None:
  """jax.jit's compiler_options for one program at XLA's backend optimisation level `level`
  (0-3), whatever XLA_FLAGS say: lj.flow's and lj.train's `optimization_level`.

  A setting of speed and compilation, never of the mathematics (docs/theory.md, Numerics):
  a long run compiled at level 0 (which a smoke config or a test suite may set for compile
  speed) runs several times slower.

  Args:
    level: 0-3, or None (no options: XLA_FLAGS decide).

  Returns:
    {"xla_backend_optimization_level": level}, or None.

  Raises:
    ValueError: naming optimization_level, for a level outside 0-3.

  Example:
    >>> lj.xla_flags.compiler_options(2)
    {'xla_backend_optimization_level': 2}
    >>> lj.xla_flags.compiler_options(None) is None
    True
  """
  if level is None:
    return None
  if level not in (0, 1, 2, 3) or isinstance(level, bool):
    raise ValueError(f"optimization_level must be one of (0, 1, 2, 3) or None; got {level!r}.")
  return {"xla_backend_optimization_level": int(level)}


def host_devices(count: int) -> str:
  """One XLA CPU device per `count` (e.g. per core), so work shards over them; a device
  count already in XLA_FLAGS wins.

  A setting of speed and compilation, never of the mathematics (docs/theory.md, Numerics).

  Args:
    count: the number of host devices.

  Returns:
    The new XLA_FLAGS.

  Example:
    >>> import os
    >>> saved = os.environ.get("XLA_FLAGS", "")
    >>> lj.xla_flags.host_devices(2).count("--xla_force_host_platform_device_count=")
    1
    >>> os.environ["XLA_FLAGS"] = saved   # this doctest's process keeps its flags
  """
  return add(f"--xla_force_host_platform_device_count={int(count)}")


def enable_compilation_cache(path: str | None = None) -> str:
  """Turns on JAX's persistent compilation cache for every program, so a rerun compiles
  nothing; child processes inherit it through JAX_COMPILATION_CACHE_DIR.

  A setting of speed and compilation, never of the mathematics (docs/theory.md, Numerics).

  Args:
    path: the folder; default $LAGJAX_COMPILATION_CACHE, else ~/.cache/lagjax/xla.

  Returns:
    The folder.

  Example:
    >>> import jax
    >>> folder = jax.config.jax_compilation_cache_dir   # the test suite's own cache
    >>> lj.xla_flags.enable_compilation_cache(folder) == folder
    True
  """
  import jax  # here, so that importing this module creates no JAX state

  path = path or os.environ.get(CACHE_ENV) or DEFAULT_CACHE
  os.makedirs(path, exist_ok=True)
  os.environ.update(JAX_COMPILATION_CACHE_DIR=path, JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
                    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
  jax.config.update("jax_compilation_cache_dir", path)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
  return path


def enabled() -> bool:
  """Whether XLA_FLAGS switches YNNPACK fusions off (lagjax's default; the transfer route's
  products along the quadrature nodes, docs/theory.md §3d, are the main reason).

  Returns:
    True when XLA_FLAGS holds the option with an empty value.

  Example:
    >>> lj.xla_flags.enabled()
    True
  """
  return f"{YNN_OPTION}= " in os.environ.get("XLA_FLAGS", "") + " "


_switch_off_ynn()
