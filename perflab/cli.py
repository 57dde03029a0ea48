"""The ``perflab`` command. Each subcommand lives in ``perflab/commands/<name>.py``
and exposes ``register(subparsers)``; its handler returns an exit code."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import sys
from collections.abc import Iterator, Sequence
from typing import TextIO

from perflab.errors import EXTRA_OF, PerflabError, missing_extra

# Order is the order shown in --help.
COMMANDS = (
    "info",
    "time",
    "trace",
    "timeline",
    "roofline",
    "ptx",
    "machine",
    "ceilings",
    "exercises",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="perflab",
        description="perflab: a GPU performance lab. Time code, read PTX/SASS, "
        "analyse traces, measure the machine.",
        epilog="Run 'perflab COMMAND --help' for a command's options.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        module_name = f"perflab.commands.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).register(sub)
    return parser


def terminal_safe(message: str) -> str:
    """An error message for a terminal: its lines and tabs kept, every other control
    character (from a file name, a kernel name, a trace) written as its escape, so that a
    name cannot move the cursor, recolour the terminal or hide text."""
    from perflab.render.html import printable_lines

    return printable_lines(message)


class TerminalStream(io.TextIOBase):
    """A text stream for a terminal: what is written goes on to ``unescaped`` through
    :func:`terminal_safe`. The command's stdout and stderr are such streams while it runs, so
    that no view, message or warning can print a name from a file raw, whichever function
    printed it. A writer whose own control characters must act (the carriage return that
    redraws a progress line) writes to ``unescaped``."""

    def __init__(self, unescaped: TextIO) -> None:
        super().__init__()
        self.unescaped = unescaped

    def write(self, text: str) -> int:
        # a printable line (what print and csv write, a row at a time) needs no escaping;
        # no character a terminal acts on is printable (they are controls, separators,
        # format characters)
        line = text[:-1] if text.endswith("\n") else text
        self.unescaped.write(text if line.isprintable() else terminal_safe(text))
        return len(text)

    def flush(self) -> None:
        self.unescaped.flush()

    def isatty(self) -> bool:
        return self.unescaped.isatty()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.unescaped.fileno()

    @property  # io.TextIOBase's is a read-only attribute (None) that typeshed types as str
    def encoding(self) -> str:  # type: ignore[override]
        return self.unescaped.encoding


@contextlib.contextmanager
def terminal_streams() -> Iterator[None]:
    """stdout and stderr as :class:`TerminalStream` for the duration."""
    out, err = sys.stdout, sys.stderr
    if out is not None:
        sys.stdout = TerminalStream(out)
    if err is not None:
        sys.stderr = TerminalStream(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def main(argv: Sequence[str] | None = None) -> int:
    with terminal_streams():
        return _run(argv)


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
    except PerflabError as exc:
        print(f"perflab: error: {terminal_safe(str(exc))}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:  # an optional package a view or tool imports itself
        package = (exc.name or "").split(".")[0]
        if package not in EXTRA_OF:
            raise
        print(
            f"perflab: error: {missing_extra(f'perflab {args.command}', package)}", file=sys.stderr
        )
        return 2
    except KeyboardInterrupt:
        print("perflab: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `perflab ... | head`
        return 0
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
