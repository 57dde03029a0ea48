"""``perflab ptx FILE.cu`` (alias ``perflab compile``) and the HTML view's escaping."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from perflab.capture.compile import compile_cuda
from perflab.cli import main
from perflab.model.kernel import CompileResult
from perflab.render.ptx_view import ViewOptions, compile_bundle

KERNEL = """#include "helper.cuh"
__global__ void twice(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = twice_of(x[i]);
}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "helper.cuh").write_text("__device__ float twice_of(float v) { return 2.f * v; }\n")
    (tmp_path / "k.cu").write_text(KERNEL)
    return tmp_path / "k.cu"


def test_json_output_is_the_saved_form(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", str(project), "--arch", "sm_90a", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["arch"] == "sm_90a" and doc["lang"] == "cuda"
    (k,) = doc["kernels"]
    assert k["name"] == "twice(float*, int)"
    assert {"registers", "spill_stores", "spill_loads", "shared_static"} <= set(k["resources"])
    sass = [s for s in k["sass_lines"] if s["offset"] is not None]
    stores = [s for s in sass if s["opcode"].startswith("STG")]
    # the multiply is inlined from the user's header: it maps to line 4 of k.cu
    assert stores and {s["line"] for s in stores} == {4}
    # one JSON shape: what --json prints loads back as the result
    again = CompileResult.from_dict(doc)
    assert (
        again.kernel().opcodes
        == compile_cuda(project.read_text(), arch="sm_90a", include_dirs=[str(project.parent)])
        .kernel()
        .opcodes
    )


TRITON_FILE = """import triton
import triton.language as tl


@triton.jit
def double(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)
"""


def test_triton_file_with_a_signature(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "double.py"
    source.write_text(TRITON_FILE)
    argv = ["ptx", str(source), "--signature", "*fp32,i32", "--constexprs", "BLOCK=128"]
    assert main([*argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["lang"] == "triton" and [k["name"] for k in doc["kernels"]] == ["double"]
    assert main(argv) == 0
    assert "kernel double [sm_90a]" in capsys.readouterr().out


def test_triton_file_errors_name_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "broken.py"
    source.write_text("import triton\n\nraise ValueError('nope')\n")
    assert main(["ptx", str(source), "--signature", "*fp32"]) == 2
    assert f"{source} (line 3): ValueError: nope" in capsys.readouterr().err
    source.write_text(TRITON_FILE)
    assert main(["ptx", str(source)]) == 2
    assert "no Triton compile spec: pass --signature" in capsys.readouterr().err


def test_text_output_and_ptx_alias(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ptx", str(project), "--block", "512"]) == 0
    out = capsys.readouterr().out
    assert "kernel twice(float*, int) [sm_90a]" in out and "512-thread blocks" in out


def test_compile_error_exits_1_with_file_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void f(float* x) {\n\n  x[0] = missing;\n}\n")
    assert main(["compile", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f'{bad}:3: error: identifier "missing" is undefined' in err
    # the line before, the line, and a caret under the identifier
    assert "\n  2 | \n  3 |   x[0] = missing;\n    |          ^\n" in err
    assert "Traceback" not in err


def test_missing_file_and_bad_arch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ptx", str(tmp_path / "none.cu")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "k.cu").write_text("__global__ void f() {}\n")
    assert main(["ptx", str(tmp_path / "k.cu"), "--arch", "sm_60"]) == 2
    assert "sm_60 is not supported" in capsys.readouterr().err


HOSTILE = """// </style><script>alert("src")</script>
__global__ void k(float* x) {
  x[0] = 1.f; // <img src=x onerror=alert(1)>
}
"""


def test_view_escapes_everything() -> None:
    result = compile_cuda(HOSTILE, source_name='<b>"name"</b>')
    bundle = compile_bundle(result, ViewOptions(show=("source", "ptx", "sass")))
    html = bundle["text/html"]
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&quot;src&quot;)&lt;/script&gt;" in html
    assert "&lt;b&gt;&quot;name&quot;&lt;/b&gt;" in html
    assert html.count("<script>") == 1  # only the view's own click handler
    assert "http" not in html  # nothing is loaded from outside
    assert "k(float*)" in bundle["text/plain"]


def test_smem_shows_in_the_resource_table(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--smem changes the occupancy, so the table that reports shared memory says it too."""
    assert main(["compile", str(project), "--arch", "sm_80", "--smem", "48K"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"shared \(static \+ dynamic\) +0 B \+ 48 KiB \(--smem\)", out), out
    assert main(["compile", str(project), "--arch", "sm_80"]) == 0
    assert re.search(r"shared \(static \+ dynamic\) +0 B \+ 0 B\n", capsys.readouterr().out)
    result = compile_cuda(project.read_text(), arch="sm_80", include_dirs=[project.parent])
    html = compile_bundle(result, ViewOptions(dynamic_shared=48 * 1024))["text/html"]
    assert "0 B + 48 KiB (--smem)" in html


# ---- the scheduler's view in --json and --html -----------------------------------------

LOAD_USE = """__global__ void load_use(const float* a, float* b, float x) {
  int i = threadIdx.x;
  b[i] = a[i] * x + 1.0f;
}
"""


def test_help_is_titled_perflab_compile(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("compile", "ptx"):
        with pytest.raises(SystemExit):
            main([name, "--help"])
        out = capsys.readouterr().out
        assert out.startswith("usage: perflab compile "), out[:80]
        assert "--html OUT.html" in out


def test_json_has_the_report_and_each_lines_controls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "k.cu"
    source.write_text(LOAD_USE)
    assert main(["compile", str(source), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (k,) = doc["kernels"]
    report = k["report"]
    assert report["occupancy"]["limiting"] == ["warps"] and report["block_size"] == 256
    assert report["instruction_mix"]["LDG"] == 1 and report["spills"] is None
    assert any(i["topic"] == "global loads" for i in report["insights"])
    assert report["live_registers"]["peak"] <= k["resources"]["registers"]
    assert report["schedule"]["long_latency_waits"] >= 1
    instructions = [s for s in k["sass_lines"] if s["offset"] is not None]
    for s in instructions:
        assert set(s["control"]) == {
            "stall",
            "yield",
            "write_barrier",
            "read_barrier",
            "wait_mask",
            "reuse",
        }
        assert 0 <= s["control"]["stall"] <= 15
        assert s["control"]["write_barrier"] in (None, 0, 1, 2, 3, 4, 5)
        assert isinstance(s["waits_for"], list) and isinstance(s["waited_by"], list)
    live = [s for s in instructions if s["opcode"] != "NOP"]
    assert all(s["live_registers"]["gpr"] >= 1 for s in live)
    load = next(s for s in instructions if s["opcode"].startswith("LDG"))
    barrier = load["control"]["write_barrier"]
    assert barrier is not None and load["waited_by"]
    by_offset = {s["offset"]: s for s in instructions}
    for waiter in load["waited_by"]:
        assert load["offset"] in by_offset[waiter]["waits_for"]
        assert by_offset[waiter]["control"]["wait_mask"] >> barrier & 1
    # still the saved form: it loads back, controls and all
    loaded = CompileResult.from_dict(doc).kernel().sass_lines
    assert [s.control.to_dict() for s in loaded if s.control] == [
        s["control"] for s in instructions
    ]


def test_html_writes_the_view_as_a_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "k.cu"
    source.write_text(LOAD_USE)
    out = tmp_path / "view.html"
    assert main(["compile", str(source), "--html", str(out)]) == 0
    captured = capsys.readouterr()
    assert "kernel load_use(float const*, float*, float) [sm_90a]" in captured.out
    assert f"wrote {out}" in captured.err
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<title>perflab compile: k.cu</title>" in page and "SASS" in page
    assert "http" not in page  # nothing loaded from outside


def test_html_never_writes_through_a_planted_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "k.cu"
    source.write_text(LOAD_USE)
    victim = tmp_path / "outside" / "victim.txt"
    victim.parent.mkdir()
    victim.write_text("keep")
    link = tmp_path / "view.html"
    link.symlink_to(victim)
    assert main(["compile", str(source), "--html", str(link)]) == 2
    assert "perflab: error:" in capsys.readouterr().err
    assert victim.read_text() == "keep"
