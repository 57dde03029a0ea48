"""The documentation site's own checks (docs/check_site.py, docs/_ext), tested without
building the site: ``make docs`` builds it and runs the same checks on the result."""

from __future__ import annotations

import argparse
import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import perflab

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# the pages written by hand, whose options the check reads (as `make docs` does)
PAGES = [*sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts), ROOT / "README.md"]


def load(path: Path) -> ModuleType:
    """A module of docs/ by its path (docs/ is not a package)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


check_site = load(DOCS / "check_site.py")
perflab_cli = load(DOCS / "_ext" / "perflab_cli.py")
perflab_refs = load(DOCS / "_ext" / "perflab_refs.py")
course_links = load(DOCS / "_ext" / "course_links.py")


# -- options named by the pages ------------------------------------------------------------------


def test_every_option_the_pages_name_exists() -> None:
    assert check_site.check_options(PAGES) == []


def test_the_option_check_finds_options_the_code_does_not_have(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "`perflab trace diff before.json after.json --step 3 --nope`\n"
        "```bash\n"
        "perflab machine latency|bandwidth --json --bogus\n"
        "%%gpuprofile --graph --hott\n"
        "dask worker tcp://head:8786 --nworkers 4\n"
        'perflab compile k.cu --flags "-maxrregcount=32 --not-ours"\n'
        "```\n"
        "Prose names --gone, and `--graph` and `-q` stand alone.\n"
        "```{note}\n"
        "`perflab ptx k.cu --arch sm_90a --archh`\n"
        "```\n"
    )
    assert [p.split(": ", 1)[1] for p in check_site.check_options([page])] == [
        "perflab trace diff has no option --nope",
        "perflab machine latency|bandwidth has no option --bogus",
        "%%gpuprofile has no option --hott",
        "-q is an option of no perflab command or magic",
        "--gone is an option of no perflab command or magic",
        "perflab ptx has no option --archh",
    ]


def test_options_of_the_project_scripts_are_checked(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "`PYTHONPATH=. python3 scripts/gpu-check --dry-run --wet`\n`scripts/no-such --x`\n"
    )
    assert [p.split(": ", 1)[1] for p in check_site.check_options([page])] == [
        "scripts/gpu-check has no option --wet",
        "scripts/no-such does not exist",
    ]


# -- internal links of the built site --------------------------------------------------------------


def test_the_link_check_finds_missing_files_and_anchors(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/b.html#here">ok</a> <a href="sub/b.html#gone">anchor</a>'
        '<a href="missing.html">file</a> <a href="https://example.org/x.html">external</a>'
        '<img src="pic.png"> <a href="#top" id="top">self</a> <a href="sub/">folder</a>'
    )
    (tmp_path / "sub" / "b.html").write_text('<h1 id="here">b</h1><a href="../index.html">up</a>')
    (tmp_path / "sub" / "index.html").write_text("<p>folder</p>")
    assert check_site.check_links(tmp_path) == [
        "index.html: link sub/b.html#gone: no #gone in b.html",
        "index.html: link missing.html: no file missing.html in the site",
        "index.html: link pic.png: no file pic.png in the site",
    ]
    (tmp_path / "pic.png").write_bytes(b"")
    (tmp_path / "missing.html").write_text("")
    (tmp_path / "sub" / "b.html").write_text('<h1 id="here">b</h1><p id="gone">g</p>')
    assert check_site.check_links(tmp_path) == []


def test_the_link_check_refuses_an_empty_site(tmp_path: Path) -> None:
    assert check_site.main(["links", str(tmp_path)]) == 1


def test_the_checks_run_as_a_script(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("`perflab info --jsonn`\n")
    shown = subprocess.run(
        [sys.executable, str(DOCS / "check_site.py"), "options", str(page)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 1
    assert "perflab info has no option --jsonn" in shown.stderr


# -- the generated references ----------------------------------------------------------------------


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = [path]
    for name, _help, sub in perflab_cli.subcommands(parser):
        found += commands(sub, (*path, name))
    return found


def test_the_cli_reference_has_every_command_and_option() -> None:
    from perflab.cli import build_parser

    parser = build_parser()
    text = "\n".join(perflab_cli.command_lines(parser, ["perflab"], 0))
    every = commands(parser, ("perflab",))
    assert ("perflab", "trace", "idle") in every
    assert ("perflab", "compile") in every and ("perflab", "ptx") not in every  # an alias
    assert "(also ``perflab ptx``)" in text
    for path in every:
        assert f".. program:: {' '.join(path)}\n" in text
    options = re.findall(r"^\.\. option:: (\S+)", text, re.MULTILINE)
    assert "--min-us" in options and "-s" in options and "--scheduler" in options


def test_help_text_is_shown_as_written() -> None:
    parser = argparse.ArgumentParser(prog="demo", description="types *fp32 and `x`")
    parser.add_argument("--sig", help="e.g. *fp32,*fp32 (default %(default)s)", default="|a|")
    text = "\n".join(perflab_cli.command_lines(parser, ["demo"], 0))
    assert r"types \*fp32 and \`x\`" in text
    assert r"e\.g\. \*fp32\,\*fp32 \(default \|a\|\)" in text


def test_the_magics_reference_has_every_option() -> None:
    from perflab.magics.gpuprofile import GpuProfileMagics
    from perflab.magics.ptx import PtxMagics

    text = "\n".join(perflab_cli.magics_lines())
    for program, method in (
        ("%%gpuprofile", GpuProfileMagics.gpuprofile),
        ("%%ptx", PtxMagics.ptx),
    ):
        assert f".. program:: {program}\n" in text
        for action in method.parser._actions:
            for option in action.option_strings:
                assert re.search(rf"^\.\. option:: (.*, )?{option}\b", text, re.MULTILINE), option


def test_the_api_page_documents_every_public_name() -> None:
    page = (DOCS / "reference" / "api.rst").read_text()
    documented = set(re.findall(r"^\.\. auto\w+:: (?:perflab\.)?([\w.]+)", page, re.MULTILINE))
    public = {name for name in perflab.__all__ if name != "__version__"}
    assert public <= documented
    assert {"range", "machine", "recordings"} <= documented


def test_references_to_internal_names_resolve_by_import() -> None:
    assert perflab_refs.import_name("perflab.io.load_trace") is perflab.load_trace
    assert perflab_refs.import_name("perflab.model.trace.Trace.summary") is perflab.Trace.summary
    assert perflab_refs.import_name("perflab.io.no_such_function") is perflab_refs.MISSING
    assert perflab_refs.import_name("perflab.no_such_module.x") is perflab_refs.MISSING
    public = perflab_refs.public_names()
    assert public[id(perflab.load_trace)] == "perflab.load_trace"
    assert public[id(perflab.range)] == "perflab.range"


def sphinx_build(tmp_path: Path, page: str) -> subprocess.CompletedProcess[str]:
    """A one-page site built as `make docs` builds (-W -n), with perflab's reference
    resolver."""
    tmp_path.mkdir()
    (tmp_path / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(DOCS / '_ext')!r})\n"
        "extensions = ['sphinx.ext.autodoc', 'perflab_refs']\n"
        "nitpicky = True\nnitpick_ignore_regex = [(r'py:.*', r'(?!perflab\\b).*')]\n"
    )
    (tmp_path / "index.rst").write_text(
        f"Page\n====\n\n.. autofunction:: perflab.load_trace\n\n{page}\n"
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-b",
            "html",
            "-W",
            "-n",
            "-q",
            str(tmp_path),
            str(tmp_path / "_build"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_reference_to_a_name_perflab_lacks_fails_the_build(tmp_path: Path) -> None:
    built = sphinx_build(tmp_path / "good", "See :func:`perflab.io.load_trace`.")
    assert built.returncode == 0, built.stderr
    broken = sphinx_build(tmp_path / "bad", "See :func:`perflab.io.load_tracer`.")
    assert broken.returncode != 0
    assert "perflab.io.load_tracer" in broken.stderr


def test_the_readme_links_to_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert "docs/getting-started.md" in local and "docs/lab.png" in local
    assert [t for t in local if not (ROOT / t).exists()] == []


# -- the course ------------------------------------------------------------------------------------


def test_the_course_page_links_every_notebook() -> None:
    page = (DOCS / "course" / "index.md").read_text()
    linked = set(re.findall(r"\{doc\}`[^`<]*<([\w-]+)>`", page))
    assert linked == {nb.stem for nb in (ROOT / "notebooks").glob("*.ipynb")}


def test_the_notebooks_are_linked_not_copied(tmp_path: Path) -> None:
    notebooks, course = tmp_path / "notebooks", tmp_path / "docs" / "course"
    notebooks.mkdir()
    (notebooks / "00-a.ipynb").write_text("{}")
    (notebooks / "01-b.ipynb").write_text("{}")
    course.mkdir(parents=True)
    (course / "index.md").write_text("# course")
    (course / "99-gone.ipynb").symlink_to("../../notebooks/99-gone.ipynb")
    links = course_links.link_notebooks(notebooks, course)
    assert [p.name for p in links] == ["00-a.ipynb", "01-b.ipynb"]
    assert all(p.is_symlink() and p.resolve().parent == notebooks.resolve() for p in links)
    assert not (course / "99-gone.ipynb").is_symlink()  # a notebook no longer there
    assert (course / "index.md").read_text() == "# course"
    (course / "01-b.ipynb").unlink()
    (course / "01-b.ipynb").write_text("a copy")
    with pytest.raises(Exception, match="is a file, not a link"):
        course_links.link_notebooks(notebooks, course)
