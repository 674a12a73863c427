"""Reading clingo's answers: `solver/logic/answer.py` (string methods, one pass) against the
readers it replaced, kept here as baselines: string methods in two passes (cut every
atom into a row of fields, then group the rows) and one regular-expression scan per
predicate (grouped the same way), on the answers of a real cold search, in interleaved
rounds in one process.

    python benchmarks/answer_read.py [--size 16] [--rounds 5] [--plot read.png]

The answers are captured by running the search with clingo in this process
(`clingo_run.run_inline`); both readers must give the same result on every answer.
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import time

from timing import plot_median_bars

from morello_asp.solver.logic import answer, clingo_run
from morello_asp.solver.search import dp

# ------------------------------------------------------- the two-pass reader
# Predicates with an action term as second argument: how many arguments follow it.
_AFTER_ACTION = {
    "action": 0,
    "child_kind": 2,
    "child_like": 1,
    "child_dim": 3,
    "child_operand": 8,
    "child_stride": 3,
    "child_serial": 1,
    "alloc": 2,
}


def two_pass(text: str, n: int) -> list:
    return group(scan(text), n)


def scan(text: str) -> dict[str, list]:
    """The arguments of each atom read here, as text, per predicate name."""
    rows: dict[str, list] = {k: [] for k in (*_AFTER_ACTION, "bad", "kernel_cost")}
    # An answer without strings (a search's usually has none) splits on white space.
    for atom in text.split() if '"' not in text else answer._atoms(text):
        p = atom.find("(")
        if p < 0 or atom[-1] != ")":
            continue
        name = atom[:p]
        k = _AFTER_ACTION.get(name)
        if k is not None:
            sid, _, rest = atom[p + 1 : -1].partition(",")
            rows[name].append([sid, *rest.rsplit(",", k)] if k else [sid, rest])
        elif name == "bad":
            sid, _, rest = atom[p + 1 : -1].partition(",")
            q = rest.index(',"')
            rows[name].append((sid, rest[:q], rest[q + 2 : -1]))
        elif name == "kernel_cost":
            rows[name].append(atom[p + 1 : -1].split(","))
    return rows


def group(rows: dict[str, list], n: int) -> list[tuple[dict, dict, dict, dict]]:
    """`parse`'s result from `scan`'s rows. Equal strings and tuples are made one object
    (`canon`): the same action, operand and child recur across a batch's atoms, and the
    answer is pickled to the search's process, where each object pickled is one to
    rebuild; shared, they pickle once (a 64^3 search's answers: 4x smaller, 4x faster
    to read back)."""
    canon: dict = {}
    one = canon.setdefault
    acts: list[dict[str, dict]] = [dict() for _ in range(n)]
    bads: list[dict[str, list[str]]] = [dict() for _ in range(n)]
    kcost: list[dict[str, int]] = [dict() for _ in range(n)]
    allocs: list[dict[str, tuple[str, int]]] = [dict() for _ in range(n)]
    for sid, a in rows["action"]:
        acts[int(sid)][one(a, a)] = {}
    for sid, a, why in rows["bad"]:
        bads[int(sid)].setdefault(one(a, a), []).append(one(why, why))
    for sid, kern, c in rows["kernel_cost"]:
        kcost[int(sid)][one(kern, kern)] = int(c)
    for sid, a, lv, u in rows["alloc"]:
        t = (one(lv, lv), int(u))
        allocs[int(sid)][one(a, a)] = one(t, t)

    def child(sid, a, i):
        d = acts[int(sid)].get(a)
        if d is None:
            return None
        c = d.get(i)
        if c is None:
            c = d[i] = [None, {}, {}, False, False]
        return c

    for sid, a, i, kind in rows["child_kind"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[0] = one(kind, kind)
    for sid, a, i, d, x in rows["child_dim"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[1][int(d)] = int(x)
    for sid, a, i, op, *rest in rows["child_operand"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[2][int(op)] = tuple(rest) + ("",)
    for sid, a, i, op, st in rows["child_stride"]:
        c = child(sid, a, int(i))
        if c is not None and int(op) in c[2]:
            c[2][int(op)] = c[2][int(op)][:-1] + (st,)
    for sid, a, i in rows["child_serial"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[3] = True
    for sid, a, i in rows["child_like"]:
        c = child(sid, a, int(i))
        if c is not None:
            c[4] = True
    for per in acts:
        for kids in per.values():
            for i, (k, dims, ops, serial, like) in kids.items():
                for o, t in ops.items():
                    t = tuple([one(x, x) for x in t])
                    ops[o] = one(t, t)
                key: tuple
                if like:
                    dims_t = tuple([one(x, x) for x in sorted(dims.items())])
                    ops_t = tuple([one(x, x) for x in sorted(ops.items())])
                    key = (None, one(dims_t, dims_t), one(ops_t, ops_t), serial, k)
                else:
                    key = (k, tuple(dims[d] for d in sorted(dims)), tuple(ops[o] for o in sorted(ops)), serial)
                kids[i] = one(key, key)
    return list(zip(acts, bads, kcost, allocs))


# ------------------------------------------------- the regular-expression reader
_NEST = r"[^()]*"
for _ in range(2):
    _NEST = r"(?:[^()]|\(" + _NEST + r"\))*"
_ATOM = r"(\w+(?:\(" + _NEST + r"\))?)"
# keyed as solver/logic/answer.py's scan() keys its rows
RE = {
    "action": re.compile(r"\baction\((\d+)," + _ATOM + r"\)"),
    "bad": re.compile(r"\bbad\((\d+)," + _ATOM + r',"((?:[^"\\]|\\.)*)"\)'),
    "child_kind": re.compile(r"\bchild_kind\((\d+)," + _ATOM + r",(\d+),(\w+)\)"),
    "child_dim": re.compile(r"\bchild_dim\((\d+)," + _ATOM + r",(\d+),(\d+),(\d+)\)"),
    "child_operand": re.compile(
        r"\bchild_operand\((\d+)," + _ATOM + r",(\d+),(\d+),(\w+),(\w+),(\d+),(\d+),(\d+),(\d+)\)"
    ),
    "child_stride": re.compile(r"\bchild_stride\((\d+)," + _ATOM + r",(\d+),(\d+),(\d+)\)"),
    "child_serial": re.compile(r"\bchild_serial\((\d+)," + _ATOM + r",(\d+)\)"),
    "child_like": re.compile(r"\bchild_like\((\d+)," + _ATOM + r",(\d+)\)"),
    "alloc": re.compile(r"\balloc\((\d+)," + _ATOM + r",(\w+),(\d+)\)"),
    "kernel_cost": re.compile(r"\bkernel_cost\((\d+),(\w+),(-?\d+)\)"),
}


def regex_parse(text: str, n: int) -> list:
    """One scan of the whole text per predicate, then the two-pass reader's grouping."""
    return group({name: r.findall(text) for name, r in RE.items()}, n)


