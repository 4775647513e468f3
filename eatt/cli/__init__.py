"""The `eatt` command. Every sub-command is a thin layer over a library function.

Each sub-command is one module of this package, named as the command, with three names:
``HELP`` (its line in `eatt --help`), ``add_arguments(parser)`` and ``run(args) -> int``;
:func:`build_parser` adds the modules of :data:`COMMANDS` in their order. What they share
(checked argument types, --json, output) is in common.py; the exit codes in exits.py: 0 ok,
1 check failed, 2 bad input, 3 external tool missing. With --json a command prints exactly one
JSON object on stdout; progress goes to stderr.

Imports stay light (numpy at most): torch (seconds to import), Brevitas, qonnx/onnx and hls4ml
are imported inside the commands that need them, so `eatt --help`, rtl and sim start fast.
"""

from __future__ import annotations

import argparse

from eatt.cli import (
    capture,
    data,
    energy,
    evaluate,
    experiment,
    export,
    flow,
    golden,
    hls,
    pnr,
    power,
    resources,
    rtl,
    sim,
    sweep,
    train,
)
from eatt.cli.common import Parser
from eatt.cli.exits import exit_code

__all__ = ["COMMANDS", "build_parser", "main"]

#: the sub-commands, in the order `eatt --help` lists them
COMMANDS = (
    energy,
    golden,
    export,
    capture,
    hls,
    rtl,
    sim,
    resources,
    pnr,
    power,
    sweep,
    data,
    train,
    evaluate,
    experiment,
    flow,
)


def command_name(module) -> str:
    """A sub-command's name: its module's (eatt.cli.flow -> flow)."""
    return module.__name__.rpartition(".")[2]


def build_parser() -> argparse.ArgumentParser:
    """The `eatt` parser: a sub-parser per module of COMMANDS, whose ``run`` parse_args puts
    into ``args.run``."""
    parser = Parser(prog="eatt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in COMMANDS:
        p = sub.add_parser(command_name(command), help=command.HELP)
        command.add_arguments(p)
        p.set_defaults(run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command (``argv``: its arguments, default sys.argv[1:]); its exit code, as
    eatt/cli/exits.py gives it: 0 ok, 1 a check failed, 2 bad input (one line naming the flag
    or file), 3 a missing tool, 130 interrupted (143 SIGTERM), 141 the reader of stdout went
    away (`eatt energy | head -3`)."""

    def parse_and_run() -> int:
        args = build_parser().parse_args(argv)
        return args.run(args)

    return exit_code(parse_and_run)
