"""Checks of the documentation that a Sphinx build does not make.

    python docs/check_site.py options PAGE.md ...     every option a page names exists
    python docs/check_site.py links docs/_build/html  every internal link of the site resolves

``make docs`` runs both; each prints one line per problem and exits 1 if there is any.

Options. The references are generated from the parsers, but a guide is written by hand, so a
flag it names may be one the code no longer has. Each line of a code block, each inline code
span and each line of prose is read as a segment. An option that follows ``perflab COMMAND...``
(``perflab trace diff --step``), ``%%gpuprofile`` or ``%%ptx`` (``%`` or ``%%``), or
``scripts/NAME`` must be one of that command's options; one that starts a segment (`` `--graph` ``)
or stands in prose must be an option of some perflab command or magic. A code segment that starts
with another program (``dask worker ... --nworkers 4``, ``jupyter lab --allow-root``) is that
program's business, and quoted text (``--flags "-maxrregcount=32"``) is a value, not options.

Links. Every ``href`` and ``src`` in the built HTML that is not external must name a file of the
site, and its ``#fragment`` an ``id`` in that file.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from html.parser import HTMLParser
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent

# An option as argparse writes one: two dashes and a name, or one dash and one letter (nvcc's
# -maxrregcount is not read as one), not inside a word or a path.
OPTION = re.compile(r"(?<![\w/.:=-])(--[A-Za-z][\w-]*|-[A-Za-z](?![\w-]))")
# Options every command and magic answers to.
ALWAYS = frozenset({"-h", "--help"})
# What an option's check is anchored to: a perflab command, a magic, a script of the project.
ANCHOR = re.compile(
    r"(?<![\w.%/-])(?:(?P<perflab>perflab)(?![\w-])(?P<words>(?:[ \t]+[a-z][a-z0-9|-]*)*)"
    r"|%{1,2}(?P<magic>gpuprofile|ptx)\b|(?P<script>scripts/[\w-]+))"
)
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
FENCE = re.compile(r"^(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# A code segment that starts with a word (a program, or Python) before any option.
STARTS_WITH_WORD = re.compile(r"^\s*(?:\$\s*)?[A-Za-z_]")


class Segment(NamedTuple):
    """A line of code or prose, or an inline code span, and where it is."""

    text: str
    where: str
    code: bool


# -- parsers -----------------------------------------------------------------------------------


def option_strings(parser: argparse.ArgumentParser) -> frozenset[str]:
    return frozenset(s for action in parser._actions for s in action.option_strings) | ALWAYS


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name, aliases included."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


@cache
def cli_parser() -> argparse.ArgumentParser:
    from perflab.cli import build_parser

    return build_parser()


@cache
def magic_options(magic: str) -> frozenset[str]:
    from perflab.magics.gpuprofile import GpuProfileMagics
    from perflab.magics.ptx import PtxMagics

    method = {"gpuprofile": GpuProfileMagics.gpuprofile, "ptx": PtxMagics.ptx}[magic]
    return option_strings(method.parser)


@cache
def script_options(script: str) -> frozenset[str] | None:
    """The options ``scripts/NAME --help`` lists (None: no such script)."""
    path = ROOT / script
    if not path.is_file():
        return None
    shown = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, timeout=60
    )
    return frozenset(OPTION.findall(shown.stdout.split("options:", 1)[-1])) | ALWAYS


@cache
def every_option() -> frozenset[str]:
    """The options of every perflab command and subcommand, and of both magics."""
    found: set[str] = set(magic_options("gpuprofile") | magic_options("ptx"))
    pending = [cli_parser()]
    while pending:
        parser = pending.pop()
        found |= option_strings(parser)
        pending += subparsers(parser).values()
    return frozenset(found)


def command_options(words: str) -> tuple[str, frozenset[str]]:
    """The command that ``perflab WORDS`` names (its subcommands read as far as they go; a
    word ``a|b`` is either subcommand) and the options all of its parsers have."""
    parsers = [cli_parser()]
    name = ["perflab"]
    for word in words.split():
        choices = [subparsers(p) for p in parsers]
        alternatives = word.split("|")
        if not all(alt in c for alt in alternatives for c in choices):
            break
        parsers = [c[alt] for alt in alternatives for c in choices]
        name.append(word)
    return " ".join(name), frozenset.intersection(*(option_strings(p) for p in parsers))


# -- pages -------------------------------------------------------------------------------------


def segments(page: Path) -> Iterator[Segment]:
    """The lines of code blocks, the inline code spans and the prose of a Markdown page. A
    MyST directive's fence (```{note}) holds Markdown, read as such."""
    fence, directive = "", False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        where = f"{page}:{number}"
        opened = FENCE.match(line.strip())
        if opened and not fence:
            fence, directive = opened.group(1), line.strip()[len(opened.group(1)) :][:1] == "{"
            continue
        if opened and line.strip() == fence:
            fence = ""
            continue
        if fence and not directive:
            yield Segment(line, where, code=True)
            continue
        for span in CODE_SPAN.finditer(line):
            yield Segment(span.group(2), where, code=True)
        yield Segment(CODE_SPAN.sub(" ", line), where, code=False)


