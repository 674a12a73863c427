"""Software prefetch for cache moves.

A cache move (an alloc into a cache level that keeps the layout) copies nothing: the
hardware brings the tile in when the kernels first touch it. Inside a loop that is late
by a memory latency per tile, and the hardware prefetchers do not see it coming: the
rows of a tile are short runs far apart (6 rows of 128 floats, 4 or 8 KB apart, in the
6 x 16 matmul block). A target that says how to prefetch into a level
(`tgt_c_prefetch/3`) gets the lines of the *next* iteration's tile prefetched, spread
over the trips of the loop nest inside the move (the first loop inside it, the first
loop inside that, and so on, down to the kernels' own loop), one line a trip, so they
arrive while this tile is computed and never in a burst that fills the miss queue
(avx512's 8 x 32 block at 2048^3 waited on 48 lines a trip when they were spread over
the first loop only). Only in a loop whose operands
span the target's MinBytes or more (its L2): a smaller loop's tiles stay in the L2,
whose latency the core hides, and there the prefetches only cost instructions.

The program and its cost are unchanged: this is how a cache move is lowered to C.
MORELLO_ASP_PREFETCH=off emits none, =unsplit does not split loops (`Split`); to compare
the three: benchmarks/programs.py --prefetch-ab.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from morello_asp.errors import InputError
from morello_asp.expr import Var

if TYPE_CHECKING:
    from morello_asp.codegen.emitter import Emitter, View


@dataclass(eq=False)
class Pending:
    """The next tile of one cache move, waiting for the loops inside the move."""

    name: str  # the buffer's, for readable C
    guard: str  # C condition: the enclosing loop has a next iteration
    base: str  # C pointer to the next tile's first value
    lines: list[int]  # per cache line of the tile, a value offset into it from `base`
    code: str  # the target's prefetch of one line, with {ptr}
    at: int  # where in the emitted lines to put them if no loop comes
    counters: tuple[str, ...] = ()  # the loops it has been handed down through, outermost first


def plan(em: Emitter, v: View, level: str) -> Pending | None:
    """The next iteration's tile of view `v`, moved into cache level `level`, or None if
    the target has no prefetch for the level, or the innermost loop does not move `v`,
    spans less than the target's MinBytes, or is parallel (its next trip runs on another
    core)."""
    import numpy as np  # heavy: loaded when C is written, not with the package

    fact = em.ct.prefetch.get(level.upper())
    if fact is None or not em.prefetch_on or v.buf.in_registers or not em.env:
        return None
    min_bytes, code = fact
    var = next(reversed(em.env))  # the innermost open loop
    r = em.env[var]
    if r.hi <= r.lo or var in em.parallel_vars or not any(var in o.vars() for o in v.origin):
        return None
    if em.loop_bytes.get(var, 0) < min_bytes:
        return None
    here = em.value_offsets(v)
    there = em.value_offsets(v, {var: r.lo + r.step})
    shift = there - here
    if not (shift == shift[0]).all():  # a layout whose offsets are not affine in the loop
        return None
    rel = here - here[0]
    if rel.max() - rel.min() + 1 == rel.size:
        return None  # one run: the next tile follows on, which the hardware prefetchers see
    nbytes, line = v.buf.ts.dtype.nbytes, em.ct.target.line_bytes
    keys = (rel * nbytes) // line
    firsts: dict[int, tuple[int, int]] = {}  # line -> (position along the last dimension, offset)
    last = np.indices(v.shape).reshape(len(v.shape), -1)[-1]
    for k, o, j in sorted(zip(keys.tolist(), rel.tolist(), last.tolist())):
        firsts.setdefault(k, (j, o))
    # Register blocks walk a tile's rows together along its last dimension: the first
    # lines of every row are needed first.
    lines = [o for _, o in sorted(firsts.values())]
    nxt = replace(v, origin=tuple(o.subs({var: Var(var) + r.step}) for o in v.origin))
    base = em.pointer(nxt, (0,) * len(v.shape))
    return Pending(v.buf.name, f"{var} < {r.hi}", base, lines, code, len(em.lines))


def mode() -> str:
    """MORELLO_ASP_PREFETCH: on (the default), off, or unsplit (prefetch as on, but no
    loop split in two, `Split`: the earlier C, kept to measure the split against)."""
    switch = os.environ.get("MORELLO_ASP_PREFETCH", "").strip().lower()
    if switch not in ("", "on", "off", "unsplit"):
        raise InputError(f"MORELLO_ASP_PREFETCH={os.environ['MORELLO_ASP_PREFETCH']!r}: expected on, off or unsplit")
    return switch or "on"


def trip_number(em: Emitter, counters: list[str]) -> tuple[str, int]:
    """The C expression of the trip number of a loop nest over `counters` (outermost
    first; the innermost counts fastest) and its number of trips."""
    trip, trips = "", 1
    for v in reversed(counters):
        r = em.env[v]
        this = v if r.step == 1 else f"{v} / {r.step}"
        trip = this if trips == 1 else f"({this}) * {trips} + {trip}"
        trips *= (r.hi - r.lo) // r.step + 1
    return trip, trips


def spread(em: Emitter, pending: list[Pending], trip: str | int, trips: int, first: int | None = None) -> None:
    """Emit, at the top of a loop body whose trip number is `trip` (0 .. trips - 1: a C
    expression, or a number in a loop written out unrolled), each pending tile's share
    of prefetches for that trip: an equal share each, or with fewer lines than trips,
    one line in each of the first trips. `first`: the body runs only in the first that
    many trips (a split loop, `Split`), so a tile of that many lines needs no check of
    the trip number."""
    for p in pending:
        n = len(p.lines)
        per = -(-n // trips)
        # the last share padded; with fewer lines than trips, the trips past them are guarded off
        table = p.lines + [p.lines[-1]] * (per * trips - n) if n >= trips else p.lines
        if isinstance(trip, int):
            share = sorted(set(table[trip * per : (trip + 1) * per]), key=table.index)
            if share:
                for text in _guarded(p, share):
                    em.out(text)
            continue
        name = em.fresh(f"pf_{p.name}")
        guard = p.guard if n >= trips or n == first else f"{p.guard} && {trip} < {n}"
        em.out(f"if ({guard}) {{")
        em.depth += 1
        em.out(f"static const int {name}[{len(table)}] = {{{', '.join(map(str, table))}}};")
        if per == 1:
            em.out(p.code.replace("{ptr}", f"{p.base} + {name}[{trip}]"))
        else:
            i = em.fresh_index("p")
            em.out(f"for (int {i} = 0; {i} < {per}; {i}++)")
            em.out("    " + p.code.replace("{ptr}", f"{p.base} + {name}[{trip} * {per} + {i}]"))
        em.depth -= 1
        em.out("}")


def _guarded(p: Pending, offsets: list[int]) -> list[str]:
    """The prefetches of the lines at `offsets` of tile `p`, under its guard (C lines,
    not indented)."""
    return [f"if ({p.guard}) {{", *("    " + p.code.replace("{ptr}", f"{p.base} + {o}") for o in offsets), "}"]


def flush(em: Emitter, pending: list[Pending]) -> None:
    """Tiles no loop took up: all their prefetches where the move was."""
    for p in reversed(pending):
        pad = "    " * em.depth
        em.lines[p.at : p.at] = [pad + t for t in _guarded(p, p.lines)]


def hand_down(em: Emitter, take: list[Pending], opened: list[str]) -> list[Pending]:
    """The tiles a loop over `opened` took up, offered to the loops inside its body (the
    first real loop there takes them and hands them on): put them in `em.prefetches`."""
    passed = [replace(p, counters=p.counters + tuple(opened)) for p in take]
    em.prefetches = passed
    return passed


@dataclass
class Split:
    """A loop whose prefetches all fall in its first trips (fewer lines than the trips
    of the nest they are spread over) runs as two loops, the first trips with the
    prefetches and the rest without, so that the kernels' loop tests no trip number in
    its steady state: on a CPU whose integer and FMA instructions share ports (Intel's
    Skylake family), those tests in the 6 x 16 block's k loop cost 13% of its speed
    from L1 (Cascade Lake, 2026-11-28)."""

    bound: str  # C expression: the counter's value at the first trip without prefetch (unclamped)
    at: int  # emitted line of the loop's body's first line (its header is the one before)
    lines: int  # prefetch lines emitted there


def _split(em: Emitter, groups: dict[tuple[str, ...], list[Pending]], opened: list[str]) -> tuple[int, str] | None:
    """(lines, bound) when one loop counter's nest takes all the tiles and they have
    fewer lines than its trips: the trips past `lines` prefetch nothing, and `bound` is
    the counter's value there."""
    if len(groups) != 1 or len(opened) != 1:
        return None
    ((counters, group),) = groups.items()
    v = opened[0]
    _, trips = trip_number(em, list(counters))
    n = max(len(p.lines) for p in group)
    if counters[-1] != v or n >= trips:
        return None
    r = em.env[v]
    inner = (r.hi - r.lo) // r.step + 1
    # trip = outer * inner + v / step, so trip < n  <=>  v < (n - outer * inner) * step
    outer = trip_number(em, list(counters[:-1]))[0] if len(counters) > 1 else ""
    bound = f"{n} - ({outer}) * {inner}" if outer else str(n)
    return n, bound if r.step == 1 else f"({bound}) * {r.step}"


