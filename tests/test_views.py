"""The display seam: one registry names every view, and showing a result loads only its own."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import pytest

import perflab
from perflab.model.display import Shown
from perflab.render.views import VIEWS, View, register, to_bundle, to_text, type_name, view_of


def _all_modules() -> list[str]:
    skip = ("perflab.magics", "perflab.labext", "perflab.io.kineto.helper", "perflab.__main__")
    names = [m.name for m in pkgutil.walk_packages(perflab.__path__, "perflab.")]
    return [n for n in names if not n.startswith(skip)]


def _shown_classes() -> list[type]:
    for name in _all_modules():
        importlib.import_module(name)
    found, todo = [], list(Shown.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return [c for c in found if c.__module__.startswith("perflab.")]


def test_every_registered_view_names_a_real_class_and_functions() -> None:
    for name, view in VIEWS.items():
        module, _, cls = name.rpartition(".")
        assert isinstance(getattr(importlib.import_module(module), cls), type), name
        render = importlib.import_module(view.module)
        for function in (view.text, view.html, view.bundle):
            assert function is None or callable(getattr(render, function)), (name, function)


def test_every_result_that_shows_itself_has_a_view() -> None:
    classes = _shown_classes()
    for cls in classes:
        assert view_of(cls) is not None, type_name(cls)
    assert {type_name(c) for c in classes} == set(VIEWS)  # and no view is left without a type


def test_a_subclass_without_its_own_view_uses_its_base_class_view() -> None:
    from perflab.model.optable import OpTable

    class Mine(OpTable):
        pass

    assert view_of(Mine) is VIEWS[type_name(OpTable)]


def test_a_type_with_no_view_is_a_clear_error() -> None:
    class Stray(Shown):
        pass

    with pytest.raises(TypeError, match="no view of Stray"):
        str(Stray())


def test_register_adds_a_view_that_the_mixin_uses() -> None:
    class Note(Shown):
        def __init__(self, words: str) -> None:
            self.words = words

    register(Note, View("tests_views_helpers", "note_text", "note_html"))
    try:
        sys.modules["tests_views_helpers"] = type(sys)("tests_views_helpers")
        helpers = sys.modules["tests_views_helpers"]
        helpers.note_text = lambda n: f"note: {n.words}"  # type: ignore[attr-defined]
        helpers.note_html = lambda n: f"<b>{n.words}</b>"  # type: ignore[attr-defined]
        note = Note("<x>")
        assert str(note) == to_text(note) == "note: <x>"
        assert to_bundle(note) == {"text/plain": "note: <x>", "text/html": "<b><x></b>"}
        assert note._repr_mimebundle_() == to_bundle(note)
    finally:
        VIEWS.pop(type_name(Note))
        sys.modules.pop("tests_views_helpers", None)


def test_printing_a_trace_summary_loads_only_the_views_it_needs() -> None:
    code = (
        "import sys\n"
        "from perflab.io import load_trace\n"
        "from data_paths import TRACES\n"
        "summary = load_trace(TRACES / 'kineto' / 'alexnet_a100.json.gz').summary()\n"
        "assert 'kernels' in str(summary) and 'text/html' in summary._repr_mimebundle_()\n"
        "print(sorted(m for m in sys.modules if m.startswith(('perflab.render', 'bokeh'))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=str(importlib.import_module("data_paths").ROOT / "tests"),
    ).stdout
    assert out.strip() == str(
        ["perflab.render", "perflab.render.html", "perflab.render.tables", "perflab.render.views"]
    )
