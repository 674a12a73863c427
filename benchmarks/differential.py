"""Every spec class's answer under this checkout against an earlier revision: a speed
change to the rule files, the facts or the decoding must not change what any class
expands to.

    python benchmarks/differential.py --base REV [--target native] [--specs "Matmul(64x64x64, f32)" ...]

Each revision searches the specs cold (decisions in memory) in its own process and
writes, for every spec class it grounded, its expansions: action, children, child keys,
kernel cost and allocation, as text. The two sets must be equal class by class, and so
must the programs' costs. The base revision is installed as `revisions.py` does. Exit 0
when they agree; 1, with the first differences printed, when they do not.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from revisions import _git, base_python

from morello_asp import parse_spec

DEFAULT_SPECS = (
    "Matmul(64x64x64, f32)",
    "Conv(1x16x32x14x14x3x3, f32)",
    "Softmax1(16x64, f32)",
)

DUMP = """
import json, sys
from morello_asp import parse_spec
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import Engine
from morello_asp.solver.memo.table import DictMemo
target, out, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
engine = Engine(target)
search = Search(engine, DictMemo())
costs = {s: search.build(parse_spec(s, target)).cost.main for s in specs}
classes = {
    repr(c): sorted(
        json.dumps([str(e.action), [repr(k) for k in e.children], list(e.keys), e.kernel_cost, e.alloc])
        for e in exps
    )
    for c, exps in engine._class_cache.items()
}
from morello_asp.solver.logic import clingo_run
clingo_run.shutdown()
json.dump({"costs": costs, "classes": classes}, open(out, "w"))
"""


def dump(py: Path | str, target: str, specs: list[str], out: Path) -> tuple[dict, float]:
    t0 = time.perf_counter()
    # in another directory: a python started here would import this checkout's package
    r = subprocess.run([str(py), "-c", DUMP, target, str(out), *specs], capture_output=True, text=True, cwd=out.parent)
    if r.returncode != 0:
        raise SystemExit(f"{py}: search failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(out.read_text()), time.perf_counter() - t0


def differences(base: dict, new: dict, show: int = 5) -> list[str]:
    out = [
        f"cost of {s}: {base['costs'][s]} then, {new['costs'].get(s)} now"
        for s in base["costs"]
        if base["costs"][s] != new["costs"].get(s)
    ]
    b, n = base["classes"], new["classes"]
    out += [f"class only then: {c}" for c in sorted(b.keys() - n.keys())[:show]]
    out += [f"class only now: {c}" for c in sorted(n.keys() - b.keys())[:show]]
    changed = [c for c in sorted(b.keys() & n.keys()) if b[c] != n[c]]
    for c in changed[:show]:
        gone, came = sorted(set(b[c]) - set(n[c])), sorted(set(n[c]) - set(b[c]))
        out.append(
            f"class {c}: {len(gone)} expansions only then (e.g. {gone[:1]}), {len(came)} only now (e.g. {came[:1]})"
        )
    if len(changed) > show:
        out.append(f"... and {len(changed) - show} more classes answer differently")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True, help="the git revision to compare with, e.g. HEAD~3")
    ap.add_argument("--target", default="native")
    ap.add_argument("--specs", nargs="+", default=list(DEFAULT_SPECS))
    args = ap.parse_args(argv)
    for s in args.specs:  # a bad spec is refused here, in one line, before any search
        parse_spec(s, args.target)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "base").mkdir()
        py = base_python(_git("rev-parse", "--short", args.base), work / "base")
        base, tb = dump(py, args.target, args.specs, work / "base.json")
        new, tn = dump(sys.executable, args.target, args.specs, work / "new.json")
    diffs = differences(base, new)
    nexp = sum(len(v) for v in new["classes"].values())
    print(
        f"{len(new['classes']):,} classes ({nexp:,} expansions) now, {len(base['classes']):,} at {args.base}; "
        f"searched in {tn:.1f} s now, {tb:.1f} s then"
    )
    for s, c in new["costs"].items():
        print(f"  {s}: cost {c:,}")
    if diffs:
        print("DIFFERENT:")
        print("\n".join("  " + (d if len(d) <= 300 else d[:297] + "...") for d in diffs))
        return 1
    print("identical: every class expands the same, every cost agrees")
    return 0


if __name__ == "__main__":
    from morello_asp.cli import run_script

    raise SystemExit(run_script(main, "differential.py"))
