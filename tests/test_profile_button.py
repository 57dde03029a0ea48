"""The kernel side of JupyterLab's Profile button: perflab.labext.profile_cell runs a cell as
%%gpuprofile would, in a kernel that never loaded perflab's magics, and the extension's
connection loads none either (a notebook that forgets %load_ext fails in Lab as it would in
nbconvert). The code the button sends is the one tests/data/profile_cell_code.json holds,
which the extension's own tests check profileCode against."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from IPython.core.interactiveshell import InteractiveShell

from perflab import labext
from perflab.model.timing import TimingResult

CASES = json.loads((Path(__file__).parent / "data" / "profile_cell_code.json").read_text())
HEADER = re.compile(r"\A\s*%%gpuprofile[^\n]*\n")
FAST = "--budget 5 --warmup 1"


def button_code(source: str) -> str:
    """What the extension's profileCode sends for ``source`` (each case checks it)."""
    quoted = json.dumps(source, ensure_ascii=False)  # as JavaScript's JSON.stringify quotes it
    return f'__import__("perflab.labext").labext.profile_cell(get_ipython(), {quoted})'


@pytest.fixture
def ip() -> InteractiveShell:
    return InteractiveShell.instance()


def run(ip: InteractiveShell, code: str) -> Any:
    return ip.run_cell(code, store_history=True)  # type: ignore[no-untyped-call]


def shown(capsys: pytest.CaptureFixture[str]) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # no terminal colours


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_each_code_the_button_sends_runs_its_cell(ip: InteractiveShell, case: Any) -> None:
    expected: dict[str, Any] = {}
    exec(HEADER.sub("", case["source"]), expected)  # the case's own cell, run plainly
    assert case["code"] == button_code(case["source"])
    ip.user_ns.pop("profiled", None)
    res = run(ip, case["code"])
    assert res.success, res.error_in_exec
    assert ip.user_ns["profiled"] == expected["profiled"]


def test_the_button_names_its_result_after_the_prompt_and_keeps_no_name(
    ip: InteractiveShell,
) -> None:
    ip.user_ns.pop("set_by_the_cell", None)  # the shell is shared with other tests
    before = set(ip.user_ns)
    res = run(ip, button_code(f"%%gpuprofile {FAST} -o\nset_by_the_cell = 1"))
    assert res.success and isinstance(res.result, TimingResult)
    assert res.result.name == f"In[{res.execution_count}]"
    assert {n for n in set(ip.user_ns) - before if not n.startswith("_")} == {"set_by_the_cell"}


def test_the_button_expands_the_options_as_ipython_does(ip: InteractiveShell) -> None:
    ip.user_ns["label"] = "my-label"
    res = run(ip, button_code(f"%%gpuprofile {FAST} --name {{label}} -v kept\nx = 1"))
    assert res.success, res.error_in_exec
    assert ip.user_ns["kept"].name == "my-label"


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("a = 1\nraise ValueError('bad cell')", 2),
        (f"%%gpuprofile {FAST}\na = 1\nraise ValueError('bad cell')", 3),
        ("def f():\n    raise ValueError('bad cell')\n\nf()", 4),
    ],
)
def test_a_failing_cell_shows_its_own_traceback(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str, line: int
) -> None:
    res = run(ip, button_code(source))
    assert isinstance(res.error_in_exec, ValueError)
    out = shown(capsys)
    # the first frame shown is the user's own line, numbered as the cell shows it
    first = re.search(r"^Cell In\[\d+\], line (\d+)", out, re.MULTILINE)
    assert first is not None and int(first[1]) == line, out
    assert out.index("ValueError") < first.start() and "bad cell" in out
    for internal in ("profile_cell", "__import__", "run_cell_magic", "skipping hidden", "perflab"):
        assert internal not in out, internal


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("%%gpuprofile --budget -3\nx = 1", "perflab: error: budget (--budget) must be"),
        (f"%%gpuprofile {FAST}\n\n", "perflab: error: the cell is empty"),
    ],
)
def test_a_perflab_error_is_one_line(
    ip: InteractiveShell, capsys: pytest.CaptureFixture[str], source: str, message: str
) -> None:
    res = run(ip, button_code(source))
    assert not res.success
    out = shown(capsys)
    assert out.startswith(message) and len(out.strip().splitlines()) == 1, out


def test_help_needs_no_body(ip: InteractiveShell, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(ip, button_code("%%gpuprofile --help")).success
    assert "--budget" in shown(capsys)


# A kernel as JupyterLab starts it: no %load_ext perflab. In a process of its own, so that no
# other test's shell (which loads the magics) is the one looked at.
BARE_KERNEL = """
import json
from IPython.core.interactiveshell import InteractiveShell
from perflab import labext

ip = InteractiveShell.instance()
labext.connect("nb.ipynb")
seen = {"after_connect": sorted(ip.magics_manager.magics["cell"])}
typed = ip.run_cell("%%gpuprofile --budget 5\\nx = 1", store_history=True)
seen["typed"] = repr(typed.error_in_exec)
button = ip.run_cell(CODE, store_history=True)
seen["button"] = repr(button.error_in_exec)
seen["after_button"] = sorted(ip.magics_manager.magics["cell"])
seen["history"] = [e.result.name for e in labext._bridge.history.entries]
print("SEEN", json.dumps(seen))
"""


def test_connect_loads_no_magic_and_the_button_works_without_them(tmp_path: Path) -> None:
    code = BARE_KERNEL.replace("CODE", repr(button_code(f"%%gpuprofile {FAST}\ny = 2")))
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("SEEN ")), None)
    assert line is not None, proc.stdout + proc.stderr
    seen = json.loads(line.removeprefix("SEEN "))
    assert "gpuprofile" not in seen["after_connect"] and "ptx" not in seen["after_connect"]
    assert "UsageError" in seen["typed"] and "gpuprofile" in seen["typed"]  # not found
    assert seen["button"] == "None"
    assert seen["after_button"] == seen["after_connect"]  # the button registered nothing
    assert seen["history"] == ["In[2]"]
    saved = labext.History.load(tmp_path / ".perflab" / "nb.ipynb.history.json")
    assert [e.result.name for e in saved.entries] == ["In[2]"]
