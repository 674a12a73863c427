"""Hand schedules built with the scheduling API alone.

`fast_matmul`: the classic (Goto/BLIS) recipe for an f32 (or i32) matmul. Zero C; pack B
into [n/16, k, 16] panels (a Move into layout `[0, 2, 1, 2 p(16)]`); loop over 16-wide
panels of B, then over 6-row blocks of A; keep the 6x16 block of C in 12 __m256
accumulators (VRF) while k runs innermost; per k, load one 16-wide row of the panel into
2 registers and, for each of the 6 rows, broadcast A[i, k] and FMA (BroadcastVecMultAdd).

`examples/fast_matmul.py` compiles, checks and times it against numpy.

Strategies (functions of an open program, as `subschedule` takes them) that complete
every open spec of a program generically, so that any shape -- boundaries multiply the
holes -- can be finished by hand: `complete(imp, scalar)` down to scalar kernels,
`complete(imp, reg_block)` for MatmulAccum blocks held in vector registers.
"""

from __future__ import annotations

from dataclasses import dataclass

from morello_asp.dtypes import Dtype
from morello_asp.ir import Impl, SpecHole
from morello_asp.schedule import leaf_spec
from morello_asp.spec import parse_spec
from morello_asp.target import Target, as_target


@dataclass(frozen=True)
class RegisterBlock:
    """The classic register block of a target, from what it declares: `rows` x `cols`
    values of C held in vector registers, `lanes` values per vector."""

    rows: int  # MR: rows of A broadcast per k step
    cols: int  # NR: two vectors of the widest width
    lanes: int  # values per vector register

    @property
    def pack(self) -> str:
        """B (1 x k x n) packed into `cols`-wide panels: [batch, n/cols, k, cols]."""
        return f"[0, 2, 1, 2 p({self.cols})]"


