"""`morello-asp verify`: z3 proofs for a saved program or for one layout."""

from __future__ import annotations

from morello_asp.cli.args import add_rules_option, check_rules, program_file, shape
from morello_asp.errors import InputError, MorelloError
from morello_asp.layout import Layout, LayoutError
from morello_asp.serialize import load_with_rules


def _verify(args):
    from morello_asp.solver.proofs.verify import (  # z3: loaded when this command runs, not for every command
        prove_layout,
        verify,
    )

    if args.layout and args.program:
        raise InputError(
            f"give a program ({args.program}) or --layout with --shape, not both: verify proves one of them per run"
        )
    if args.shape and not args.layout:
        raise InputError("--shape is the shape of --layout: give --layout too, or drop --shape")
    if args.layout:
        if not args.shape:
            raise InputError("--layout needs --shape, e.g. --shape 6x8")
        try:
            lay = Layout.parse(args.layout, len(args.shape), validate=False)
        except LayoutError as e:
            raise InputError(f"--layout: {e}") from None
        shape = "x".join(map(str, args.shape))
        if lay.rank != len(args.shape):
            # a layout of another rank is not one z3 refutes for this shape: the two do not fit
            raise InputError(
                f"--layout {args.layout} is a layout of rank {lay.rank} (it names logical dimensions up to "
                f"{lay.rank - 1}) but --shape {shape} has rank {len(args.shape)}: it must name each of them"
            )
        ob = prove_layout(lay, args.shape)
        print(ob)
        return 0 if ob.status == "proved" else 1
    if not args.program:
        raise MorelloError("give a program JSON file, or --layout and --shape")

    imp, rules = load_with_rules(program_file(args.program))
    rules = rules + tuple(args.rules or ())
    check_rules(imp.spec.target, rules)
    rep = verify(imp, rules)
    print(rep)
    if args.all:
        for o in rep.obligations:
            print(o)
    return 0 if rep.ok else 1


def register(sub):
    p = sub.add_parser(
        "verify",
        help="prove a saved program (or a layout) legal with z3",
        description="Prove a saved program legal (verify PROGRAM.json), or prove one layout a bijection "
        "for one shape (verify --layout L --shape S); one or the other per run, not both. Exit 1 if a proof "
        "is refuted, 2 for bad input (a layout whose rank is not the shape's is bad input, not a refutation).",
    )
    p.add_argument(
        "program",
        nargs="?",
        help="program JSON saved by synth --out or morello_asp.serialize.save (not with --layout)",
    )
    p.add_argument(
        "--layout", help='a layout to check instead of a program, e.g. "[1, 0, 1 p(4)]" (needs --shape of its rank)'
    )
    p.add_argument("--shape", type=shape, help="tensor shape for --layout, e.g. 6x8")
    add_rules_option(p, "extra logic file the program's kernels come from, besides those it was saved with")
    p.add_argument("--all", action="store_true", help="list every obligation, not only failures")
    p.set_defaults(func=_verify)
