"""The instructions clingo executes for the same calls under this checkout and an earlier
revision, counted by valgrind: a measure of the workers' grounding that this shared
VM's drifting speed does not move (wall and CPU times of the same replay differ by a
third from one minute to the next; a change worth a few percent is lost in them).

    python benchmarks/instructions.py --base REV [--size 64] [--target native] [--calls 3]

The calls are those a cold search of Matmul SIZE^3 makes in this checkout: the
largest and others spread over the rest by size. Each revision answers them in a
process run under `valgrind --tool=callgrind`, counting only inside clingo_main (the
parse of the files and facts, grounding, solving and printing). The answers must be
the same atoms. Needs valgrind (Debian: apt-get install valgrind).
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

from grounding import batches
from revisions import base_python

from morello_asp.errors import InputError

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
    every, _ = batches(args.size, 10**9, args.target)  # largest first
    step = max(1, len(every) // args.calls)
    picked = every[::step][: args.calls]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        calls = work / "calls.pkl"
        calls.write_bytes(pickle.dumps(picked))
        (work / "base").mkdir()
        py = base_python(args.base, work / "base")
        base, base_answers = count(py, calls, args.target, work, "base")
        new, new_answers = count(sys.executable, calls, args.target, work, "new")
    classes = sum(n for n, _ in picked)
    print(
        f"Matmul {args.size}^3, target {args.target}: {len(picked)} of its {len(every)} clingo calls, "
        f"{classes:,} classes"
    )
    print(f"  {args.base}: {base:,} instructions ({base / classes:,.0f} a class)")
    print(f"  now: {new:,} instructions ({new / classes:,.0f} a class), {new / base:.3f} of {args.base}'s")
    if base_answers != new_answers:
        print("DIFFERENT answers for the same facts")
        return 1
    print("  the same answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