def register_block(target: Target | str | None = None, dtype: str = "f32") -> RegisterBlock:
    """The Goto/BLIS register block for `dtype` on `target`, derived from its facts alone:
    a row of B is two of its widest vectors (tgt_vector_bytes), and C's block takes as
    many rows of two accumulators as its vector level holds besides B's row and one
    broadcast (tgt_level capacity). avx2 (16 x 32 B): 6 x 16 f32; avx512 (32 x 64 B):
    14 x 32; neon (32 x 16 B): 14 x 8."""
    tgt = as_target(target)
    lanes = max(tgt.vector_types) // Dtype.parse(dtype).nbytes
    regs = tgt.vector_levels[0].capacity
    return RegisterBlock(rows=max(1, (regs - 3) // 2), cols=2 * lanes, lanes=lanes)


# The levels a recipe uses, by role in the program's target (no level is named here).
def _cache(p) -> str:
    return leaf_spec(p).target.cache_levels[0].name


def _vregs(p) -> str:
    return leaf_spec(p).target.vector_levels[0].name


def _memory(p) -> str:
    return leaf_spec(p).target.memory_level.name


def _row_moves(blk: RegisterBlock):
    """Move of a C block between L1 and VRF: one row (2 vectors) at a time."""
    return lambda mv: mv.tile([1, 1, blk.cols]).select("VectorAssign")


def _k_step(blk: RegisterBlock):
    """MatmulAccum(1 x r x 1 x cols): load the B row into VRF, then per row of A one
    broadcast-FMA into that row's two accumulators."""

    def step(h):
        cache, vregs = _cache(h), _vregs(h)
        h = h.move_param(1, cache, blk.pack).move_param(1, vregs, blk.pack, vector_size=blk.lanes)
        h = h.subschedule([0, 0], lambda load: load.select("VectorAssign"))
        return h.subschedule(
            [0, 1], lambda body: body.tile([1, 1, 1, blk.cols]).move_param(0, cache).select("BroadcastVecMultAdd")
        )

    return step


def _register_block(blk: RegisterBlock):
    """MatmulAccum(1 x r x k x cols) with C's r x cols block held in registers over all of k."""

    def regs(a):
        a = a.move_param(2, _vregs(a), "row_major", vector_size=blk.lanes)
        a = a.subschedule([0], _row_moves(blk)).subschedule([2], _row_moves(blk))
        return a.subschedule([1], lambda body: body.split(1).subschedule([0], _k_step(blk)))

    return lambda h: h.move_param(2, _cache(h)).subschedule([0], regs)  # the cache move: a hint, no code


def _pack(blk: RegisterBlock):
    """Move(1 x k x n) row-major -> packed panels, one row of B at a time, `cols` values
    at a time (one dimension per tile, as the search tiles)."""

    def pack(mv):
        _, k, n = mv.spec.shape
        if k > 1:
            mv = mv.tile([1, 1, n])
        if n > blk.cols:
            mv = mv.tile([1, 1, blk.cols])
        mv = mv.move_param(0, _cache(mv)).move_param(1, _cache(mv), blk.pack)
        return mv.tile([1, 1, 1]).select("ValueAssign")

    return pack


def fast_matmul(m: int = 512, k: int = 512, n: int = 512, dtype: str = "f32", mr: int | None = None, target=None):
    """The hand-scheduled program for Matmul(m x k x n) in GL on `target` (default avx2)
    with the target's register block (`register_block`: 6 x 16 f32 on avx2; n a multiple
    of its columns; dtype f32 or i32). `mr` rows per register block instead of the
    target's: a power of two (4) keeps every rewrite in the search space."""
    blk = register_block(target, dtype)
    if mr is not None:
        blk = RegisterBlock(mr, blk.cols, blk.lanes)
    nr = blk.cols
    if n % nr:
        raise ValueError(f"n must be a multiple of {nr} (two {blk.lanes}-lane vectors)")
    imp = parse_spec(f"Matmul({m}x{k}x{n}, {dtype})", target).to_accum()
    imp = imp.subschedule([0], lambda z: z.select("MemsetZero"))
    imp = imp.move_param(1, _memory(imp), blk.pack)  # pack B
    imp = imp.subschedule([1, 0], _pack(blk))
    if n > nr:
        imp = imp.tile([1, m, k, nr])  # loop over nr-wide panels of B (and of C)
    if m > blk.rows:  # loop over row blocks of A (and of C); a remainder block is a boundary
        ((path, _),) = imp.holes()
        imp = imp.subschedule(path, lambda panel: panel.tile([1, blk.rows, k, nr]))
    for path, _hole in imp.holes():
        imp = imp.subschedule(path, _register_block(blk))
    return imp


# ------------------------------------------------------------------ generic strategies
def to_l1(h, ops):
    """Cache-move the operands among `ops` that are in main memory into the first cache
    level (no code)."""
    for i in ops:
        ts = leaf_spec(h).operands[i]
        if ts.level == _memory(h):
            h = h.move_param(i, _cache(h), str(ts.layout))
    return h


def scalar_tile(h):
    s = leaf_spec(h)
    return h.tile([1] * len(s.shape)) if s.volume > 1 else h


def scalar(h):
    """Any Zero / Move / MatmulAccum spec down to scalar kernels."""
    kind = leaf_spec(h).kind
    h = scalar_tile(h)
    if kind == "Zero":
        return to_l1(h, [0]).select("ValueZero")
    if kind == "Move":
        return to_l1(h, [0, 1]).select("ValueAssign")
    if kind == "MatmulAccum":
        return to_l1(h, [0, 1, 2]).select("MultAdd")
    raise AssertionError(kind)


def complete(imp, strategy):
    """Apply `strategy` to every open spec until none is left."""
    if not isinstance(imp, Impl):
        imp = SpecHole(imp)
    while imp.holes():
        path, _ = imp.holes()[0]
        imp = imp.subschedule(path, strategy)
    return imp


def vec_rows(mv):
    """Move between L1 and VRF one row at a time (VectorAssign on each row)."""
    s = leaf_spec(mv)
    shape = list(s.shape)
    row = [1] * (len(shape) - 1) + [shape[-1]]
    return (mv.tile(row) if row != shape else mv).select("VectorAssign")


def reg_block(h):
    """MatmulAccum(1 x r x k x c), c a multiple of a vector's lanes, with out held in VRF over all of k:
    per k, rhs row to VRF, then one BroadcastVecMultAdd per row of lhs."""
    s = leaf_spec(h)
    c = s.shape[3]
    nbytes = s.operands[2].dtype.nbytes  # the widest vector of the target whose lanes divide c
    vs = max((w // nbytes for w in s.target.vector_types if c % (w // nbytes) == 0), default=4)
    rlay = str(s.operands[1].layout)

    def kstep(b):
        b = to_l1(b, [1])
        b = b.move_param(1, _vregs(b), rlay, vector_size=vs)
        b = complete_kind(b, "Move", lambda m: m.select("VectorAssign"))
        inner = lambda x: x.tile([1, 1, 1, c]) if leaf_spec(x).shape[1] > 1 else x  # noqa: E731
        return complete(b, lambda x: to_l1(inner(x), [0]).select("BroadcastVecMultAdd"))

    def accumulate(x):
        return complete(x.split(1) if leaf_spec(x).shape[2] > 1 else x, kstep)

    if s.target.holds_vectors(s.operands[2].level):
        return accumulate(h)
    h = h.move_param(2, _cache(h)).move_param(2, _vregs(h), "row_major", vector_size=vs)
    h = complete_kind(h, "Move", vec_rows)
    return complete(h, accumulate)


def complete_kind(imp, kind, strategy):
    """Apply `strategy` to every open spec of `kind`."""
    while True:
        todo = [p for p, hole in imp.holes() if hole.spec.kind == kind]
        if not todo:
            return imp
        imp = imp.subschedule(todo[0], strategy)
