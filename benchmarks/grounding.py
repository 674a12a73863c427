"""One clingo call on a batch of spec classes, with the rule files as written against
the engine's copies (anonymous variables named, solver/logic/anonymous_vars.py), interleaved
in one process; each pair's answers must be the same set of atoms.

    python benchmarks/grounding.py [--size 16] [--batches 3] [--rounds 5] [--plot out.png]
    python benchmarks/grounding.py --census 30 [--size 64] [--target native]

The batches are the largest that a cold search of Matmul SIZE^3 sends to clingo.

--census K: where grounding goes instead, for the largest batch. clingo has no
per-rule profile, so each rule's positive body is grounded a second time into an atom
of its own over the body's variables: the count of those atoms is how many body
matches the grounder made for the rule. Prints the K rules with the most, by file and
line, the K files with the most, and what the rules cost alone (no spec facts: parsing and grounding them is a
fixed cost of every clingo call).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from morello_asp import parse_spec
from morello_asp.errors import InputError
from morello_asp.ir import Impl
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine


def batches(n: int, keep: int, target: str = "avx2") -> tuple[list[tuple[int, str]], Impl]:
    """(classes, facts) of the `keep` largest clingo calls of a cold Matmul n^3 search,
    and the program it found."""
    seen: list[tuple[int, str]] = []
    submit = clingo_run.submit

    def record(files, facts, size, *a, **kw):
        seen.append((size, facts))
        return submit(files, facts, size, *a, **kw)

    clingo_run.submit = record
    try:
        imp = Search(Engine(target), DictMemo()).build(parse_spec(f"Matmul({n}x{n}x{n}, f32)", target))
    finally:
        clingo_run.submit = submit
    return sorted(seen, key=lambda b: -b[0])[:keep], imp


def census(files: tuple[str, ...], facts: str) -> tuple[list[tuple[int, str, str]], int, float]:
    """([(body matches, file:line, rule text)], matches in all, grounding seconds) of one
    clingo call, every rule of `files` given a twin that counts its body's matches: the
    distinct bindings of the variables its positive atoms name (`_` and variables only an
    aggregate or comparison binds are not told apart)."""
    import clingo
    import clingo.ast as cast

    from morello_asp.solver.logic.files import unsnapshot

    class Names(cast.Transformer):
        def __init__(self):
            self.names: list[str] = []

        def visit_Variable(self, v):
            if v.name != "_" and v.name not in self.names:
                self.names.append(v.name)
            return v

    stmts: list = []
    cast.parse_files(list(files), stmts.append)
    rules: list[tuple[str, str]] = []
    texts: dict[Path, list[str]] = {}  # each file's lines, as the user wrote them
    ctl = clingo.Control(["--warn=none"])
    with cast.ProgramBuilder(ctl) as b:
        for st in stmts:
            b.add(st)
            if st.ast_type != cast.ASTType.Rule:
                continue
            names = Names()
            for lit in st.body:  # positive atoms bind the variables an aggregate may not
                if (
                    lit.ast_type == cast.ASTType.Literal
                    and lit.sign == cast.Sign.NoSign
                    and lit.atom.ast_type == cast.ASTType.SymbolicAtom
                ):
                    names(lit)
            loc = st.location
            args = [cast.SymbolicTerm(loc, clingo.Number(len(rules)))] + [cast.Variable(loc, v) for v in names.names]
            head = cast.Literal(loc, cast.Sign.NoSign, cast.SymbolicAtom(cast.Function(loc, "census__", args, 0)))
            b.add(cast.Rule(loc, head, st.body))
            where = Path(unsnapshot(loc.begin.filename))
            if where not in texts:
                texts[where] = where.read_text().splitlines()
            lines = texts[where][loc.begin.line - 1 : loc.end.line]
            rules.append((f"{where.parent.name}/{where.name}:{loc.begin.line}", " ".join(" ".join(lines).split())))
        cast.parse_string(facts, b.add)
    t0 = time.perf_counter()
    ctl.ground([("base", [])])
    took = time.perf_counter() - t0
    counts = [0] * len(rules)
    for name, arity, positive in ctl.symbolic_atoms.signatures:
        if name == "census__" and positive:
            for a in ctl.symbolic_atoms.by_signature(name, arity):
                counts[a.symbol.arguments[0].number] += 1
    rows = sorted(((n, *rules[k]) for k, n in enumerate(counts) if n), key=lambda r: -r[0])
    return rows, sum(counts), took


def print_census(n: int, top: int, files: tuple[str, ...], target: str = "avx2"):
    """Print the census of Matmul n^3's largest call; return the program the search found."""
    calls, program = batches(n, 1, target)
    size, facts = calls[0]
    rows, total, took = census(files, facts)
    fixed = [timed(files, "")[0] for _ in range(3)]
    print(f"Matmul {n}^3, its largest clingo call: {size} spec classes, {total:,} body matches in all")
    print(f"(grounded with the counting twins in {took:.2f} s; the rules alone, no facts: {min(fixed):.3f} s a call)")
    print("| body matches | share | rule |")
    print("|---|---|---|")
    for matches, where, text in rows[:top]:
        print(f"| {matches:,} | {matches / total:.1%} | `{where}` {text if len(text) <= 100 else text[:99] + '…'} |")
    by_file: dict[str, int] = {}
    for matches, where, _ in rows:
        f = where.rsplit(":", 1)[0]
        by_file[f] = by_file.get(f, 0) + matches
    print("\n| body matches | share | file |")
    print("|---|---|---|")
    for f, matches in sorted(by_file.items(), key=lambda x: -x[1])[:top]:
        print(f"| {matches:,} | {matches / total:.1%} | `{f}` |")
    return program


