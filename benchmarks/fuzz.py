"""A differential fuzzer over the spec space (issue 57).

Random specs of every declared kind (morello_asp.kinds.all_kinds: matmul and conv, the
softmax family, the data kinds, every accumulating variant) and small Compose pipelines,
with shapes that sweep the corners (1, small primes, the vector width and its multiples,
one more and one less), random layouts, levels, dtypes where kernels take them, memory
limits and targets. Each spec becomes a program, either the search's optimum or a random
walk down the rewrites the rules offer (every one must be legal) completed by the search;
each program is proved (`verify`), lowered to C, compiled, run and compared with the numpy
reference, and `verify` and codegen must agree on it; a spec the shared memo table finds
no implementation of is searched again from an empty table, which must agree. A failure
is shrunk by hypothesis to a minimal case, printed, and appended to
tests/fixtures/fuzz_regressions.txt, which tests/test_fuzz.py replays.

    python benchmarks/fuzz.py --minutes 30 [--targets native avx2] [--families conv compose]
                              [--seed N] [--max-volume V] [--no-save]

prints, per minute and at the end: specs tried, programs run, infeasible specs (no
implementation under their random memory limits), failures (minimal cases), and the
kinds and stages seen. Long runs' counts are recorded in docs/results/fuzz.md.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, reject, settings
from hypothesis import seed as hseed
from hypothesis import strategies as st

from morello_asp.errors import CodegenError, NoImplementationError
from morello_asp.ir import Impl, SpecHole
from morello_asp.kinds import all_kinds
from morello_asp.rewrites import node_from_expansion
from morello_asp.solver.memo.table import DictMemo
from morello_asp.solver.proofs.verify import verify
from morello_asp.solver.search.dp import Search
from morello_asp.solver.search.engine import drop_engines, get_engine
from morello_asp.spec import Spec, parse_spec
from morello_asp.target import get_target

REGRESSIONS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "fuzz_regressions.txt"


# ---------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One fuzzed program: a spec on a target and how it is implemented: the search's
    optimum (depth 0), or `depth` levels of random rewrites above it, chosen by `picks`
    (0: leave the spec to the search; i: its i-th rewrite, in a fixed order)."""

    target: str
    text: str
    depth: int = 0
    picks: tuple[int, ...] = ()

    def line(self) -> str:
        """The case as one line of tests/fixtures/fuzz_regressions.txt."""
        walk = f"{self.depth}:{','.join(map(str, self.picks))}" if self.depth else "-"
        return f"{self.target} | {walk} | {self.text}"

    @staticmethod
    def parse(line: str) -> Case:
        target, walk, text = (p.strip() for p in line.split("|", 2))
        if walk == "-":
            return Case(target, text)
        depth, _, picks = walk.partition(":")
        return Case(target, text, int(depth), tuple(int(p) for p in picks.split(",") if p))


