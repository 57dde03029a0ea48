# Sphinx configuration of perflab's documentation site (`make docs`: docs/_build/html).
# Sphinx + MyST + myst-nb because numpy, bokeh, holoviews and HTA, the sites our users know, use
# them: Markdown pages, notebooks shown from their stored outputs, references built from the code.
# Theme: furo, for its search and per-page contents, and a quick build on a 2-core machine.
from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(DOCS / "_ext"), str(ROOT)]

project = "perflab"
author = "perflab developers"
copyright = "perflab developers, Apache-2.0"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "perflab_cli",
    "perflab_json",
    "perflab_refs",
    "course_links",
]

# The notebooks are committed with their outputs (the test suite checks they are current): the
# site shows those outputs and runs nothing.
nb_execution_mode = "off"
# a cell's printed lines as one block, as Jupyter shows them
nb_merge_streams = True

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# screenshots/ holds pictures the pages show, not pages
exclude_patterns = ["_build", "_ext", "_static", "screenshots", "**.ipynb_checkpoints"]
# docs/course/ holds links to notebooks/*.ipynb made at build time (course_links): the
# notebooks stay where the lab and the tests use them.
course_notebooks = str(ROOT / "notebooks")

html_theme = "furo"
html_title = "perflab"
html_static_path = ["_static"]
html_css_files = ["perflab.css"]
# no copy of each page's source beside it: the notebooks alone would double the site's size
html_copy_source = False
html_show_sourcelink = False

# Warnings are errors (-W) and every cross-reference must resolve (-n) for perflab's own
# names (perflab_refs resolves those defined in internal modules). Types of other packages
# (numpy, msgspec, the standard library) cannot resolve without their inventories, which
# the build does not download.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r"(?!perflab\b).*")]

autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True}
