"""Cold-search speed of this checkout against an earlier revision, interleaved: each
round synthesizes every size from an empty memo once with each revision, in separate
processes one after the other, so a change in the machine's load falls on both.

    python benchmarks/revisions.py --base REV [--sizes 8 16] [--rounds 3] [--plot out.png]
    python benchmarks/revisions.py --base REV --cli [--target avx2] [--sizes 64 1024]

--cli times each revision's own command line (`morello-asp synth "Matmul(NxNxN, f32)"
--target T --db NEW`, the process start to exit, the cost read from its listing), which
every revision has, however its modules were laid out since (the default mode imports
this checkout's module paths in both). `benchmarks/synthesis.py --compare REV` runs it.

The base revision is exported (`git archive`) and installed without its dependencies
into a throwaway virtual environment that borrows this one's (clingo, z3, numpy, ...).
Both synthesize with the same number of clingo workers and print the program's cost,
which must agree: a revision that changes the result is not a speed-up (--other-rules: the
base searched other rules, as before issue 18's changes; each revision's cost is printed and
the ratio is what a user waits, not the same search made faster). Each search
starts from a new, empty SQLite table, as a user's first `synth` does (--memo dict: in
memory, nothing written). A second table gives each whole process, start to exit (what
a user of `synth` waits for: the search, the imports and the interpreter's shutdown), a
third where the CPU time went: the main process, the part of it in Python's cyclic
garbage collector, and the clingo workers.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from morello_asp.errors import InputError

ROOT = Path(__file__).resolve().parent.parent

ONE = """
import gc, json, resource, sys, time
from pathlib import Path
gc_s = [0.0, 0.0]  # seconds in Python's cyclic collector: all collections, full ones
_t0 = [0.0]
def _gc(phase, info):
    if phase == "start":
        _t0[0] = time.perf_counter()
    else:
        dt = time.perf_counter() - _t0[0]
        gc_s[0] += dt
        gc_s[1] += dt if info["generation"] == 2 else 0.0
gc.callbacks.append(_gc)
from morello_asp import parse_spec
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine
from morello_asp.solver.memo.table import DictMemo
n, memo, target = int(sys.argv[1]), sys.argv[2], sys.argv[3]
engine = Engine(target)
if memo == "dict":
    table = DictMemo()
else:
    from morello_asp.solver.memo.sqlite import open_memo
    table = open_memo(Path(memo), engine)
search = Search(engine, table)
t0 = time.perf_counter()
imp = search.build(parse_spec(f"Matmul({n}x{n}x{n}, f32)", target))
table.flush()
wall = time.perf_counter() - t0
where = __import__("morello_asp").__file__
from morello_asp.solver.logic import clingo_run
clingo_run.shutdown()  # the workers, reaped, so that their CPU time is counted
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"where": where, "wall": wall, "cost": imp.cost.main, "solved": search.stats.solved,
                  "main_cpu": me.ru_utime + me.ru_stime, "workers_cpu": kids.ru_utime + kids.ru_stime,
                  "gc": gc_s[0], "full_gc": gc_s[1]}))
"""


def base_python(rev: str, work: Path, editable: bool = False) -> Path:
    """A python that imports morello_asp as it was at `rev` (`editable`: installed in place,
    so that a subpackage its pyproject did not list yet is found, as in its own checkout)."""
    src = work / "src"
    src.mkdir()
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=tar, check=True)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", *(["-e"] if editable else []), str(src)],
        check=True,
    )
    # then this environment's packages, after the base revision's own install (whose
    # package the path finder meets before this checkout's editable one)
    Path(site, "borrowed.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    return py


def run(py: Path | str, n: int, memo: str = "table", target: str = "avx2") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        where = memo if memo == "dict" else str(Path(tmp) / "memo.db")
        t0 = time.perf_counter()
        r = subprocess.run([str(py), "-c", ONE, str(n), where, target], capture_output=True, text=True, cwd=tmp)
        process = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"{py}: Matmul {n}^3 failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1]) | {"process": process}


CLI = "import sys; from morello_asp.cli import main; sys.exit(main(sys.argv[1:]))"
_COST = re.compile(r"^cost ([\d,]+), peak", re.M)


def run_cli(py: Path | str, n: int, target: str) -> dict:
    """One cold `synth` of Matmul n^3 by revision `py`'s own command line, from a new table."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [
            str(py),
            "-c",
            CLI,
            "synth",
            f"Matmul({n}x{n}x{n}, f32)",
            "--target",
            target,
            "--db",
            f"{tmp}/memo.db",
        ]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
        out, err = proc.communicate()
        wall = time.perf_counter() - t0
    m = _COST.search(out)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"{py}: synth Matmul {n}^3 failed (exit {proc.returncode}): {err.strip().splitlines()[-1:]}")
    return {"where": str(py), "wall": wall, "process": wall, "cost": int(m.group(1).replace(",", ""))}