def unknown_options(segment: Segment) -> Iterator[str]:
    """A message for each option of the segment that its command does not have."""
    text = QUOTED.sub(" ", segment.text)
    if not segment.code:  # prose: a long option standing alone
        for option in OPTION.findall(text):
            if option.startswith("--") and option not in every_option():
                yield f"{segment.where}: {option} is an option of no perflab command or magic"
        return
    anchors = list(ANCHOR.finditer(text))
    head = text[: anchors[0].start()] if anchors else text
    if not STARTS_WITH_WORD.match(head):  # options first: a perflab option named alone
        for option in OPTION.findall(head):
            if option not in every_option():
                yield f"{segment.where}: {option} is an option of no perflab command or magic"
    for i, anchor in enumerate(anchors):
        end = anchors[i + 1].start() if i + 1 < len(anchors) else len(text)
        command, known = anchored(anchor)
        if known is None:
            yield f"{segment.where}: {command} does not exist"
            continue
        for option in OPTION.findall(text, anchor.end(), end):
            if option not in known:
                yield f"{segment.where}: {command} has no option {option}"


def anchored(anchor: re.Match[str]) -> tuple[str, frozenset[str] | None]:
    """The command an anchor names, and its options (None: no such script)."""
    if anchor.group("magic"):
        return f"%%{anchor.group('magic')}", magic_options(anchor.group("magic"))
    if anchor.group("script"):
        return anchor.group("script"), script_options(anchor.group("script"))
    return command_options(anchor.group("words"))


def check_options(pages: list[Path]) -> list[str]:
    return [problem for page in pages for s in segments(page) for problem in unknown_options(s)]


# -- links -------------------------------------------------------------------------------------


@dataclass
class PageLinks(HTMLParser):
    """The ids and the link targets of one HTML page."""

    ids: set[str] = field(default_factory=set)
    targets: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (name == "name" and tag == "a"):
                self.ids.add(value)
            elif name in ("href", "src"):
                self.targets.append(value)


@cache
def read_page(path: Path) -> PageLinks:
    page = PageLinks()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def is_internal(target: str) -> bool:
    parts = urlsplit(target)
    return not (parts.scheme or parts.netloc or target.startswith("#!"))


def broken_link(site: Path, page: Path, target: str) -> str | None:
    """Why a link of ``page`` does not resolve, or None."""
    parts = urlsplit(target)
    path = (page.parent / unquote(parts.path) if parts.path else page).resolve()
    if path.is_dir():
        path = path / "index.html"
    if not path.is_file() or not path.is_relative_to(site.resolve()):
        return f"{page.relative_to(site)}: link {target}: no file {path.name} in the site"
    anchor = unquote(parts.fragment)
    if anchor and path.suffix == ".html" and anchor not in read_page(path).ids:
        return f"{page.relative_to(site)}: link {target}: no #{anchor} in {path.name}"
    return None


def check_links(site: Path) -> list[str]:
    read_page.cache_clear()  # pages read by an earlier check may have been rebuilt since
    pages = sorted(site.rglob("*.html"))
    if not pages:
        return [f"{site}: no HTML pages (build the site first: make docs)"]
    problems = []
    for page in pages:
        for target in read_page(page).targets:
            if is_internal(target):
                problem = broken_link(site, page, target)
                if problem:
                    problems.append(problem)
    return problems


# -- command line ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="check_site.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="check", required=True)
    sub.add_parser("options", help="options named by pages").add_argument("pages", nargs="+")
    sub.add_parser("links", help="internal links of a built site").add_argument("site")
    args = parser.parse_args(argv)
    if args.check == "options":
        problems = check_options([Path(p) for p in args.pages])
    else:
        problems = check_links(Path(args.site))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
