"""The scripts a chart output carries: static files with bokeh's code in their place."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("bokeh")

from perflab.render import bokeh_embed
from perflab.render.html import static_text


def chart_html(runtime: bool) -> str:
    from perflab.render.roofline import roofline

    chart = roofline([("gemm", 1e12, 1e9, 1e-3)], device="H200")
    return bokeh_embed._chart_html(chart.figure(), "gemm", "<svg/>", runtime)


def scripts(html: str) -> list[str]:
    return re.findall(r"<script>(.*?)</script>", html, flags=re.S)


def test_the_static_scripts_take_code_in_one_place() -> None:
    for name in ("bokeh-draw.js", "bokeh-load.js"):
        assert static_text(name).count(bokeh_embed.CODE_HERE) == 1, name


def test_a_static_script_without_its_place_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bokeh_embed, "static_text", lambda name: "draw();")
    with pytest.raises(ValueError, match="CODE"):
        bokeh_embed._script("bokeh-draw.js", "x();")


def test_the_plot_is_drawn_by_the_waiter_with_bokehs_code_inside() -> None:
    html = chart_html(runtime=False)
    (draw,) = scripts(html)
    assert draw.startswith("// Draws a chart output's bokeh plot")
    assert bokeh_embed.CODE_HERE not in draw
    head, tail = draw.split("draw(function () {", 1)
    assert "Bokeh.embed.embed_items" in tail and tail.rstrip().endswith("});\n})();")
    assert "function draw(embed)" in head


def test_the_first_output_loads_bokehjs_unless_the_page_has_it() -> None:
    loader, _draw = scripts(chart_html(runtime=True))
    assert "if (typeof window.Bokeh === 'undefined') {" in loader
    assert bokeh_embed.CODE_HERE not in loader and len(loader) > 1_000_000


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to parse the scripts")
def test_the_scripts_parse_as_javascript(tmp_path: Path) -> None:
    for i, script in enumerate(scripts(chart_html(runtime=True))):
        path = tmp_path / f"script{i}.js"
        path.write_text(script, encoding="utf-8")
        subprocess.run(["node", "--check", str(path)], check=True, capture_output=True)


def test_an_output_after_the_carrier_was_deleted_carries_bokehjs_again() -> None:
    once = bokeh_embed.RuntimeOnce()
    assert once.needed({"cellId": "a"}) and not once.needed({"cellId": "b"})
    assert once.needed({"cellId": "b", "deletedCells": ["a"]})  # the carrier was deleted