def _git(*args: str) -> str:
    r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
    if r.returncode != 0:
        why = (r.stderr.strip().splitlines() or ["exit status " + str(r.returncode)])[-1]
        raise InputError(f"git {' '.join(args)}: {why}")
    return r.stdout.strip()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--base", required=True, help="the git revision to compare with, e.g. HEAD~3")
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--memo", choices=("table", "dict"), default="table", help="where decisions go (default: a new SQLite table)"
    )
    ap.add_argument(
        "--other-rules",
        action="store_true",
        help="the base's rules differ (it may find another program): print both costs instead of stopping",
    )
    ap.add_argument("--plot", help="write a chart of the median wall time per size")
    ap.add_argument("--cli", action="store_true", help="time each revision's own `synth` command (any revision)")
    ap.add_argument("--target", default="avx2", help="the target name or file both revisions search for (default avx2)")
    args = ap.parse_args(argv)
    rev = _git("rev-parse", "--short", args.base)
    head = _git("rev-parse", "--short", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    this = f"this checkout ({head}{', + uncommitted changes' if dirty else ''})"
    with tempfile.TemporaryDirectory() as tmp:
        base = base_python(args.base, Path(tmp), editable=args.cli)
        pythons = {f"base {rev}": base, this: Path(sys.executable)}
        got: dict[tuple[str, int], list[dict]] = {}
        for r in range(args.rounds):
            for n in args.sizes:
                for name, py in pythons.items():
                    got.setdefault((name, n), []).append(
                        run_cli(py, n, args.target) if args.cli else run(py, n, args.memo, args.target)
                    )
                    last = got[name, n][-1]
                    print(f"round {r + 1}, {n}^3, {name}: {last['wall']:.1f} s ({last['where']})", file=sys.stderr)
    names = list(pythons)
    how = f"`synth --target {args.target}`, a new table" if args.cli else args.memo
    print(f"cold Matmul n^3 f32 from an empty memo ({how}), {args.rounds} interleaved rounds")
    costs = "costs (base / this)" if args.other_rules else "cost"
    print("| n | " + " | ".join(f"{k}: wall s (median)" for k in names) + f" | speed-up (paired median) | {costs} |")
    print("|---|" + "---|" * (len(names) + 2))
    medians: dict[str, list[float]] = {k: [] for k in names}
    for n in args.sizes:
        a, b = got[names[0], n], got[names[1], n]
        if {x["cost"] for x in a} != {a[0]["cost"]} or {x["cost"] for x in b} != {b[0]["cost"]}:
            raise SystemExit(f"{n}^3: a revision found different costs in different rounds")
        if a[0]["cost"] != b[0]["cost"] and not args.other_rules:
            raise SystemExit(f"{n}^3: the revisions find different costs: {a[0]['cost']} and {b[0]['cost']}")
        cost = f"{a[0]['cost']:,} / {b[0]['cost']:,}" if args.other_rules else f"{a[0]['cost']:,}"
        for k in names:
            medians[k].append(statistics.median(x["wall"] for x in got[k, n]))
        paired = statistics.median(x["wall"] / y["wall"] for x, y in zip(a, b))
        cells = " | ".join(f"{medians[k][-1]:.1f}" for k in names)
        print(f"| {n} | {cells} | {paired:.2f}x | {cost} |")
    if args.cli:  # the wall time above is the whole process's already
        _plot(args, medians, names)
        return
    print()
    print("Whole process, start to exit, as a user of `synth` waits for it (medians; the search, then the")
    print("interpreter's imports and shutdown)")
    print("| n | " + " | ".join(f"{k}: s" for k in names) + " | speed-up (paired median) |")
    print("|---|" + "---|" * (len(names) + 1))
    for n in args.sizes:
        a, b = got[names[0], n], got[names[1], n]
        cells = " | ".join(f"{statistics.median(x['process'] for x in got[k, n]):.1f}" for k in names)
        print(f"| {n} | {cells} | {statistics.median(x['process'] / y['process'] for x, y in zip(a, b)):.2f}x |")
    print()
    print(
        "CPU seconds (medians): the main process, its part in Python's cyclic collector "
        "(in full collections), the clingo workers"
    )
    print("| n | " + " | ".join(f"{k}: main / GC (full) / workers" for k in names) + " |")
    print("|---|" + "---|" * len(names))
    for n in args.sizes:
        cells = []
        for k in names:
            m = {
                key: statistics.median(x[key] for x in got[k, n])
                for key in ("main_cpu", "gc", "full_gc", "workers_cpu")
            }
            cells.append(f"{m['main_cpu']:.1f} / {m['gc']:.1f} ({m['full_gc']:.1f}) / {m['workers_cpu']:.1f}")
        print(f"| {n} | " + " | ".join(cells) + " |")
    _plot(args, medians, names)


def _plot(args, medians: dict[str, list[float]], names: list[str]) -> None:
    if not args.plot:
        return
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for k in names:
        ax.plot(args.sizes, medians[k], marker="o", label=k)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (Matmul n^3 f32)")
    ax.set_ylabel("cold search wall s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot)


if __name__ == "__main__":
    main()
