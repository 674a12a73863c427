"""The clingo calls of a cold search replayed under this checkout and an earlier
revision: what the workers spend on them, without the main process and without two
processes sharing the machine.

    python benchmarks/replay.py --base REV [--size 64] [--target native] [--rounds 3]
    python benchmarks/replay.py --base REV --instructions [--calls 3]

Each revision searches Matmul SIZE^3 cold once and records its calls, with its own facts
(a change may write them differently). Then each revision's process answers all of its
calls one after another, the two alternating for --rounds rounds; printed: CPU seconds
per round and the paired median ratio. This VM's speed drifts by a third within
minutes, and only consecutive runs compare.

--instructions: instead, count the instructions inside clingo_main (parsing, grounding,
solving, printing) under `valgrind --tool=callgrind` for --calls of the calls (the
largest, then spread by size). The count does not drift, but it did not predict time:
a change that removed 11% of the instructions took the same CPU time
(docs/search_speed.md, "Fewer instructions, not less time"). Needs valgrind (Debian:
apt-get install valgrind).

The answers must be the same atoms in both revisions, call by call.
"""

from __future__ import annotations

import argparse
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from revisions import _git, base_python

from morello_asp.errors import InputError

# grounding.batches, this checkout's, run by the revision's python on its own package
CAPTURE = """
import pickle, sys
sys.path.insert(0, sys.argv[4])
from grounding import batches
from morello_asp.solver.logic import clingo_run
calls, _ = batches(int(sys.argv[1]), 10**9, sys.argv[2])
clingo_run.shutdown()
pickle.dump(calls, open(sys.argv[3], "wb"))
"""
ANSWER = """
import hashlib, pickle, resource, sys
from morello_asp.solver.logic import clingo_run
from morello_asp.solver.search.engine import Engine
calls, target, out = pickle.load(open(sys.argv[1], "rb")), sys.argv[2], sys.argv[3]
files = Engine(target)._files
clingo_run.answer(files, calls[-1][1])  # the files read and the libraries warm
t0 = resource.getrusage(resource.RUSAGE_SELF)
answers = []
for size, facts in calls:
    rc, text, errs = clingo_run.answer(files, facts)
    assert rc in (10, 30), errs
    answers.append(hashlib.sha256("\\n".join(sorted(text.split())).encode()).hexdigest())
t1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = t1.ru_utime + t1.ru_stime - t0.ru_utime - t0.ru_stime
pickle.dump((cpu, answers), open(out, "wb"))
"""
_COLLECTED = re.compile(r"^==(\d+)== Collected : (\d+)", re.M)


def answer(py: Path | str, calls: Path, target: str, work: Path, name: str, valgrind: bool) -> tuple[float, list]:
    """(CPU seconds of the calls, or instructions inside clingo_main under valgrind, and
    a digest of each call's answer) in a process of `py`'s revision."""
    out = work / f"{name}.answers"
    cmd = [str(py), "-c", ANSWER, str(calls), target, str(out)]
    if valgrind:
        cmd[:0] = [
            "valgrind",
            "--tool=callgrind",
            "--toggle-collect=clingo_main",
            f"--callgrind-out-file={work}/{name}.%p",
        ]
    # not in this checkout: its package would be imported in place of REV's
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    if r.returncode != 0:
        raise SystemExit(f"{py}: answering failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    cpu, answers = pickle.loads(out.read_bytes())
    if valgrind:
        # The engine checks the logic files in a forked worker, which valgrind follows;
        # the process that answered the calls is the one that counted most.
        return max(int(n) for _, n in _COLLECTED.findall(r.stderr)), answers
    return cpu, answers


def capture(py: Path | str, n: int, target: str, out: Path) -> list[tuple[int, str]]:
    """(classes, facts) of every clingo call of a cold Matmul n^3 search by `py`'s
    revision, the largest first."""
    here = str(Path(__file__).resolve().parent)
    r = subprocess.run(
        [str(py), "-c", CAPTURE, str(n), target, str(out), here], capture_output=True, text=True, cwd=out.parent
    )
    if r.returncode != 0:
        raise SystemExit(f"{py}: the search failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return pickle.loads(out.read_bytes())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the git revision to compare with, e.g. HEAD~1")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--target", default="native")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of all the calls (default 3)")
    ap.add_argument("--instructions", action="store_true", help="count instructions under valgrind instead")
    ap.add_argument("--calls", type=int, default=3, help="with --instructions: how many calls (default 3)")
    args = ap.parse_args(argv)
    if args.instructions and shutil.which("valgrind") is None:
        raise InputError("valgrind is not installed (Debian: apt-get install valgrind)")
    if args.calls < 1 or args.rounds < 1:
        raise InputError("--calls and --rounds: give 1 or more")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "base").mkdir()
        py = base_python(_git("rev-parse", "--short", args.base), work / "base")
        pythons = {"base": py, "new": sys.executable}
        picked = {}
        for name, python in pythons.items():
            every = capture(python, args.size, args.target, work / f"{name}.calls")
            if args.instructions:  # the largest call, then others spread by size
                every = every[:: max(1, len(every) // args.calls)][: args.calls]
            picked[name] = every
            (work / f"{name}.pkl").write_bytes(pickle.dumps(every))
        if [s for s, _ in picked["base"]] != [s for s, _ in picked["new"]]:
            raise SystemExit("the two revisions' searches made other calls: compare them with differential.py")
        classes = sum(n for n, _ in picked["new"])
        print(f"Matmul {args.size}^3, target {args.target}: {len(picked['new'])} clingo calls, {classes:,} classes")
        got: dict[str, list[float]] = {"base": [], "new": []}
        digests = {}
        for r in range(1 if args.instructions else args.rounds):
            for name, python in pythons.items():
                v, digests[name] = answer(python, work / f"{name}.pkl", args.target, work, name, args.instructions)
                got[name].append(v)
            if not args.instructions:
                print(f"  round {r + 1}: {args.base} {got['base'][-1]:.2f} CPU s, now {got['new'][-1]:.2f} CPU s")
    if args.instructions:
        base, new = got["base"][0], got["new"][0]
        print(f"  {args.base}: {base:,.0f} instructions ({base / classes:,.0f} a class)")
        print(f"  now: {new:,.0f} instructions ({new / classes:,.0f} a class), {new / base:.3f} of {args.base}'s")
    else:
        ratio = statistics.median(b / n for b, n in zip(got["base"], got["new"]))
        print(f"  paired median: now {ratio:.3f}x as fast as {args.base}")
    if digests["base"] != digests["new"]:
        print("DIFFERENT answers to the same calls")
        return 1
    print("  the same answers")
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "replay.py"))
