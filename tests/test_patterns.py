"""Users' regular expressions (perflab.analysis.patterns): linear-time matching by RE2, the
replacement rules of Python's re.sub, clear refusals, and plain text without google-re2."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import pytest

from perflab.analysis.diff_names import Rename
from perflab.analysis.patterns import compile_pattern
from perflab.errors import InputError, MissingExtraError, PerflabError

HANGS_IN_PYTHON = [
    # (pattern, name): Python's backtracking re takes exponential time on each
    (r"(a+)+b", "a" * 5000),
    (r"(\w+\s?)+$", "void " + "x" * 60 + "(int)"),
    (r"(.*a){12}b", "a" * 40),
]


def test_nested_quantifiers_on_long_names_return() -> None:
    """Each of these ran for hours with Python's re; the bound is only against a hang."""
    code = (
        "from perflab.analysis.diff_names import Rename\n"
        "from perflab.analysis.categories import categorize\n"
        f"for pattern, name in {HANGS_IN_PYTHON!r}:\n"
        "    print(Rename.parse(f're:{pattern}=X').apply(name)[-6:],"
        " categorize([name], [('slow', pattern)])[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=20, check=True
    )
    assert done.stdout.split("\n")[:3] == ["aaaaaa other", "x(int) other", "aaaaaa other"]
    assert done.stderr == ""


# -- the same answers as Python's re.sub ----------------------------------------------------

_ATOMS = ["a", "b", "_", r"\d", r"\w", ".", "[ab]", "[^a]", "x", r"\s", " "]
_ANCHORS = ["^", "$", r"\b"]
_QUANTIFIERS = ["", "", "*", "+", "?", "{1,2}", "*?", "+?"]
_TEMPLATE = ["X", r"\1", r"\2", r"\g<0>", r"\g<1>", "\\\\", r"\n", "-", r"\-", r"\12"]