def settle(em: Emitter, passed: list[Pending], at: int, opened: list[str]) -> Split | None:
    """After a loop's body: the tiles no loop inside took are spread over this loop's
    trips, at the top of its body (emitted line `at`). A Split when the loop (over the
    counters `opened`) should run as two (`split_loop`)."""
    left = [p for p in passed if p in em.prefetches]  # by identity (eq=False)
    em.prefetches = []
    if not left:
        return None
    lines, em.lines = em.lines, []
    groups: dict[tuple[str, ...], list[Pending]] = {}
    for p in left:
        groups.setdefault(p.counters, []).append(p)
    split = _split(em, groups, opened) if em.prefetch_split else None
    for counters, group in groups.items():
        spread(em, group, *trip_number(em, list(counters)), first=split[0] if split else None)
    lines[at:at] = em.lines
    em.lines, n = lines, len(em.lines)
    return Split(split[1], at, n) if split else None


def split_loop(em: Emitter, s: Split, var: str, extent: int, step: str) -> None:
    """Rewrite the loop just emitted (its header, the prefetches, its body, its closing
    brace: the last lines) as two: the trips before `s.bound` with the prefetches, the
    rest without. The bound is clamped to the loop's range."""
    block = em.lines[s.at - 1 :]
    pad = "    " * em.depth
    lim = em.fresh(f"{var}_pf")
    body = block[1 + s.lines :]
    em.lines[s.at - 1 :] = [
        f"{pad}int {lim} = {s.bound};",
        f"{pad}if ({lim} < 0) {lim} = 0;",
        f"{pad}if ({lim} > {extent}) {lim} = {extent};",
        f"{pad}for (int {var} = 0; {var} < {lim}; {var}{step}) {{",
        *block[1:],
        f"{pad}for (int {var} = {lim}; {var} < {extent}; {var}{step}) {{",
        *body,
    ]
