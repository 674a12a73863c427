"""The programs a spec gets when the rewrite below its root takes each of its K cheapest
alternatives (the rest optimal), saved as JSON for `benchmarks/programs.py`: how far the
model's ranking is from the CPU's where costs are close.

    python benchmarks/root_alternatives.py "Matmul(512x512x512, f32)" --count 6 --out /tmp/alt
    python benchmarks/programs.py /tmp/alt/*.json --rounds 9

For a Matmul the root is `to_accum` (Zero, then MatmulAccum); its MatmulAccum's rewrites
are the ones varied, as they hold the loop structure and the register block.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from morello_asp.errors import MorelloError
from morello_asp.rewrites import node_from_expansion
from morello_asp.serialize import save
from morello_asp.spec import parse_spec
from morello_asp.synthesis import make_search


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("spec")
    ap.add_argument("--count", type=int, default=6, help="alternatives to build (the cheapest first)")
    ap.add_argument("--out", required=True, help="folder for the JSON programs")
    ap.add_argument("--target", default=None, help="target name or entry file (default: native)")
    ap.add_argument("--db", default=None, help="memo table (default: the user's default table)")
    args = ap.parse_args(argv)
    try:
        search = make_search(args.target, db=args.db) if args.db else make_search(args.target)
        spec = parse_spec(args.spec, search.engine.target)
    except MorelloError as e:
        print(f"root_alternatives.py: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    root = [e for e, d in search.explain(spec) if d is not None][0]
    # the child to vary: the accumulating spec under to_accum, else the root itself
    vary = root.children[-1] if root.action.name == "to_accum" else spec
    options = [e for e, d in search.explain(vary) if d is not None][: args.count]
    for i, e in enumerate(options):
        node = node_from_expansion(vary, e, [search.build(c) for c in e.children])
        if vary is not spec:
            node = node_from_expansion(spec, root, [search.build(c) for c in root.children[:-1]] + [node])
        path = out / f"alt{i}.json"
        save(node, path)
        print(f"{path}: {e.action.name}{e.action.args!r:.60}  cost {node.cost.main:,}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
