"""Cross-references to perflab's own names, checked.

Docstrings and type hints name objects where they are defined (``perflab.io.load_trace``,
``perflab.capture.nvtx.Range``), while the API page documents the public names
(``perflab.load_trace``, ``perflab.range``). A reference that Sphinx cannot resolve is
resolved here by importing it: an object that a public name also holds links to that entry;
another object that exists is shown as code, unlinked (internal, not on the site); a name that
does not import is left unresolved, so that the nitpicky build (``-n -W``) fails on it.
"""

from __future__ import annotations

import importlib
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

MISSING = object()


def import_name(dotted: str) -> Any:
    """The object a dotted name names (a module, or attributes of the longest module prefix
    that imports), or MISSING."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr, MISSING)
            if obj is MISSING:
                return MISSING
        return obj
    return MISSING


def public_names() -> dict[int, str]:
    """id of each object perflab names publicly -> its public name (``perflab.Trace``)."""
    import perflab

    names = [n for n in perflab._LAZY if n != "__version__"]
    return {id(getattr(perflab, name)): f"perflab.{name}" for name in names}


def resolve_perflab(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.TextElement
) -> nodes.Element | None:
    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("perflab."):
        return None
    obj = import_name(target)
    if obj is MISSING:
        return None  # a name perflab does not have: the build reports it
    public = public_names().get(id(obj))
    if public and public != target:
        domain = env.get_domain("py")
        typ = node.get("reftype", "obj")
        found = domain.resolve_xref(env, node["refdoc"], app.builder, typ, public, node, contnode)
        if found is not None:
            return found
    return contnode


def setup(app: Sphinx) -> dict[str, object]:
    app.connect("missing-reference", resolve_perflab)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
