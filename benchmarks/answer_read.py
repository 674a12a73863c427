"""Reading clingo's answers: `solver/answer.py` (string methods) against the reader it
replaced (one regular-expression scan per predicate, kept here as the baseline; both
group what they found with `answer.group`), on the answers of a real cold search, in
interleaved rounds in one process.

    python benchmarks/answer_read.py [--size 16] [--rounds 5] [--plot read.png]

The answers are captured by running the search with clingo in this process
(`clingo_run.run_inline`); both readers must give the same result on every answer.
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

from morello_asp.solver import answer, clingo_run

# ------------------------------------------------- the regular-expression reader
_NEST = r"[^()]*"
for _ in range(2):
    _NEST = r"(?:[^()]|\(" + _NEST + r"\))*"
_ATOM = r"(\w+(?:\(" + _NEST + r"\))?)"
# keyed as solver/answer.py's scan() keys its rows
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
    "alloc": re.compile(r"\balloc\((\d+)," + _ATOM + r",(\w+),(\d+)\)"),
    "kernel_cost": re.compile(r"\bkernel_cost\((\d+),(\w+),(-?\d+)\)"),
}


def regex_parse(text: str, n: int) -> list:
    """One scan of the whole text per predicate, then the same grouping as answer.parse."""
    return answer.group({name: r.findall(text) for name, r in RE.items()}, n)


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
    mb = sum(len(t) for t, _ in answers) / 1e6
    for text, n in answers:
        if answer.parse(text, n) != regex_parse(text, n):
            raise SystemExit("the two readers disagree on an answer")
    readers = {"string methods (solver/answer.py)": answer.parse, "regular expressions (before)": regex_parse}
    times: dict[str, list[float]] = {k: [] for k in readers}
    for _ in range(args.rounds):
        for name, read in readers.items():
            t0 = time.perf_counter()
            for text, n in answers:
                read(text, n)
            times[name].append(time.perf_counter() - t0)
    base = times["regular expressions (before)"]
    print(f"Matmul {args.size}^3 f32, cold search: {len(answers)} answers, {mb:.1f} MB; {args.rounds} rounds")
    print("| reader | s per round (median) | vs regular expressions (paired median) |")
    print("|---|---|---|")
    for name, ts in times.items():
        paired = statistics.median(b / t for b, t in zip(base, ts))
        print(f"| {name} | {statistics.median(ts):.2f} | {paired:.2f}x |")
    if args.plot:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3))
        ax.barh(list(times), [statistics.median(ts) for ts in times.values()])
        ax.set_xlabel("seconds to read the answers (median)")
        fig.tight_layout()
        fig.savefig(args.plot)


if __name__ == "__main__":
    main()
