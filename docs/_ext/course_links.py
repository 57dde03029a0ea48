"""The course on the site: docs/course/NAME.ipynb links to notebooks/NAME.ipynb.

Sphinx reads documents only under its source folder, and the notebooks live (and are
tested) in notebooks/; links made at build time put them on the site without a copy to keep
in step. Links that point at a notebook no longer there are removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ExtensionError


def link_notebooks(notebooks: Path, course: Path) -> list[Path]:
    """Link each notebooks/*.ipynb into ``course`` (relative links, so a moved checkout still
    builds); remove links to notebooks that are gone. Returns the links."""
    course.mkdir(exist_ok=True)
    wanted = {nb.name: nb for nb in sorted(notebooks.glob("*.ipynb"))}
    for existing in course.glob("*.ipynb"):
        if existing.is_symlink() and existing.name not in wanted:
            existing.unlink()
    links = []
    for name, notebook in wanted.items():
        link = course / name
        target = os.path.relpath(notebook, course)
        if link.is_symlink() and os.readlink(link) == target:
            pass
        elif link.exists() and not link.is_symlink():
            raise ExtensionError(f"{link} is a file, not a link to {notebook}: remove it")
        else:
            link.unlink(missing_ok=True)
            link.symlink_to(target)
        links.append(link)
    return links


def link_course(app: Sphinx, config: Config) -> None:
    """Before Sphinx looks for documents: the links, in <source>/course."""
    link_notebooks(Path(config.course_notebooks), Path(app.srcdir) / "course")


def setup(app: Sphinx) -> dict[str, object]:
    app.add_config_value("course_notebooks", "", "env", str)
    app.connect("config-inited", link_course)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
