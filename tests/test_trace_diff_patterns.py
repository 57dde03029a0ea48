"""``perflab trace diff --rename re:PATTERN=REPL`` with patterns that backtrack for ever in
Python's re: the diff returns, with the names Python's re.sub would give."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import diff_gen
import pytest
from data_paths import DATA

from perflab.cli import main
from perflab.io import load_trace

PAIR = DATA / "trace_diff"
NESTED = r"(\w+\s?)+$"
# the same names as NESTED, without nested quantifiers (Python's re is quick on it)
FLAT = r"\w+(?:\s\w+)*\s?\Z"


def _diff_json(*args: str) -> dict[str, Any]:
    """``perflab trace diff ... --json`` in its own process; the timeout only guards a hang
    (loading the two traces takes a few seconds)."""
    done = subprocess.run(
        [sys.executable, "-m", "perflab", "trace", "diff", *args, "--json", "--top", "1000"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_nested_quantifiers_on_the_hta_pair_return() -> None:
    doc = _diff_json(
        str(PAIR / "control.json.gz"), str(PAIR / "test.json.gz"), "--rename", f"re:{NESTED}=X"
    )
    kernels = {row["name"] for row in doc["kernels"]}
    ops = {row["name"] for row in doc["ops"]}
    assert "X" in kernels and {"aten::X", "fbgemm::X"} <= ops


def test_renamed_names_are_those_of_python() -> None:
    """Every name of the pair, renamed (in its own process, against a hang), as Python's
    re.sub renames it with the equivalent pattern it can run."""
    names = sorted(set(load_trace(PAIR / "control.json.gz").strings))
    code = (
        "import json, sys\n"
        "from perflab.analysis.diff_names import Rename\n"
        f"rename = Rename.parse({'re:' + NESTED + '=X'!r})\n"
        "print(json.dumps([rename.apply(n) for n in json.load(sys.stdin)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(names),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    renamed = json.loads(done.stdout)
    assert len(names) > 1000
    assert renamed == [re.sub(FLAT, "X", name) for name in names]
    assert sum(new != old for new, old in zip(renamed, names, strict=True)) > 100


def test_a_long_kernel_name_against_nested_quantifiers(tmp_path: Path) -> None:
    control, test = diff_gen.pair(steps=4)
    long_name = "a" * 5000
    for event in test["traceEvents"]:
        if event["name"] == "new_kernel":
            event["name"] = long_name
    files = []
    for side, doc in (("control", control), ("test", test)):
        files.append(tmp_path / f"{side}.json")
        files[-1].write_text(json.dumps(doc))
    doc = _diff_json(*map(str, files), "--rename", "re:(a+)+b=X", "--rename", "re:^a+$=long")
    assert {row["name"]: row["verdict"] for row in doc["kernels"]}["long"] == "new"


@pytest.mark.parametrize(
    ("rename", "says"),
    [
        (r"re:(a)\1=x", "no backreferences"),
        (r"re:a=\g<1>", "has no groups, so no group 1"),
    ],
)
def test_a_bad_rename_is_refused_before_the_traces_load(
    rename: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "none.json")
    assert main(["trace", "diff", missing, missing, "--rename", rename]) == 2
    err = capsys.readouterr().err
    assert err.startswith("perflab: error: --rename") and says in err and "Traceback" not in err


def test_without_re2_a_rename_names_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "re2", None)  # import re2 now raises ImportError
    missing = str(tmp_path / "none.json")
    assert main(["trace", "diff", missing, missing, "--rename", "re:^void ="]) != 0
    err = capsys.readouterr().err
    assert "perflab: error:" in err and "pip install google-re2" in err
    assert "Traceback" not in err
