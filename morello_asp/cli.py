"""The `morello-asp` command. Each feature area registers its own subcommands from its
own module (listed in COMMAND_MODULES), so this file stays a dispatcher."""
from __future__ import annotations

import argparse
import importlib
import sys

from .errors import MorelloError, RefutedError

COMMAND_MODULES = [
    "morello_asp.cli_schedule",
    "morello_asp.codegen.cli",
    "morello_asp.solver.cli_synth",
    "morello_asp.solver.cli_verify",
    "morello_asp.solver.cli_db",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="morello-asp", description="Synthesizing compiler for tensor programs (rules and targets as logic programs).")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args) or 0
    except RefutedError as e:  # a check ran and failed: exit 1, as a refuted proof does
        print(f"morello-asp: error: {e}", file=sys.stderr)
        return 1
    except MorelloError as e:
        print(f"morello-asp: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("morello-asp: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
