"""Argument types for the `morello-asp` commands: every number, shape and file a user
types is checked here, at the edge, so a bad one is a one-line usage error naming the
option instead of a failure deep inside (argparse prefixes "argument --NAME: ")."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from morello_asp.errors import InputError
from morello_asp.solver.logic.rule_check import check_rules as check

INT_MAX = 2**31 - 1  # clingo's integers are 32-bit: no dimension or count beyond this


def int_range(lo: int, hi: int | None = None, what: str = "an integer"):
    """An argparse type: a whole number (ASCII digits) in [lo, hi] (hi: 2^31-1 if None)."""

    def parse(text: str) -> int:
        t = text.strip()
        if not re.fullmatch(r"[+-]?[0-9]+", t):
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
        v = int(t)
        if not lo <= v <= (INT_MAX if hi is None else hi):
            bound = f"at least {lo}" if hi is None else f"from {lo} to {hi}"
            raise argparse.ArgumentTypeError(f"expected {what} {bound}, got {v}")
        return v

    parse.__name__ = what  # argparse names the type in some messages
    return parse


def shape(text: str) -> tuple[int, ...]:
    """A tensor shape such as 6x8 (or 6×8): positive dimensions, ASCII digits."""
    t = text.strip().replace("×", "x")
    parts = t.split("x")
    if not t or any(not re.fullmatch(r"[0-9]+", p.strip()) for p in parts):
        raise argparse.ArgumentTypeError(
            f"expected a shape such as 6x8 (positive whole numbers joined by x), got {text!r}"
        )
    dims = tuple(int(p) for p in parts)
    if any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"dimensions must be positive, got {text!r}")
    if any(d > INT_MAX for d in dims):
        raise argparse.ArgumentTypeError(f"dimensions must be at most {INT_MAX} (2^31-1), got {text!r}")
    return dims


def pad_list(text: str) -> tuple[int, ...]:
    """An argparse type: --pad's whole numbers of zeros, comma-separated (synth, run)."""
    parse = int_range(0, None, "a number of zeros")
    return tuple(parse(x) for x in text.split(","))


def output_file(what: str = "output file"):
    """An argparse type: a path a file can be written to (its directory exists)."""

    def parse(text: str) -> str:
        p = Path(text)
        if p.is_dir():
            raise argparse.ArgumentTypeError(f"{text} is a directory; give a file name")
        if not p.parent.is_dir():
            raise argparse.ArgumentTypeError(f"cannot write {text}: directory {p.parent} does not exist")
        if not os.access(p if p.exists() else p.parent, os.W_OK):
            raise argparse.ArgumentTypeError(f"cannot write {text}: permission denied")
        return text

    parse.__name__ = what
    return parse


def add_rules_option(parser, help: str) -> None:
    """`--rules FILE.lp|NAME` (repeatable): a logic file, or an optional rule set of
    encodings/options/ by name; every command that loads logic files takes it so."""
    parser.add_argument("--rules", action="append", default=[], metavar="FILE.lp|NAME", help=help)


def program_file(path: str) -> str:
    """A saved program's path: InputError unless it names a file."""

    if Path(path).is_dir():
        raise InputError(f"{path} is a directory, not a program file")
    if not Path(path).exists():
        raise InputError(f"no program file {path} (save one with `morello-asp synth SPEC --out FILE`)")
    return path


def check_logic_inputs(args) -> None:
    """Check a target given by path (`--target FILE.lp`) and the `--rules` files before
    anything loads them (see check_rules)."""
    check_rules(getattr(args, "target", None), getattr(args, "rules", None) or ())


def check_rules(target, rules) -> None:
    """A target file and rule files must be readable UTF-8 files that ground in time
    (solver/logic/files.py); warnings (a constant that matches nothing) go to stderr."""
    import sys

    for w in check(target, rules):
        print(f"morello-asp: warning: {w}", file=sys.stderr)


TARGET_HELP = (
    "target name or path to a target .lp file (default: native, made for this machine; "
    "$MORELLO_ASP_TARGET names another)"
)


def add_target_option(p, help: str = TARGET_HELP) -> None:
    """--target: None when not given, so the default target comes from one place
    (morello_asp.target.default_target)."""
    p.add_argument("--target", default=None, help=help)
