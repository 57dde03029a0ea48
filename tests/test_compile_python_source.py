"""A Triton source (.py) is Python: ``perflab compile`` runs it, as ``python FILE`` would,
and says so; nothing else runs one. A saved or cached result holds the kernel's source as
text, shown and never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from perflab.cli import build_parser, main
from perflab.model.kernel import CompileResult

MARKER = "ran.txt"


def _payload(folder: Path) -> str:
    """Python that leaves a file behind when it runs."""
    return f"open({str(folder / MARKER)!r}, 'w').write('ran')\n"


def test_help_says_a_py_file_is_run(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["compile", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a .py file is RUN as Python" in text and "(.py, run as Python)" in text


def test_perflab_compile_runs_a_py_file_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("triton")
    source = tmp_path / "k.py"
    source.write_text(_payload(tmp_path))
    assert main(["compile", str(source)]) == 2  # it ran, and defines no kernel
    assert (tmp_path / MARKER).read_text() == "ran"
    assert "perflab: error:" in capsys.readouterr().err


def test_a_saved_triton_result_is_shown_and_never_run(tmp_path: Path) -> None:
    from perflab.render.views import to_bundle, to_text

    result = CompileResult(
        lang="triton",
        arch="sm_90a",
        source=_payload(tmp_path),
        source_name="k.py",
        kernels=[],
        ptx="",
    )
    loaded = CompileResult.load(result.save(tmp_path / "k.json"))
    assert to_text(loaded) and to_bundle(loaded)["text/html"]
    assert not (tmp_path / MARKER).exists()


def test_a_cu_file_is_only_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Only a name ending in .py is run: another suffix is CUDA C++, read by nvcc."""
    source = tmp_path / "k.PY"
    source.write_text(_payload(tmp_path))
    assert main(["compile", str(source)]) == 1  # nvcc's errors, not Python's run
    assert not (tmp_path / MARKER).exists()
    assert "error" in capsys.readouterr().err
