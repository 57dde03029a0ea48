"""The CLI reference, generated from perflab's argparse parsers.

``.. perflab-cli::`` renders ``perflab`` and every command and subcommand under it (found as
``perflab.cli`` finds them, in ``perflab/commands``): usage, description, each argument with its
help and default, and the epilog. Each command is a section and a ``program``, and each of its
options an ``option`` of that program, so a guide's ``:option:`perflab trace diff --step```
links to it and, in a nitpicky build, fails when the option is gone.
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import re
import textwrap
from collections.abc import Iterator

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

# Title underlines by depth below the page's own title: perflab, a command, a subcommand.
UNDERLINES = "=-~^"


def escape(text: str) -> str:
    """Text shown as written: every punctuation character backslash-escaped, so that a help
    string's ``*fp32`` or backquote is not read as reStructuredText markup."""
    return re.sub(r"([^\w\s])", r"\\\1", text)


def subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand, once each (an alias is named with its command)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            formatter = parser._get_formatter()
            helps = {
                choice.dest: formatter._expand_help(choice) if choice.help else ""
                for choice in action._choices_actions
            }
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, helps.get(name, ""), sub


def aliases(parser: argparse.ArgumentParser, name: str) -> list[str]:
    """The other names a subcommand answers to (``perflab ptx`` is ``perflab compile``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            target = action.choices[name]
            return [n for n, sub in action.choices.items() if sub is target and n != name]
    return []


def documented(action: argparse.Action) -> bool:
    """Whether an argument is shown: not --help (every command has it), not hidden, not the
    subcommand chooser (its commands get sections of their own)."""
    return not (
        isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
        or action.help == argparse.SUPPRESS
    )


def option_lines(parser: argparse.ArgumentParser, action: argparse.Action) -> list[str]:
    """An ``.. option::`` entry: the invocation as ``--help`` writes it, then the help."""
    formatter = parser._get_formatter()
    invocation = formatter._format_action_invocation(action)
    help_text = formatter._expand_help(action) if action.help else ""
    lines = [f".. option:: {invocation}", ""]
    lines += [f"   {escape(line)}" for line in help_text.splitlines()]
    return [*lines, ""]


def argument_lines(parser: argparse.ArgumentParser) -> list[str]:
    """Each argument group (positional arguments, options, ...) with its options."""
    lines: list[str] = []
    for group in parser._action_groups:
        shown = [a for a in group._group_actions if documented(a)]
        if not shown:
            continue
        lines += [f".. rubric:: {escape(group.title or 'arguments')}", ""]
        for action in shown:
            lines += option_lines(parser, action)
    return lines


def usage_lines(text: str) -> list[str]:
    """A usage line, preformatted as ``--help`` writes it (plain text: no highlighting)."""
    return [".. code-block:: text", "", *(f"   {line}" for line in text.splitlines()), ""]


def text_lines(parser: argparse.ArgumentParser, text: str | None) -> list[str]:
    """A description or epilog as ``--help`` shows it. argparse reflows it into one
    paragraph, except under a raw formatter, where its lines stay: there, runs of indented
    lines (a list such as trace idle's causes) become a list and other lines paragraphs."""
    if not text:
        return []
    if not isinstance(parser._get_formatter(), argparse.RawDescriptionHelpFormatter):
        return [escape(" ".join(text.split())), ""]
    lines: list[str] = []
    for kind, run in itertools.groupby(text.splitlines(), key=line_kind):
        if kind == "indented":
            lines += [*(f"- {escape(line.strip())}" for line in run), ""]
        elif kind == "text":
            lines += [escape(" ".join(" ".join(run).split())), ""]
    return lines


def line_kind(line: str) -> str:
    """blank (parts paragraphs), indented (an item of a list) or text."""
    if not line.strip():
        return "blank"
    return "indented" if line[:1].isspace() else "text"


def command_lines(
    parser: argparse.ArgumentParser, path: list[str], depth: int, help_line: str = ""
) -> list[str]:
    """One command's section, then its subcommands' sections one level down."""
    program = " ".join(path)
    title = f"``{program}``"
    lines = [
        f".. _cli-{'-'.join(path[1:]) or 'perflab'}:",
        "",
        title,
        UNDERLINES[depth] * len(title),
    ]
    lines += ["", f".. program:: {program}", ""]
    lines += text_lines(parser, parser.description or help_line)
    lines += usage_lines(parser.format_usage().removeprefix("usage: ").rstrip())
    lines += argument_lines(parser)
    lines += text_lines(parser, parser.epilog)
    children = list(subcommands(parser))
    if children:
        lines += [".. rubric:: commands", ""]
        for name, help_text, _sub in children:
            other = aliases(parser, name)
            also = f" (also ``{' '.join([*path, *other])}``)" if other else ""
            lines += [
                f"- :ref:`{' '.join([*path, name])} <cli-{'-'.join([*path[1:], name])}>`"
                f"{also}: {escape(help_text)}"
            ]
        lines.append("")
    for name, help_text, sub in children:
        lines += command_lines(sub, [*path, name], depth + 1, help_text)
    return lines


def magic_lines(magic: str, parser: argparse.ArgumentParser) -> list[str]:
    """A cell magic's section: its description (the method's docstring, already
    reStructuredText), usage and options."""
    title = f"``%%{magic}``"
    lines = [f".. _magic-{magic}:", "", title, UNDERLINES[0] * len(title), ""]
    lines += [f".. program:: %%{magic}", ""]
    lines += [*inspect.cleandoc(parser.description or "").splitlines(), ""]
    # IPython writes the usage as a literal block of the line magic: "::", then "%name ..."
    usage = textwrap.dedent(parser.format_usage().split("::", 1)[-1]).strip("\n")
    lines += usage_lines(f"%{usage}")
    return [*lines, *argument_lines(parser)]


def magics_lines() -> list[str]:
    """``%%gpuprofile`` and ``%%ptx``, from the parsers IPython builds for them."""
    from perflab.magics.gpuprofile import GpuProfileMagics
    from perflab.magics.ptx import PtxMagics

    lines: list[str] = []
    for name, method in (("gpuprofile", GpuProfileMagics.gpuprofile), ("ptx", PtxMagics.ptx)):
        lines += magic_lines(name, method.parser)
    return lines


class GeneratedReference(SphinxDirective):
    """Sections made from reStructuredText lines that a subclass writes."""

    source = ""

    def lines(self) -> list[str]:
        raise NotImplementedError

    def run(self) -> list[nodes.Node]:
        self.env.note_reread()  # the parsers are code: read them again at every build
        container = nodes.section()
        container.document = self.state.document
        content = StringList(self.lines(), source=self.source)
        nested_parse_with_titles(self.state, content, container)
        return list(container.children)


class PerflabCli(GeneratedReference):
    """``.. perflab-cli::``: every perflab command, from its parser."""

    source = "perflab.cli"

    def lines(self) -> list[str]:
        from perflab.cli import build_parser

        return command_lines(build_parser(), ["perflab"], 0)


class PerflabMagics(GeneratedReference):
    """``.. perflab-magics::``: the cell magics, from their parsers."""

    source = "perflab.magics"

    def lines(self) -> list[str]:
        return magics_lines()


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("perflab-cli", PerflabCli)
    app.add_directive("perflab-magics", PerflabMagics)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
