"""The instructions clingo executes for the same calls under this checkout and an earlier
revision, counted by valgrind: a measure of the workers' grounding that this shared
VM's drifting speed does not move (wall and CPU times of the same replay differ by a
third from one minute to the next; a change worth a few percent is lost in them).

    python benchmarks/instructions.py --base REV [--size 64] [--target native] [--calls 3]

The calls are those a cold search of Matmul SIZE^3 makes, each revision's with its
own facts (a change may write them differently): the largest and others spread over
the rest by size. Each revision answers them in a process run under `valgrind
--tool=callgrind`, counting only inside clingo_main (the parse of the files and facts,
grounding, solving and printing). The answers must be the same atoms. Needs valgrind
(Debian: apt-get install valgrind).
"""

from __future__ import annotations

import argparse
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from revisions import base_python

from morello_asp.errors import InputError

CAPTURE = """
import pickle, sys
from morello_asp import parse_spec
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine
n, target, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
seen, submit = [], clingo_run.submit
def record(files, facts, size, *a, **kw):
    seen.append((size, facts))
    return submit(files, facts, size, *a, **kw)
clingo_run.submit = record
Search(Engine(target), DictMemo()).build(parse_spec(f"Matmul({n}x{n}x{n}, f32)", target))
clingo_run.shutdown()
pickle.dump(seen, open(out, "wb"))
"""
ANSWER = """
import pickle, sys
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.search.engine import Engine
calls, target, out = pickle.load(open(sys.argv[1], "rb")), sys.argv[2], sys.argv[3]
files = Engine(target)._files
answers = []
for size, facts in calls:
    rc, text, errs = clingo_run.answer(files, facts)
    assert rc in (10, 30), errs
    answers.append(sorted(text.split()))
pickle.dump(answers, open(out, "wb"))
"""
_COLLECTED = re.compile(r"^==(\d+)== Collected : (\d+)", re.M)


def count(py: Path | str, calls: Path, target: str, work: Path, name: str) -> tuple[int, list]:
    """(instructions inside clingo_main in the process that answered, its answers)."""
    out = work / f"{name}.answers"
    r = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--toggle-collect=clingo_main",
            f"--callgrind-out-file={work}/{name}.%p",
            str(py),
            "-c",
            ANSWER,
            str(calls),
            target,
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=work,  # not this checkout: its package would be imported in place of REV's
    )
    if r.returncode != 0:
        raise SystemExit(f"{py}: answering failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    # The engine checks the logic files in a forked worker, which valgrind follows; the
    # process that answered the calls is the one that counted most.
    return max(int(n) for _, n in _COLLECTED.findall(r.stderr)), pickle.loads(out.read_bytes())


def capture(py: Path | str, n: int, target: str, out: Path) -> list[tuple[int, str]]:
    """(classes, facts) of every clingo call of a cold Matmul n^3 search by `py`'s revision."""
    r = subprocess.run(
        [str(py), "-c", CAPTURE, str(n), target, str(out)], capture_output=True, text=True, cwd=out.parent
    )
    if r.returncode != 0:
        raise SystemExit(f"{py}: the search failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return pickle.loads(out.read_bytes())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the git revision to compare with, e.g. HEAD~1")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--target", default="native")
    ap.add_argument("--calls", type=int, default=3, help="how many of the search's calls to count (default 3)")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        raise InputError("valgrind is not installed (Debian: apt-get install valgrind)")
    if args.calls < 1:
        raise InputError(f"--calls {args.calls}: give how many calls to count (1 or more)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "base").mkdir()
        py = base_python(args.base, work / "base")
        # Each revision's own facts for the search's calls (a revision may write them
        # differently), the same calls picked from both: largest first, then spread.
        picked = {}
        for name, python in (("base", py), ("new", sys.executable)):
            every = capture(python, args.size, args.target, work / f"{name}.calls")
            order = sorted(range(len(every)), key=lambda i: -every[i][0])
            step = max(1, len(order) // args.calls)
            picked[name] = [every[i] for i in order[::step][: args.calls]]
            (work / f"{name}.pkl").write_bytes(pickle.dumps(picked[name]))
        if [s for s, _ in picked["base"]] != [s for s, _ in picked["new"]]:
            raise SystemExit("the two revisions' searches made other calls: compare them with differential.py")
        base, base_answers = count(py, work / "base.pkl", args.target, work, "base")
        new, new_answers = count(sys.executable, work / "new.pkl", args.target, work, "new")
    picked_new = picked["new"]
    classes = sum(n for n, _ in picked_new)
    print(
        f"Matmul {args.size}^3, target {args.target}: {len(picked_new)} of its {len(every)} clingo calls, "
        f"{classes:,} classes"
    )
    print(f"  {args.base}: {base:,} instructions ({base / classes:,.0f} a class)")
    print(f"  now: {new:,} instructions ({new / classes:,.0f} a class), {new / base:.3f} of {args.base}'s")
    if base_answers != new_answers:
        print("DIFFERENT answers to the same calls")
        return 1
    print("  the same answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