def timed(files: tuple[str, ...], facts: str) -> tuple[float, list[str]]:
    t0 = time.perf_counter()
    rc, text, errs = clingo_run.answer(files, facts)
    took = time.perf_counter() - t0
    if rc not in (10, 30):
        raise SystemExit(f"grounding.py: clingo failed: {errs.strip()}")
    return took, sorted(text.split())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--plot", help="write a bar chart of the times")
    ap.add_argument("--census", type=int, metavar="K", help="print the K rules with the most body matches instead")
    ap.add_argument("--target", default="avx2", help="target name or entry file (default avx2)")
    args = ap.parse_args(argv)
    engine = Engine(args.target)
    if args.census is not None:
        if args.census < 1:
            raise InputError(f"--census {args.census}: give how many rules to print (1 or more)")
        print_census(args.size, args.census, engine._files, args.target)
        return 0
    written = tuple(str(f) for f in engine.files)  # the files as the user reads them
    named = engine._files  # the engine's copies
    rows = []
    for size, facts in batches(args.size, args.batches, args.target)[0]:
        a: list[float] = []
        b: list[float] = []
        for _ in range(args.rounds):
            ta, ans_a = timed(written, facts)
            tb, ans_b = timed(named, facts)
            if ans_a != ans_b:
                raise SystemExit("grounding.py: the two answers differ")
            a.append(ta)
            b.append(tb)
        ratios = [x / y for x, y in zip(a, b)]
        rows.append((size, len(ans_a), statistics.median(a), statistics.median(b), statistics.median(ratios)))
    print(f"Matmul {args.size}^3, the {len(rows)} largest clingo calls, {args.rounds} interleaved rounds")
    print("| classes | atoms shown | as written s | named s | speed-up (paired median) |")
    print("|---|---|---|---|---|")
    for size, atoms, ta, tb, r in rows:
        print(f"| {size} | {atoms:,} | {ta:.3f} | {tb:.3f} | {r:.2f}x |")
    if args.plot:
        import matplotlib.pyplot as plt

        xs = range(len(rows))
        plt.bar([x - 0.2 for x in xs], [r[2] for r in rows], 0.4, label="as written")
        plt.bar([x + 0.2 for x in xs], [r[3] for r in rows], 0.4, label="anonymous variables named")
        plt.xticks(list(xs), [f"{r[0]} classes" for r in rows])
        plt.ylabel("seconds per clingo call")
        plt.legend()
        plt.savefig(args.plot)
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "grounding.py"))
