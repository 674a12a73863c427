"""A warm `morello-asp query` (the program answered from a memo table, no search):
wall time of the whole command, this checkout against an earlier revision, interleaved.

    python benchmarks/query.py --db TABLE --spec "Matmul(64x64x64, f32)" --base REV [--rounds 5]

Both revisions must have the same logic files (the table's hash), and must print the
same program. Each reads its own copy of the table, so a revision that adds to a table's
format (the box index, which an older one refuses) does so on its copy only.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from revisions import base_python  # noqa: E402

ONE = "import sys; from morello_asp.cli import main; sys.exit(main(sys.argv[1:]))"


# As a user's Python does, both sides keep their compiled bytecode (the base revision's
# install has it; without this, a PYTHONDONTWRITEBYTECODE=1 environment would compile this
# checkout's modules on every run).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(py, spec: str, db: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(
        [str(py), "-c", ONE, "query", spec, "--db", db],
        capture_output=True,
        text=True,
        cwd=tempfile.gettempdir(),
        env=ENV,
    )
    took = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"query.py: {py}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else r.returncode}")
    return took, r.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--spec", default="Matmul(64x64x64, f32)")
    ap.add_argument("--base", required=True, help="the revision to compare with")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    if not Path(args.db).is_file():
        raise SystemExit(f"query.py: no memo table at {args.db}")
    with tempfile.TemporaryDirectory() as tmp:
        base = base_python(args.base, Path(tmp))
        here = sys.executable
        db_base, db_here = Path(tmp) / "base.db", Path(tmp) / "here.db"
        shutil.copyfile(args.db, db_base)
        shutil.copyfile(args.db, db_here)
        timed(here, args.spec, str(db_here))  # warm the OS's file cache and the cache directory
        timed(base, args.spec, str(db_base))
        a: list[float] = []
        b: list[float] = []
        for _ in range(args.rounds):
            ta, out_a = timed(base, args.spec, str(db_base))
            tb, out_b = timed(here, args.spec, str(db_here))
            if out_a != out_b:
                raise SystemExit("query.py: the two revisions print different programs")
            a.append(ta)
            b.append(tb)
    import sqlite3

    with sqlite3.connect(args.db) as c:  # both revisions read it as a memo table above
        rows = c.execute("SELECT count(*) FROM decisions").fetchone()[0]
    print(f"query {args.spec} on {args.db} ({rows:,} rows), {args.rounds} interleaved rounds")
    print(f"| base {args.base} s (median) | this checkout s (median) | speed-up (paired median) |")
    print("|---|---|---|")
    r = statistics.median(x / y for x, y in zip(a, b))
    print(f"| {statistics.median(a):.2f} | {statistics.median(b):.2f} | {r:.2f}x |")
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "query.py"))
