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
    """A table of keys for each object the document holds (the document's first), then its
    whole JSON Schema."""
    from perflab.commands.json_schemas import schema

    document = schema(kind)
    lines: list[str] = []
    for name, definition in objects(document):
        lines += key_table(name, definition)
    text = json.dumps(document, indent=2)
    lines += [".. rubric:: JSON Schema", "", ".. code-block:: json", ""]
    return [*lines, *(f"   {line}" for line in text.splitlines()), ""]


def objects(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The schema's object definitions with keys, the one it refers to first."""
    defs: dict[str, Any] = document.get("$defs", {})
    root = document.get("$ref", "").rsplit("/", 1)[-1]
    if document.get("type") == "array" and "$ref" in document.get("items", {}):
        root = document["items"]["$ref"].rsplit("/", 1)[-1]
    order = [root, *(name for name in defs if name != root)]
    return [(n, defs[n]) for n in order if n in defs and defs[n].get("properties")]


def key_table(name: str, definition: dict[str, Any]) -> list[str]:
    required = set(definition.get("required", ()))
    lines = [
        f".. list-table:: ``{name}``",
        "   :header-rows: 1",
        "   :widths: 30 55 15",
        "",
        *row("key", "value", "always there"),
    ]
    for key, value in definition["properties"].items():
        lines += row(f"``{key}``", type_text(value), "yes" if key in required else "no")
    return [*lines, ""]


def row(*cells: str) -> list[str]:
    first, *rest = cells
    return [f"   * - {first}", *(f"     - {cell}" for cell in rest)]


def type_text(value: dict[str, Any]) -> str:
    """A schema's value type in words: ``integer or null``, ``list of GapView``, ``map of
    string to CauseTotal``."""
    if "$ref" in value:
        return f"``{value['$ref'].rsplit('/', 1)[-1]}``"
    if "anyOf" in value:
        return " or ".join(type_text(v) for v in value["anyOf"])
    if "enum" in value:
        return "one of " + ", ".join(f"``{json.dumps(v)}``" for v in value["enum"])
    if "const" in value:
        return f"``{json.dumps(value['const'])}``"
    kind = value.get("type", "any value")
    if kind == "array" and "prefixItems" in value:
        return "[" + ", ".join(type_text(v) for v in value["prefixItems"]) + "]"
    if kind == "array":
        return "list of " + type_text(value["items"]) if "items" in value else "list"
    if kind == "object" and isinstance(value.get("additionalProperties"), dict):
        return "map of string to " + type_text(value["additionalProperties"])
    return " or ".join(kind) if isinstance(kind, list) else str(kind)


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
