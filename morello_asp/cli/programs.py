"""`morello-asp run` and `morello-asp bench`: execute a saved program (JSON from
morello_asp.serialize.save) or a synthesized one for a spec, checked and timed."""

from __future__ import annotations

from pathlib import Path

from morello_asp import native
from morello_asp.cli.args import (
    TARGET_HELP,
    add_rules_option,
    add_target_option,
    check_logic_inputs,
    int_range,
    pad_list,
    program_file,
)
from morello_asp.codegen.ctarget import get_ctarget
from morello_asp.errors import MorelloError, RefutedError
from morello_asp.serialize import load_with_rules
from morello_asp.spec import parse_spec
from morello_asp.synthesis import synthesize
from morello_asp.target import NATIVE, get_target, installed_targets


def load_program(args):
    """(program, rule files) from a saved program if the argument names a file (proved
    legal first unless --no-verify), else the synthesized program for a spec."""
    file_or_spec = args.program
    rules = tuple(args.rules or ())
    check_logic_inputs(args)
    if Path(file_or_spec).is_file() or Path(file_or_spec).is_dir() or file_or_spec.endswith(".json"):
        program_file(file_or_spec)

        imp, saved = load_with_rules(file_or_spec)
        rules = saved + rules
        if not args.no_verify:
            from morello_asp.solver.proofs.verify import (
                verify,  # z3: loaded when this command runs, not for every command
            )

            rep = verify(imp, rules)
            if not rep.ok:
                bad = [o for o in rep.obligations if o.status != "proved"]
                raise RefutedError(
                    f"{file_or_spec}: not proved legal, not running it (--no-verify to run anyway): "
                    f"{len(bad)} obligation(s) not proved, first: {bad[0]}"
                )
        return imp, rules

    spec = parse_spec(file_or_spec, args.target, rules=rules)
    return synthesize(spec, rules=rules), rules


def _run(args):
    imp, rules = load_program(args)
    if args.show_c:
        print(imp.to_c(rules))
    fn = imp.compile(rules)
    pad = args.pad
    err, tol = (fn.padded(pad[0] if len(pad) == 1 else pad) if pad else fn).check(args.seed)
    ok = err <= tol
    print(f"{imp.spec}")
    pads = f" (inputs padded by {', '.join(map(str, pad))} with zeros)" if pad else ""
    print(f"max |error| vs numpy{pads} = {err:.3g} (tolerance {tol:.3g}): {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def _bench(args):
    imp, rules = load_program(args)
    fn = imp.compile(rules)
    err, tol = fn.check()
    if err > tol:
        raise RefutedError(f"program output differs from numpy by {err:.3g} (tolerance {tol:.3g}); not timing it")
    r = fn.benchmark(reps=args.reps)
    print(f"{imp.spec}")
    print(r)
    return 0


def _targets(args):
    """The native target (what was detected, and its file), every installed target (the
    entry files of encodings/targets/) and whether this machine runs it; then the files
    there that targets include, which are not targets."""

    rows = []
    entries, includes = installed_targets()
    for name, entry in {NATIVE: native.entry(), **entries}.items():
        try:
            ct = get_ctarget(get_target(entry))
        except MorelloError as e:
            rows.append((name, "", f"cannot load: {e}".splitlines()[0]))
            continue
        tgt = ct.target
        how = ct.run_mode + (f" under {' '.join(ct.emulator)}" if ct.emulator else "")
        vec = "/".join(str(b) for b in sorted(tgt.vector_types)) or "-"
        desc = (
            f"{len(tgt.levels)} levels ({', '.join(tgt.level_names)}), vectors {vec} bytes; "
            f"{ct.compiler_command} {' '.join(ct.flags)}; {how}"
        )
        if args.verbose and ct.cpu_flags:
            desc += f"; cpu flags {' '.join(ct.cpu_flags)}"
        why = ct.cannot_run()
        rows.append((name, desc, "runs here" if not why else f"does not run here: {why}"))
        if name == NATIVE:
            rows.append(("", "\n".join(native.describe(native.host(), entry)), ""))
    width = max(len(r[0]) for r in rows)
    for name, desc, status in rows:
        if name or status:
            print(f"{name:<{width}}  {status}")
        for line in desc.splitlines():
            print(f"{'':<{width}}  {line}")
    if includes:
        shared = "; ".join(f"{n}.lp ({', '.join(by) or 'included by none'})" for n, by in includes.items())
        print(f"\ninclude files, not targets (included by): {shared}")
    return 0


def register(sub):
    p = sub.add_parser("targets", help="installed targets, and whether this machine can run their programs")
    p.add_argument("-v", "--verbose", action="store_true", help="also the CPU flags each target needs")
    p.set_defaults(func=_targets)
    for name, fn, help_ in (
        ("run", _run, "compile a program, run it on random inputs and check it against numpy"),
        ("bench", _bench, "compile a program and time it (loop in C, median of repetitions)"),
    ):
        p = sub.add_parser(name, help=help_)
        p.add_argument(
            "program",
            metavar="FILE_OR_SPEC",
            help="program JSON saved by morello_asp.serialize.save, or a spec to synthesize",
        )
        add_target_option(p, TARGET_HELP + "; a saved program names its own")
        add_rules_option(p, "extra logic file (kernels), besides those a saved program records")
        p.add_argument("--no-verify", action="store_true", help="run a saved program without proving it legal first")
        if name == "run":
            p.add_argument("--seed", type=int_range(0, 2**32 - 1, "a random seed"), default=0)
            p.add_argument("--show-c", action="store_true", help="print the generated C first")
            p.add_argument(
                "--pad",
                type=pad_list,
                metavar="P[,P...]",
                help="call the program on inputs without their zero border, as synth --pad does",
            )
        else:
            p.add_argument("--reps", type=int_range(1, 10**6, "a number of repetitions"), default=7)
        p.set_defaults(func=fn)
