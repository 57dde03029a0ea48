"""Views through a model of JupyterLab's sanitiser for untrusted notebooks (no browser).

The model is JupyterLab 4's own configuration (packages/apputils/src/sanitizer.ts): its
allowed tags (no <script>, <style>, <svg>), the attributes every tag may have (``class``,
``id``, ``style``, ``title``, ...; no ``data-*``), ``img`` with ``src`` and ``alt``, and the
CSS properties it keeps in ``style``. JupyterLab checks URL schemes only on ``href`` and
``cite``, so an ``img`` ``src`` with a data URI stays; nh3 checks every URL attribute, so the
model allows ``data`` explicitly. tests/test_render_untrusted.py checks the same in real
JupyterLab."""

from __future__ import annotations

import re

import pytest

nh3 = pytest.importorskip("nh3")

TAGS = {
    "a", "b", "br", "code", "details", "div", "em", "h1", "h2", "h3", "h4", "i", "img",
    "input", "label", "li", "ol", "p", "pre", "small", "span", "strong", "summary", "table",
    "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
EVERY_TAG = {"class", "dir", "hidden", "id", "lang", "style", "title"}
ATTRIBUTES = {"*": EVERY_TAG, "img": {"alt", "src", "width", "height"}, "input": {"type"}}
STYLES = {
    "background", "background-color", "border", "border-radius", "color", "display", "flex",
    "flex-wrap", "font-family", "font-size", "gap", "height", "line-height", "margin",
    "margin-top", "max-height", "max-width", "min-width", "overflow", "padding", "white-space",
    "width",
}  # fmt: skip


def sanitise(html: str) -> str:
    return str(
        nh3.clean(
            html,
            tags=TAGS,
            attributes=ATTRIBUTES,
            url_schemes={"http", "https", "data"},
            filter_style_properties=STYLES,
            clean_content_tags={"script", "style"},
        )
    )


def test_ptx_view_keeps_its_layout_and_colours_without_style_tags() -> None:
    from test_ptx_magic import COPY

    from perflab.capture.compile import compile_cuda
    from perflab.render.ptx_view import CompileView, line_color

    html = CompileView(compile_cuda(COPY, arch="sm_90a"))._repr_mimebundle_()["text/html"]
    kept = sanitise(html)
    assert "<style" not in kept and "<script" not in kept
    kept = kept.replace(": ", ":").replace("; ", ";")  # nh3 writes styles without spaces
    assert 'class="pv-panes" style="display:flex;' in kept
    assert kept.count('class="pv-pane" style="flex:1 1 0px;min-width:0px;') == 3
    assert kept.count('class="pv-code" style="max-height:480px;overflow:auto;') == 3
    assert "white-space:pre" in kept
    colours = set(re.findall(r"background-color:(#[0-9a-f]{6})", kept))
    assert line_color(1) in colours and len(colours) >= 2  # rows keep their line colours
    assert 'style="color:#999999"' in kept  # line numbers stay grey
    # the filter boxes work through the dropped <style> block: here they stay hidden
    assert 'class="pv-filters" style="font-size:12px;margin:4px 0px;display:none"' in kept
    assert kept.count('<label style="margin:0px 12px 0px 0px">') == 3
    assert ".pv-filters{display:block!important}" in html  # where the block is kept


def test_chart_picture_survives_and_nothing_else_runs() -> None:
    from test_timeline import PAYLOAD

    import perflab

    html = perflab.roofline([(PAYLOAD, 1e12, 1e9, 1e-3)], device="H200")._repr_mimebundle_()[
        "text/html"
    ]
    kept = sanitise(html)
    assert re.search(r'<img src="data:image/svg\+xml;base64,[A-Za-z0-9+/=]{1000,}"', kept)
    assert "<script" not in kept and PAYLOAD not in kept


def test_timing_histogram_survives_as_an_image() -> None:
    import base64
    import xml.etree.ElementTree as ET

    import numpy as np

    from perflab.model.timing import TimingResult

    samples = np.linspace(1000.0, 1500.0, 50)  # view input, not a measurement
    result = TimingResult(samples_ns=samples, backend="cpu", device="cpu", name="work")
    kept = sanitise(result._repr_mimebundle_()["text/html"])
    found = re.search(r'<img src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', kept)
    assert found is not None
    svg = ET.fromstring(base64.b64decode(found.group(1)))
    assert len(svg.findall("{http://www.w3.org/2000/svg}rect")) > 0