def regression_cases(path: Path = REGRESSIONS) -> list[Case]:
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    return [Case.parse(ln) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def host_targets() -> list[str]:
    """The targets whose programs run on this machine: native (generated from the host),
    avx2, and avx512 on a CPU with AVX-512F."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        flags = ""
    return ["native", "avx2"] + (["avx512"] if re.search(r"\bavx512f\b", flags) else [])


def corner_sizes(vs: int) -> list[int]:
    """Sizes that sweep the corners, smallest first (hypothesis shrinks towards the
    front): 1, small primes, the vector width `vs` and twice it, one less and one more."""
    out: list[int] = []
    for x in (1, 2, 3, vs, 5, vs - 1, vs + 1, 7, 2 * vs, 2 * vs - 1, 2 * vs + 1, 13, 3 * vs):
        if x >= 1 and x not in out:
            out.append(x)
    return out


def _vector_values(target: str) -> int:
    """f32 values per widest vector register of the target."""
    return max(get_target(target).vector_types) // 4


FAMILIES = ("matmul", "conv", "softmax", "data", "compose")
COMPOSES = {
    # components, head first: operand shapes from (m, k, n, p)
    "(Softmax2, Matmul)": lambda m, k, n, p: [(1, m, k), (1, k, n)],
    "(Softmax1, Matmul)": lambda m, k, n, p: [(1, m, k), (1, k, n)],
    "(Matmul, Matmul)": lambda m, k, n, p: [(1, n, p), (1, m, k), (1, k, n)],
    "(Matmul, Softmax2)": lambda m, k, n, p: [(1, n, p), (1, m, n)],
    "(Matmul, Softmax2, Matmul)": lambda m, k, n, p: [(1, n, p), (1, m, k), (1, k, n)],
}
MATMUL_DTYPES = [
    ("f32", "f32", "f32"),
    ("i32", "i32", "i32"),
    ("bf16", "bf16", "f32"),
    ("f32", "bf16", "f32"),
    ("u8", "i8", "i16"),
    ("i8", "i8", "i32"),
]


def _family(name: str) -> str:
    if name.startswith("Matmul"):
        return "matmul"
    if "Conv" in name:  # Conv, ConvS2D2, DepthwiseConv, GroupConvS2, their Accum variants
        return "conv"
    if name.startswith(("Softmax", "Max")):
        return "softmax"
    return "data"


def _axis(name: str) -> int:
    """The dimension a kind named with a trailing digit (Softmax1, Max0) is about."""
    m = re.search(r"(\d+)$", name)
    return int(m.group(1)) if m else -1


@st.composite
def _dims(draw, caps: list[int], sizes: list[int], budget: int) -> tuple[int, ...]:
    """One size per dimension (each at most its cap), the product within `budget`."""
    out = []
    left = budget
    for cap in caps:
        fit = [s for s in sizes if s <= cap and s <= left]
        x = draw(st.sampled_from(fit or [1]))
        out.append(x)
        left = max(1, left // x)
    return tuple(out)


def _layouts(draw, kind: str, ranks: list[int], shapes: list[tuple[int, ...]], vs: int) -> list[str]:
    out = []
    for i, (r, shp) in enumerate(zip(ranks, shapes)):
        opts = ["row_major"] + (["col_major"] if r >= 2 else [])
        if "Conv" in kind and r == 4:
            opts.append("[2, 3, 1, 0]" if i == 1 else "[0, 2, 3, 1]")  # channels-last
        if kind.startswith("Matmul") and i == 1 and r == 3 and shp[2] % vs == 0:
            opts.append(f"[0, 2, 1, 2 p({vs})]")  # panels of the rhs
        out.append(draw(st.sampled_from(opts)))
    return out


@st.composite
def cases(
    draw,
    targets: tuple[str, ...] = ("avx2",),
    max_volume: int = 4096,
    max_depth: int = 2,
    families: tuple[str, ...] = FAMILIES,
) -> Case:
    """A random Case: a spec of a declared kind in one of `families` or a Compose, on
    one of `targets`, with at most `max_volume` points, implemented by the optimum or a
    walk up to `max_depth`."""
    target = draw(st.sampled_from(targets))
    vs = _vector_values(target)
    sizes = corner_sizes(vs)
    tgt = get_target(target)
    family = draw(st.sampled_from(families))
    if family == "compose":
        form = draw(st.sampled_from(sorted(COMPOSES)))
        m, k, n, p = draw(_dims([3 * vs] * 4, sizes, max_volume))
        shapes = COMPOSES[form](m, k, n, p)
        ops = ", ".join(f"({'x'.join(map(str, s))}, f32, GL, row_major)" for s in shapes)
        head = f"Compose({form}, [{ops}]"
    else:
        # a kind without its axis first (Softmax, not Softmax0..3), so each weighs alike
        names = sorted(n for n in all_kinds() if _family(n) == family)
        base = draw(st.sampled_from(sorted({re.sub(r"\d+$", "", n) for n in names})))
        name = draw(st.sampled_from([n for n in names if re.sub(r"\d+$", "", n) == base]))
        kind = all_kinds()[name]
        if kind.dims and "Conv" in name:
            # by dimension name: b, g, f, c, h, w, fh, fw (a depthwise conv has no f, a plain one no g)
            cap = {"b": 2, "g": 3, "f": 2 * vs + 1, "c": 2 * vs + 1, "h": 7, "w": 7, "fh": 3, "fw": 3}
            shape = draw(_dims([cap[d] for d in kind.dims], sizes, max_volume))
        elif kind.dims:
            caps = [3] + [3 * vs] * (len(kind.dims) - 1)
            shape = draw(_dims(caps, sizes, max_volume))
        else:
            rank = draw(st.integers(max(1, _axis(name) + 1), 4))
            shape = draw(_dims([3 * vs] * rank, sizes, max_volume))
        try:
            base = parse_spec(f"{name}({'x'.join(map(str, shape))}, f32)", target=target)
        except Exception:  # a shape the kind refuses: not a case
            reject()
        ranks = [len(s) for s in base.operand_shapes]
        lays = _layouts(draw, name, ranks, list(base.operand_shapes), vs)
        dts = ["f32"] * len(ranks)
        if family == "matmul":
            dts = list(draw(st.sampled_from(MATMUL_DTYPES)))
        elif name in ("Zero", "Move") and draw(st.booleans()):
            dts = [draw(st.sampled_from(["i32", "bf16", "u8"]))] * len(ranks)
            if name == "Move" and dts[0] == "bf16" and draw(st.booleans()):
                dts[1] = "f32"  # the casting move
        outs = set(base.outputs)
        lvls = [("L1" if i not in outs and draw(st.integers(0, 3)) == 0 else "GL") for i in range(len(ranks))]
        ops = ", ".join(f"({d}, {lv}, {ly})" for d, lv, ly in zip(dts, lvls, lays))
        head = f"{name}({'x'.join(map(str, shape))}, {ops}"
    serial = ", serial" if draw(st.integers(0, 3)) else ""
    limits = []
    for lv in tgt.levels:  # registers and caches: the full capacity, or a random share
        opts = {"register": (2, 4, 8), "cache": (16, 32, 64, 128, 256, 512)}.get(lv.kind, ())
        opts = tuple(c for c in opts if c < lv.capacity)
        limits.append(draw(st.sampled_from((lv.capacity, *opts[::-1]))) if opts else lv.capacity)
    text = f"({head}{serial}), [{', '.join(map(str, limits))}])"
    depth = draw(st.integers(0, max_depth)) if draw(st.booleans()) else 0
    return Case(target, text, depth)


# ---------------------------------------------------------------------------- programs
_SEARCHES: dict[str, Search] = {}


def search_for(target: str) -> Search:
    """One search per target, its memo table shared by every case (later cases reuse the
    sub-specs of earlier ones, as a memo table would)."""
    if target not in _SEARCHES:
        _SEARCHES[target] = Search(get_engine(target), DictMemo())
    return _SEARCHES[target]


def walk(search: Search, spec: Spec, pick: Callable[[int], int], depth: int) -> Impl:
    """A partial program: at each of `depth` levels a rewrite the rules offer whose every
    child has an implementation, chosen by pick(n) among n of them (0: none, the spec is
    left open for the search), in a fixed order."""
    if depth <= 0:
        return SpecHole(spec)
    exps = search.engine.expand(spec)
    search.prefetch(*(c for e in exps for c in e.children))
    ok = [e for e in exps if all(search.solve(c).feasible for c in e.children)]
    ok.sort(key=lambda e: (str(e.action), tuple(str(c) for c in e.children)))
    i = pick(len(ok)) if ok else 0
    if i == 0:
        return SpecHole(spec)
    e = ok[i - 1]
    return node_from_expansion(spec, e, [walk(search, c, pick, depth - 1) for c in e.children])


@dataclass
class Outcome:
    case: Case  # with the walk's picks filled in
    status: str  # ok | infeasible | fail
    stage: str = ""  # where it failed: spec, synthesize, verify, codegen, disagree, compile, numpy
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.status} {self.stage}: {self.detail}\n  case: {self.case.line()}"


def program(
    case: Case, pick: Callable[[int], int] | None = None, search: Search | None = None, picks: list[int] | None = None
) -> Impl:
    """The case's program (NoImplementationError if it has none), by `search` (default:
    the target's shared one). The walk's choices come from `pick`, else the case's own
    picks are replayed; each is appended to `picks`."""
    spec = parse_spec(case.text, target=case.target)
    search = search or search_for(case.target)
    if not case.depth:
        return search.build(spec)
    made = [] if picks is None else picks
    replay: Iterator[int] = iter(case.picks)

    def choose(n: int) -> int:
        i = min(pick(n) if pick is not None else next(replay, 0), n)
        made.append(i)
        return i

    return search.complete(walk(search, spec, choose, case.depth))


def run_case(case: Case, pick: Callable[[int], int] | None = None, seed: int = 3) -> Outcome:
    """Program, proof, C, run: the first thing that goes wrong, or ok. A case the shared
    search finds no implementation of is searched again from an empty memo table: the
    answer must not depend on what the table holds."""
    picks: list[int] = []
    try:
        imp = program(case, pick, picks=picks)
    except NoImplementationError as e:
        case = replace(case, picks=tuple(picks)) if case.depth else case
        try:
            program(case, search=Search(get_engine(case.target), DictMemo()))
        except NoImplementationError:
            return Outcome(case, "infeasible", "synthesize", str(e).splitlines()[0])
        except Exception as e2:
            return Outcome(case, "fail", "synthesize", f"{type(e2).__name__}: {e2}")
        return Outcome(
            case, "fail", "memo", f"the shared memo table says {str(e)[:300]}; a search from an empty one finds one"
        )
    except Exception as e:  # anything else the search raises is a bug
        return Outcome(case, "fail", "synthesize", f"{type(e).__name__}: {e}")
    case = replace(case, picks=tuple(picks)) if case.depth else case
    try:
        rep = verify(imp)
    except Exception as e:
        return Outcome(case, "fail", "verify", f"{type(e).__name__}: {e}")
    try:
        fn = imp.compile()
        refused = ""
    except CodegenError as e:
        fn, refused = None, str(e)
    except Exception as e:
        return Outcome(case, "fail", "compile", f"{type(e).__name__}: {e}")
    bad = [str(o) for o in rep.obligations if o.status != "proved"]
    if rep.ok == bool(refused):
        why = f"codegen refuses ({refused})" if refused else f"codegen accepts; verify: {bad[:2]}"
        return Outcome(case, "fail", "disagree", f"verify {'proves' if rep.ok else 'refutes'} but {why}")
    if bad:
        return Outcome(case, "fail", "verify", f"{len(bad)} obligations not proved: {bad[:2]}; codegen: {refused}")
    assert fn is not None
    try:
        err, tol = fn.check(seed=seed)
    except Exception as e:
        return Outcome(case, "fail", "run", f"{type(e).__name__}: {e}")
    if not err <= tol:  # NaN fails too
        return Outcome(case, "fail", "numpy", f"max |error| {err} > tolerance {tol}")
    return Outcome(case, "ok")


def save_regression(case: Case, path: Path = REGRESSIONS) -> bool:
    """Append a failing case to the regression file (once); True if it was new."""
    lines = path.read_text().splitlines() if path.exists() else []
    if case.line() in lines:
        return False
    with path.open("a") as f:
        f.write(case.line() + "\n")
    return True


# ---------------------------------------------------------------------------- the run
class _Found(Exception):
    pass


def fuzz(
    minutes: float,
    targets: tuple[str, ...],
    base_seed: int = 0,
    max_volume: int = 4096,
    save: Path | None = REGRESSIONS,
    per_round: int = 25,
    families: tuple[str, ...] = FAMILIES,
    out=sys.stdout,
    max_memory: float = 2048,
) -> Counter:
    """Fuzz for `minutes`, in rounds of `per_round` hypothesis examples; returns the counts.
    After a round that leaves the process above `max_memory` MiB, the shared searches and
    engines are dropped (counted as memory resets)."""
    t0 = time.monotonic()
    stop = t0 + minutes * 60
    counts: Counter = Counter()
    seen: Counter = Counter()  # kinds run (" walk": a random walk above the optimum)
    why: Counter = Counter()  # why specs had no implementation
    slow: list[tuple[float, str]] = []  # the slowest cases
    last_report = t0
    failures: list[Outcome] = []
    rnd = 0
    found: dict[str, Outcome] = {}
    while time.monotonic() < stop:
        found.clear()

        @hseed(base_seed + rnd)
        @settings(
            max_examples=per_round,
            deadline=None,
            database=None,
            phases=[Phase.generate, Phase.shrink],
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
        )
        @given(case=cases(targets, max_volume, families=families), data=st.data())
        def prop(case, data):
            if time.monotonic() > stop:
                return
            t = time.monotonic()
            o = run_case(case, lambda n: data.draw(st.integers(0, n)))
            slow.append((time.monotonic() - t, o.case.line()))
            slow.sort(reverse=True)
            del slow[3:]
            counts["specs tried"] += 1
            counts[o.status] += 1
            counts["programs"] += o.status != "infeasible"
            if o.status == "infeasible":
                why[_why(case, o.detail)] += 1
            seen[case.text.lstrip("(").split("(")[0] + (" walk" if case.depth else "")] += 1
            if o.status == "fail":
                found["last"] = o  # hypothesis runs the minimal failing example last
                raise _Found(str(o))

        try:
            prop()
        except Exception:  # _Found, or hypothesis's report of it (flaky: its replay ran out of time)
            if "last" not in found:
                raise
            o = found["last"]
            failures.append(o)
            counts["failures (minimal cases)"] += 1
            print(f"FAILURE (minimal case after shrinking):\n  {o}", file=out, flush=True)
            if save is not None and save_regression(o.case, save):
                print(f"  saved to {save}", file=out, flush=True)
        rnd += 1
        if _rss_mb() > max_memory:  # the shared searches and engines grow with every case
            _forget()
            counts["memory resets"] += 1
        now = time.monotonic()
        if now - last_report > 60 or now >= stop:
            last_report = now
            print(f"[{(now - t0) / 60:5.1f} min] " + _counts_line(counts), file=out, flush=True)
    counts["minutes"] = round((time.monotonic() - t0) / 60, 1)
    print("\nkinds run:", ", ".join(f"{k} {n}" for k, n in sorted(seen.items())), file=out)
    print("no implementation:", ", ".join(f"{k} {n}" for k, n in why.most_common()) or "none", file=out)
    print("slowest:", "; ".join(f"{t:.0f} s {line}" for t, line in slow), file=out)
    print("total: " + _counts_line(counts), file=out, flush=True)
    return counts


def _rss_mb() -> float:
    """This process's resident memory in MiB (0 where /proc is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def _forget() -> None:
    """Drop the shared searches and every cached engine, and collect: a run of hours
    grew to 4.3 GB and the kernel's OOM killer ended it (2026-11-29). Cases after it
    search from empty tables again."""
    _SEARCHES.clear()
    drop_engines()
    gc.unfreeze()  # the search freezes what it keeps (dp._freeze_gc); thaw it so it can go
    gc.collect()


def _why(case: Case, detail: str) -> str:
    """Why a case had no implementation, in a few words: its kind, whether its memory
    limits were the target's full capacities, and what the search said."""
    spec = parse_spec(case.text, target=case.target)
    full = all(lim >= lv.capacity for lim, lv in zip(spec.limits, spec.target.levels))
    said = "memory limits" if "exceeds" in detail else detail
    said = "no rewrite applies" if "no rewrite applies" in detail else said
    return f"{spec.kind.split('(')[0]} ({'full limits' if full else 'reduced limits'}: {said})"


def _counts_line(c: Counter) -> str:
    keys = ["specs tried", "programs", "ok", "infeasible", "fail", "failures (minimal cases)", "memory resets"]
    return ", ".join(f"{k} {c.get(k, 0)}" for k in keys)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=5.0, help="how long to run (default 5)")
    ap.add_argument("--targets", nargs="+", default=None, help="targets (default: avx2, and avx512 if the CPU has it)")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000, help="hypothesis seed of the first round")
    ap.add_argument("--max-volume", type=int, default=4096, help="points of a spec at most (default 4096)")
    ap.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES), help="kinds to draw from")
    ap.add_argument("--no-save", action="store_true", help="do not append failures to the regression file")
    ap.add_argument(
        "--max-memory",
        type=float,
        default=2048,
        help="MiB of resident memory after which the shared searches are dropped (default 2048)",
    )
    args = ap.parse_args(argv)
    targets = tuple(args.targets or host_targets())
    print(f"fuzzing {args.minutes} min on {', '.join(targets)}, seed {args.seed}", flush=True)
    save = None if args.no_save else REGRESSIONS
    families = tuple(args.families)
    c = fuzz(args.minutes, targets, args.seed, args.max_volume, save, families=families, max_memory=args.max_memory)
    return 1 if c.get("failures (minimal cases)") else 0


if __name__ == "__main__":
    sys.exit(main())
