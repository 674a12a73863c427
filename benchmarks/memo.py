"""Memo table size and reuse: for Matmul f32 n^3, specs covered, rectangles, values per
rectangle, file size, and synthesis time with a cold vs warm table (each in a fresh
process, so the warm run really reads the file).

    python benchmarks/memo.py [n ...] [--then MxKxN ...]   # default 2 4 8

`--then` synthesizes further shapes into the largest size's table afterwards (e.g.
128x128x64 after 128^3) and reports how many rows they added and how long they took.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from morello_asp.cli.db import stats

SCRIPT = (
    "import sys; from morello_asp.synthesis import synthesize; print(synthesize(sys.argv[1], db=sys.argv[2]).cost.main)"
)


def timed(spec: str, db: Path) -> tuple[float, str]:
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, spec, str(db)], capture_output=True, text=True, check=True
    ).stdout
    return time.perf_counter() - t, out.strip()


def rows(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(str(db)) as c:
        return c.execute("SELECT count(*) FROM decisions").fetchone()[0]


def main(sizes, then=()) -> None:
    print(
        f"{'spec':24} {'specs':>10} {'rects':>7} {'vals/rect':>10} {'bytes':>10} {'cold s':>8} "
        f"{'warm s':>8} {'ratio':>7}"
    )
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            spec = f"Matmul({n}x{n}x{n}, f32)"
            db = Path(d) / f"m{n}.db"
            cold, c1 = timed(spec, db)
            warm, c2 = timed(spec, db)
            assert c1 == c2, (c1, c2)
            s = stats(str(db))
            print(
                f"{spec:24} {s['specs_covered']:>10} {s['rectangles']:>7} {s['values_per_rectangle']:>10.1f} "
                f"{s['bytes']:>10} {cold:>8.2f} {warm:>8.2f} {cold / warm:>7.1f}",
                flush=True,
            )
        for shape in then:
            spec = f"Matmul({shape}, f32)"
            before = rows(db)
            t, _ = timed(spec, db)
            print(
                f"then {spec} on the {sizes[-1]}^3 table: {t:.2f} s, {rows(db) - before} rows added to {before}",
                flush=True,
            )


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("sizes", type=int, nargs="*", default=[2, 4, 8])
    ap.add_argument("--then", nargs="*", default=[])
    a = ap.parse_args()
    main(a.sizes, a.then)
