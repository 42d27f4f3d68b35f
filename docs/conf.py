"""Sphinx configuration of the lagjax documentation site.

Build it with `pip install -e ".[docs]" && python -m sphinx -W docs docs/_build/html`.
Tutorials under docs/tutorials/ are MyST notebooks that myst-nb executes at every build,
so a broken example fails the build; docs/_ext/public_api.py fails it on a public name
without a complete docstring.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
sys.path.insert(0, str(ROOT))

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)  # the docstrings' examples need float64, as lagjax does

project = "lagjax"
author = "the lagjax developers"
copyright = "2026, the lagjax developers"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    # MathJax 3.2.2 from the installed package, copied into _static/mathjax and named by
    # mathjax_path, so formulas render with no network (docs/decisions/offline-math.md).
    "sphinx-mathjax-offline",
    "public_api",
]

# The censuses' full row tables (results/census/*/atlas.md, 2.5 MB of Markdown tables, 2,000
# rows a census) stay in the repository beside rows.csv and out of the site: they were 40 s of
# the 72 s Sphinx spends outside the tutorials. Each census's summary page (census.md), its
# figures and rows.csv are on the site (docs/decisions/docs-site.md).
exclude_patterns = ["_build", "_ext", "**/.ipynb_checkpoints", "results/census/*/atlas.md"]
root_doc = "index"

# MyST: $…$ and $$…$$ math, ```math fences, numbered equations with (label) after $$.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_dmath_double_inline = True
myst_fence_as_directive = ["math"]
myst_heading_anchors = 4
math_numfig = True
numfig = True

# Tutorials run at every build; one that raises fails it.
nb_execution_mode = "force"
nb_execution_timeout = 600  # per cell: the gradient-flow tutorial compiles a Kvaerno5 flow
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # dataclass fields: one description each, not a second attribute entry

html_theme = "sphinx_book_theme"
html_title = "lagjax"
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    # The sidebar lists the top-level sections and opens only the current page's: the full
    # tree on each of the ~100 pages was a quarter of an unexecuted build (33 -> 26 s).
    "collapse_navbar": True,
}
