"""``perflab exercises list [--json]``: the tutorial notebooks' exercises, by id."""

from __future__ import annotations

import argparse

from perflab.commands._common import Subcommands, print_json


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "exercises",
        help="list the tutorial notebooks' exercises",
        description="The exercises of the notebooks in notebooks/: a notebook shows one by "
        "id (perflab.exercises.get(ID, ...)) and its question, answer rule, hints and "
        "solution live in perflab.exercises. A prediction is asked before the cell that "
        "measures what decides it, and judged after it.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser(
        "list",
        help="every exercise: id, notebook, kind of answer, prediction or not",
        description="Every exercise in the course's order: its id, its notebook, the kind "
        "of answer it takes (number, choice, band, kernel) and whether it is a prediction "
        "(with the measured values that decide it).",
    )
    listing.add_argument(
        "--json",
        action="store_true",
        help="print a list of {id, notebook, kind, prediction, given, measured}",
    )
    listing.set_defaults(handler=run_list)


def run_list(args: argparse.Namespace) -> int:
    from perflab.exercises import catalogue
    from perflab.render.html import text_table

    specs = catalogue()
    if args.json:
        print_json([spec.to_dict() for spec in specs])
        return 0
    rows = [
        [
            spec.id,
            spec.notebook,
            spec.kind,
            f"yes ({', '.join(spec.measured)})" if spec.prediction else "no",
        ]
        for spec in specs
    ]
    print(text_table(["id", "notebook", "kind", "prediction"], rows, left=(0, 1, 2, 3)))
    return 0
