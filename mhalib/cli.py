"""The ``mhalib`` command line: one sub-command per module in :mod:`mhalib.commands`.

Each command module defines ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int``. Building the parser imports every command module, so they import what
their command needs inside ``add_arguments`` and ``run``: ``mhalib info`` does not pay for
importing the grader.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "lab": "mhalib.commands.lab",
    "info": "mhalib.commands.info",
    "bench": "mhalib.commands.bench",
    "release": "mhalib.commands.release",
    "grade": "mhalib.commands.grade",
    "report": "mhalib.commands.report",
    "hub": "mhalib.commands.hub",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mhalib", description="Multi-head attention course: lessons, reference code, grading."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
