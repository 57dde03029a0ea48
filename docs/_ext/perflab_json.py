"""The JSON reference, generated from the declared types.

``.. perflab-json::`` renders, for every command whose parser takes ``--json`` (found as
``perflab.cli`` builds them), the document it prints, and for every saved file kind the
shape of its file: each as the declared type's docstring and its JSON Schema
(``msgspec.json.schema``), from the registry ``perflab.commands.json_schemas``. A command
with ``--json`` that the registry does not name fails the build.
"""

from __future__ import annotations

import inspect
import json
from typing import Any, get_args

from perflab_cli import GeneratedReference
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

UNDERLINE = "-"


def described(kind: Any) -> str:
    """The declared type's docstring, its first paragraph in one line ("" for a list of a
    type: its item's)."""
    item = get_args(kind)[0] if get_args(kind) else kind
    doc = inspect.getdoc(item) or ""
    if doc.startswith(("A base class", "dict() ->")):  # an undocumented TypedDict or Struct
        return ""
    first = doc.split("\n\n")[0]
    return " ".join(first.split())


def schema_lines(kind: Any) -> list[str]:
    from perflab.commands.json_schemas import schema

    text = json.dumps(schema(kind), indent=2)
    return [".. code-block:: json", "", *(f"   {line}" for line in text.splitlines()), ""]


def section(title: str) -> list[str]:
    return [title, UNDERLINE * len(title), ""]


def command_lines() -> list[str]:
    from perflab.cli import build_parser
    from perflab.commands.json_schemas import COMMAND_OUTPUTS, json_commands

    lines: list[str] = []
    for command in json_commands(build_parser()):
        outputs = COMMAND_OUTPUTS.get(command)
        if outputs is None:
            raise ExtensionError(
                f"perflab {command} takes --json but perflab.commands.json_schemas "
                "declares no document for it (add it to COMMAND_OUTPUTS)"
            )
        lines += section(f"``perflab {command} --json``")
        for output in outputs:
            if output.when:
                lines += [f"**For {output.when}:**", ""]
            text = described(output.kind)
            lines += [text, ""] if text else []
            lines += schema_lines(output.kind)
    return lines


def saved_lines() -> list[str]:
    from perflab.commands.json_schemas import SAVED_FILES

    lines: list[str] = []
    for kind, declared in SAVED_FILES.items():
        lines += section(f"Saved {kind} files")
        lines += [
            f'The file starts with ``"perflab": "{kind}"`` and ``"schema_version"``, then:',
            "",
        ]
        text = described(declared)
        lines += [text, ""] if text else []
        lines += schema_lines(declared)
    return lines


class PerflabJson(GeneratedReference):
    """``.. perflab-json::``: every ``--json`` document and saved file kind."""

    source = "perflab.commands.json_schemas"

    def lines(self) -> list[str]:
        return [*command_lines(), *saved_lines()]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("perflab-json", PerflabJson)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
