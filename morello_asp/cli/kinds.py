"""`morello-asp kinds`: the spec kinds in force (the built-in declarations and any a
user's --rules files add), with their dimensions, operands and semantics."""

from __future__ import annotations

from morello_asp.cli.args import add_rules_option, check_logic_inputs
from morello_asp.kinds import all_kinds, load
from morello_asp.target import rule_file


def _kinds(args) -> int:

    check_logic_inputs(args)
    added = {k.name for k in load(rule_file(r) for r in args.rules or ())}
    for k in sorted(all_kinds().values(), key=lambda k: k.name):
        mark = "  (from --rules)" if k.name in added else ""
        print(k.describe() + mark)
        if args.verbose:
            print(f"    declared in {k.source}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("kinds", help="the spec kinds in force: dimensions, operands and per-point semantics")
    add_rules_option(p, "a logic file declaring more kinds (encodings/kinds/declare.lp documents how)")
    p.add_argument("-v", "--verbose", action="store_true", help="also the file that declares each kind")
    p.set_defaults(func=_kinds)
