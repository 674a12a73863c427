"""`morello-asp run` and `morello-asp bench`: execute a saved program (JSON from
morello_asp.serialize.save) or a synthesized one for a spec, checked and timed."""
from __future__ import annotations

from pathlib import Path

from morello_asp.errors import CodegenError, MorelloError


def load_program(file_or_spec: str, target: str = "avx2"):
    """A saved program if the argument names a file, else the synthesized program for a spec."""
    if Path(file_or_spec).is_file():
        from morello_asp.serialize import load

        return load(file_or_spec)
    if file_or_spec.endswith(".json"):
        raise MorelloError(f"no program file {file_or_spec} (save one with `morello-asp synth SPEC --out FILE`)")
    from morello_asp.spec import parse_spec

    spec = parse_spec(file_or_spec, target)
    try:
        from morello_asp.synthesis import synthesize
    except ImportError as e:
        raise CodegenError(f"{file_or_spec!r} is not a file, and synthesis is not available ({e}); "
                           "save a program with morello_asp.serialize.save and pass its path") from None
    return synthesize(spec, target)


def _run(args):
    imp = load_program(args.program, args.target)
    if args.show_c:
        print(imp.to_c(args.target))
    fn = imp.compile(args.target)
    err, tol = fn.check(args.seed)
    ok = err <= tol
    print(f"{imp.spec}")
    print(f"max |error| vs numpy = {err:.3g} (tolerance {tol:.3g}): {'OK' if ok else 'MISMATCH'}")
    return 0 if ok else 1


def _bench(args):
    imp = load_program(args.program, args.target)
    fn = imp.compile(args.target)
    err, tol = fn.check()
    if err > tol:
        raise MorelloError(f"program output differs from numpy by {err:.3g} (tolerance {tol:.3g}); not timing it")
    r = fn.benchmark(reps=args.reps)
    print(f"{imp.spec}")
    print(r)
    return 0


def register(sub):
    for name, fn, help_ in (("run", _run, "compile a program, run it on random inputs and check it against numpy"),
                            ("bench", _bench, "compile a program and time it (loop in C, median of repetitions)")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("program", metavar="FILE_OR_SPEC", help="program JSON saved by morello_asp.serialize.save, or a spec to synthesize")
        p.add_argument("--target", default="avx2")
        if name == "run":
            p.add_argument("--seed", type=int, default=0)
            p.add_argument("--show-c", action="store_true", help="print the generated C first")
        else:
            p.add_argument("--reps", type=int, default=7)
        p.set_defaults(func=fn)