def _random_pattern(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _ in range(rng.randint(1, 3)):
        if depth < 2 and rng.random() < 0.3:
            inner = _random_pattern(rng, depth + 1)
            parts.append(rng.choice(["(%s)", "(?:%s)", "(%s|b)"]) % inner)
        elif rng.random() < 0.1:
            parts.append(rng.choice(_ANCHORS))
        else:
            parts.append(rng.choice(_ATOMS) + rng.choice(_QUANTIFIERS))
    return "".join(parts)


def _python_sub(pattern: str, template: str, name: str) -> str | None:
    """Python's answer, or None where Python refuses the replacement."""
    try:
        return re.sub(pattern, template, name)
    except (re.error, IndexError):
        return None


def _ours(pattern: str, template: str, name: str) -> str | None:
    compiled = compile_pattern(pattern, "test")
    try:
        return compiled.sub(compiled.template(template), name)
    except InputError:
        return None


def _empty_match_in(pattern: str, name: str) -> bool:
    return any(m.start() == m.end() for m in re.finditer(pattern, name))


def test_substitution_agrees_with_python_on_a_seeded_fuzz() -> None:
    """Patterns without an empty match (where RE2 and Python part ways: module docstring)
    and the replacement escapes of Python's re.sub give the same name, or both refuse."""
    rng = random.Random(20240611)
    compared = 0
    for _ in range(3000):
        pattern = _random_pattern(rng)
        template = "".join(rng.choice(_TEMPLATE) for _ in range(rng.randint(0, 3)))
        name = "".join(rng.choice("ab_x 1") for _ in range(rng.randint(0, 12)))
        if _empty_match_in(pattern, name):
            continue
        compared += 1
        assert _ours(pattern, template, name) == _python_sub(pattern, template, name), (
            pattern,
            template,
            name,
        )
    assert compared > 2000


@pytest.mark.parametrize(
    ("pattern", "template", "name", "expected"),
    [
        (r"^void ", "", "void k<int>(int)", "k<int>(int)"),
        (r"_(\d+)$", r"_N\1", "k_12", "k_N12"),
        (r"(\w+)::(\w+)", r"\2.\g<1>", "at::add", "add.at"),
        (r"(?P<ns>\w+)::", r"\g<ns>/", "at::native::f", "at/native/f"),
        (r"k(x)?", r"[\1]", "k", "[]"),  # a group that took no part is empty
        (r"\d+", r"\g<0>\g<0>", "a1b22", "a11b2222"),
        (r"\d", "\\\\", "a1", "a\\"),
        (r"\d", r"\-", "a1", "a\\-"),  # a backslash before a non-letter stays
        (r"a", r"\t", "ba", "b\t"),
        (r"x*", "-", "abxd", "-a-b--d-"),  # an empty match right after a match, as in Python
        (r"\b", "|", "ab cd", "|ab| |cd|"),
        (r".", r"<\g<0>>", "é\ud800x", "<é><\ud800><x>"),  # characters, lone surrogates kept
        (r"", "-", "éa", "-é-a-"),
    ],
)
def test_replacements_follow_python(pattern: str, template: str, name: str, expected: str) -> None:
    compiled = compile_pattern(pattern, "test")
    assert compiled.sub(compiled.template(template), name) == expected
    if "\ud800" not in name:
        assert re.sub(pattern, template, name) == expected


@pytest.mark.parametrize(
    ("pattern", "template", "says"),
    [
        ("a", r"\9", "no group 9"),
        ("(a)", r"\g<2>", "1 group, so no group 2"),
        ("(a)", r"\g<x>", "no group named 'x'"),
        ("(a)", r"\q", r"bad escape \q"),
        ("(a)", r"\0", "octal"),
        ("(a)", r"\123", "octal"),
        ("(a)", "x\\", "lone backslash"),
        ("(a)", r"\g1", r"\g needs"),
    ],
)
def test_bad_replacements_are_refused_naming_the_option(
    pattern: str, template: str, says: str
) -> None:
    with pytest.raises(InputError, match=re.escape(says)) as caught:
        Rename.parse(f"re:{pattern}={template}")
    assert str(caught.value).startswith("--rename 're:")
    if says != "octal":  # Python takes octal escapes; perflab refuses them (module docstring)
        with pytest.raises((re.error, IndexError)):
            re.sub(pattern, template, "a")


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(a)\1", "no backreferences"),
        (r"a(?=b)", "no lookaround"),
        (r"(?<!a)b", "no lookaround"),
        (r"a\Z", r"writes \Z as \z"),
        (r"(a", "missing )"),
        ("a{1001}", "invalid repetition size"),
    ],
)
def test_patterns_re2_cannot_take_are_refused_quietly(
    pattern: str, says: str, capfd: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InputError, match=re.escape(says)) as caught:
        compile_pattern(pattern, "--rename 're:x=y'")
    assert str(caught.value).startswith("--rename 're:x=y': not a usable regular expression")
    assert capfd.readouterr().err == ""  # RE2 itself prints nothing


def test_bad_pattern_values_are_input_errors() -> None:
    with pytest.raises(InputError, match="lone surrogate"):
        compile_pattern("a\ud800", "test")
    with pytest.raises(InputError, match="text, not int"):
        compile_pattern(3, "test")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="--rename takes text"):
        Rename.parse(None)  # type: ignore[arg-type]


def test_search_is_case_insensitive_on_request() -> None:
    assert compile_pattern("GEMM", "rule", ignore_case=True).search("my_gemm_kernel")
    assert not compile_pattern("GEMM", "rule").search("my_gemm_kernel")
    assert compile_pattern("x", "rule").search("a\ud800x")


# -- without google-re2 ---------------------------------------------------------------------


@pytest.fixture
def no_re2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "re2", None)  # import re2 now raises ImportError


@pytest.mark.usefixtures("no_re2")
def test_plain_text_is_matched_without_re2() -> None:
    rename = Rename.parse("re:void =")
    assert rename.apply("void void k") == "k"
    assert compile_pattern("GEMM", "rule", ignore_case=True).search("my_gemm_kernel")
    rule = compile_pattern("a-b", "rule")
    assert rule.sub(rule.template(r"<\g<0>>"), "xa-b") == "x<a-b>"


@pytest.mark.usefixtures("no_re2")
def test_a_regular_expression_without_re2_names_the_package() -> None:
    with pytest.raises(MissingExtraError, match="needs google-re2, which is not installed"):
        Rename.parse(r"re:^void =")
    with pytest.raises(PerflabError, match="pip install google-re2"):
        compile_pattern(r"\d+", "rule")
