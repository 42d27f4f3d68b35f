"""The documentation site builds with warnings as errors, every tutorial executed, and its
mathematics renders with no network.

This is the command the README gives for a local build, `python -m sphinx -W docs OUT`,
run once on a fresh output folder and shared by the tests below: a tutorial that raises, a
dangling cross-reference, a docstring that does not render, or a public name without a
complete docstring (docs/_ext/public_api.py) fails it. Skipped only where the `docs` extra is
not installed, which CI's command installs. The built pages load no script, stylesheet or font
from the network (MathJax is bundled, docs/decisions/offline-math.md); where a Chromium binary
is installed, one tutorial is opened offline and must show typeset formulas.
"""

import html.parser
import os
import pathlib
import re
import shutil
import subprocess
import sys
import urllib.parse

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # the site build, a Sphinx subprocess

# <link rel=...> values that make the browser fetch the target (not plain hyperlinks).
FETCHED_LINK_RELS = {"stylesheet", "preload", "modulepreload", "prefetch", "icon", "manifest"}
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
OFFLINE_TUTORIAL = "own_language"  # the page whose raw `\(y = +1\)` the issue showed offline


@pytest.fixture(scope="module")
def site(tmp_path_factory):
  """Builds the site once for this module; returns the output folder."""
  pytest.importorskip("myst_nb", reason="the docs extra: pip install -e '.[docs]'")
  out = tmp_path_factory.mktemp("site")
  # The README's command, with the suite's cheaper compile settings (tests/conftest.py) in
  # the kernels' XLA_FLAGS: every tutorial but the gradient flow's compiles more than it runs,
  # and that one compiles its long flows at level 2 itself (optimization_level=2): the seven
  # tutorials' code 170 -> 136 s (docs/decisions/test-suite-speed.md).
  build = subprocess.run(
      [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "docs", str(out)],
      cwd=ROOT, capture_output=True, text=True, timeout=900)
  assert build.returncode == 0, build.stderr[-6000:]
  return out


def test_the_site_builds_with_every_tutorial_executed(site):
  tutorials = sorted(p.stem for p in (ROOT / "docs" / "tutorials").glob("*.md")
                     if p.stem != "index")
  assert len(tutorials) >= 5
  for name in tutorials:
    page = (site / "tutorials" / f"{name}.html").read_text("utf-8")
    # An executed notebook carries its cells' outputs; an unexecuted one has none.
    assert "cell_output" in page, f"tutorial {name} has no executed output"


class _Assets(html.parser.HTMLParser):
  """Collects what a page makes the browser fetch: script sources and fetched links."""

  def __init__(self):
    super().__init__()
    self.scripts, self.links = [], []

  def handle_starttag(self, tag, attrs):
    attrs = dict(attrs)
    if tag == "script" and attrs.get("src"):
      self.scripts.append(attrs["src"])
    rels = set((attrs.get("rel") or "").lower().split())
    if tag == "link" and attrs.get("href") and rels & FETCHED_LINK_RELS:
      self.links.append(attrs["href"])


def _is_remote(url):
  return url.startswith("//") or urllib.parse.urlsplit(url).scheme in ("http", "https")


def remote_loads(site):
  """Every remote script, stylesheet/icon link or CSS url/@import in a built site.

  Returns:
    A sorted list of 'page: url' strings; empty for a site that needs no network.
  """
  found = set()
  for page in site.rglob("*.html"):
    assets = _Assets()
    assets.feed(page.read_text("utf-8"))
    found.update(f"{page.relative_to(site)}: {url}"
                 for url in assets.scripts + assets.links if _is_remote(url))
  # A stylesheet that pulls fonts or other sheets from the network breaks offline too.
  css_urls = re.compile(r"""(?:url\(\s*|@import\s+)["']?((?:https?:)?//[^"')\s]+)""")
  for sheet in site.rglob("*.css"):
    found.update(f"{sheet.relative_to(site)}: {url}"
                 for url in css_urls.findall(sheet.read_text("utf-8", errors="replace")))
  return sorted(found)


def local_mathjax(site):
  """The local MathJax scripts that the site's pages load, as files in the build.

  Returns:
    {page: path of its MathJax script} for every page with a formula; raises AssertionError
    when such a page loads no MathJax, or one that is not a file of the build.
  """
  loaded = {}
  for page in site.rglob("*.html"):
    text = page.read_text("utf-8")
    if 'class="math' not in text:
      continue
    assets = _Assets()
    assets.feed(text)
    mathjax = [src for src in assets.scripts if "mathjax" in src.lower()]
    assert mathjax, f"{page.relative_to(site)} has formulas but loads no MathJax"
    for src in mathjax:
      assert not _is_remote(src), f"{page.relative_to(site)} loads MathJax from {src}"
      path = (page.parent / urllib.parse.urlsplit(src).path).resolve()
      assert path.is_file(), f"{page.relative_to(site)}: {src} is not in the build"
      loaded[page.relative_to(site)] = path
  return loaded


def test_no_page_loads_anything_from_the_network(site):
  assert remote_loads(site) == []
  loaded = local_mathjax(site)
  assert pathlib.Path("tutorials", f"{OFFLINE_TUTORIAL}.html") in loaded
  # MathJax's CommonHTML output fetches its fonts relative to its own script.
  for script in set(loaded.values()):
    fonts = list((script.parent / "output" / "chtml" / "fonts").rglob("*.woff"))
    assert fonts, f"no MathJax fonts beside {script}"


class _RenderedText(html.parser.HTMLParser):
  """The page's visible prose: text outside code, scripts, styles and typeset math."""

  SKIPPED = {"script", "style", "pre", "code", "mjx-container", "textarea"}

  def __init__(self):
    super().__init__()
    self.depth, self.parts = 0, []

  def handle_starttag(self, tag, attrs):
    self.depth += tag in self.SKIPPED

  def handle_endtag(self, tag):
    self.depth -= tag in self.SKIPPED

  def handle_data(self, data):
    if self.depth == 0:
      self.parts.append(data)


def test_a_tutorial_shows_typeset_math_offline(site, tmp_path):
  browser = next(filter(None, map(shutil.which, BROWSERS)), None)
  if browser is None:
    pytest.skip(f"no headless browser ({', '.join(BROWSERS)}) installed")
  page = site / "tutorials" / f"{OFFLINE_TUTORIAL}.html"
  formulas = page.read_text("utf-8").count('class="math notranslate')
  assert formulas >= 5
  # Any request for http(s) goes to a closed local port and any host name fails to resolve,
  # so the page sees no network; virtual time lets MathJax finish before the DOM is dumped.
  dumped = subprocess.run(
      [browser, "--headless", "--disable-gpu", "--no-first-run", "--no-sandbox",
       f"--user-data-dir={tmp_path / 'profile'}", "--proxy-server=http://127.0.0.1:9",
       "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=30000",
       "--dump-dom", page.as_uri()],
      capture_output=True, text=True, timeout=180, env={**os.environ, "HOME": str(tmp_path)})
  assert dumped.returncode == 0, dumped.stderr[-3000:]
  dom = dumped.stdout
  assert dom.count("<mjx-container") >= formulas, "formulas left untypeset"
  assert "<mjx-merror" not in dom, "MathJax could not typeset a formula"
  prose = _RenderedText()
  prose.feed(dom)
  visible = "".join(prose.parts)
  assert "\\(" not in visible and "\\[" not in visible, "raw TeX shown on the page"