# ------------------------------------------------------------------- the run
def capture(size: int) -> list[tuple[str, int]]:
    """The printed answers of a cold search of Matmul size^3, f32."""
    from morello_asp.synthesis import synthesize

    saved: list[tuple[str, int]] = []
    here = clingo_run._parsed_answer_here

    def keep(files, facts, n):
        saved.append((clingo_run.answer(files, facts)[1], n))
        return here(files, facts, n)

    clingo_run.run_inline(True)
    clingo_run._parsed_answer_here = keep
    try:
        synthesize(f"Matmul({size}x{size}x{size}, f32)", db=None)
    finally:
        clingo_run._parsed_answer_here = here
        clingo_run.run_inline(False)
    return saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--size", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--plot", help="write a bar chart of the seconds per reader")
    args = ap.parse_args(argv)
    answers = capture(args.size)
    # As in a clingo worker: forked during a search, it collects its youngest generation
    # every dp._YOUNG new objects, not 700 (readers that make more objects pay more).
    gc.set_threshold(dp._YOUNG, *gc.get_threshold()[1:])
    mb = sum(len(t) for t, _ in answers) / 1e6
    for text, n in answers:
        if not answer.parse(text, n) == two_pass(text, n) == regex_parse(text, n):
            raise SystemExit("the readers disagree on an answer")
    readers = {
        "string methods, one pass (solver/logic/answer.py)": answer.parse,
        "string methods, two passes (before)": two_pass,
        "regular expressions (before that)": regex_parse,
    }
    times: dict[str, list[float]] = {k: [] for k in readers}
    for _ in range(args.rounds):
        for name, read in readers.items():
            t0 = time.perf_counter()
            for text, n in answers:
                read(text, n)
            times[name].append(time.perf_counter() - t0)
    base = times["regular expressions (before that)"]
    print(f"Matmul {args.size}^3 f32, cold search: {len(answers)} answers, {mb:.1f} MB; {args.rounds} rounds")
    print("| reader | s per round (median) | vs regular expressions (paired median) |")
    print("|---|---|---|")
    for name, ts in times.items():
        paired = statistics.median(b / t for b, t in zip(base, ts))
        print(f"| {name} | {statistics.median(ts):.2f} | {paired:.2f}x |")
    if args.plot:
        plot_median_bars(args.plot, times, "seconds to read the answers (median)")


if __name__ == "__main__":
    main()
