"""Named user guides (paper 2.3): the outer part of a program scheduled by hand with the
ordinary rewrites, open specs left for `synthesize_all`.

A guide is how a large spec gets a fast program without searching its whole space: a
person fixes the few outer decisions (packing, cache tiles), the synthesizer finds
everything inside them optimally. Every rewrite a guide applies is checked by the rule
files like any hand schedule, so a guide cannot produce an illegal program.

    synthesize(spec, guide="blis", db=...)         morello-asp synth SPEC --guide blis
"""

from __future__ import annotations

from collections.abc import Callable

from morello_asp.errors import ScheduleError
from morello_asp.ir import Impl, SpecHole
from morello_asp.kinds import all_kinds
from morello_asp.recipes import register_block
from morello_asp.spec import Spec

# The block left to the synthesizer is the target's register block (recipes.register_block:
# 6 x 16 f32 = 12 accumulator vectors on avx2, 14 x 32 on avx512), B packed into panels
# as wide as its rows.
KC, MC = 256, 96  # cache tiles when k > 512: a kc x 16 panel of B in L1, an mc x kc block of A in L2


def _map_accum_holes(imp: Impl, fn) -> Impl:
    """Apply `fn` to every open MatmulAccum (main tiles and boundary regions alike)."""
    for path, hole in imp.holes():
        if hole.spec.kind == "MatmulAccum":
            imp = imp.subschedule(path, fn)
    return imp


def _tile_dim(d: int, size: int):
    """Loop over `size`-wide tiles of dimension d (b, m, k, n) of an open MatmulAccum;
    nothing if the dimension is already that small."""

    def fn(h: Impl) -> Impl:
        shape = list(h.spec.shape)
        if shape[d] <= size:
            return h
        shape[d] = size
        return h.tile(shape)

    return fn


def blis(spec: Spec, kc: int | None = None, mc: int | None = None) -> Impl:
    """The Goto/BLIS structure for an f32 Matmul: `to_accum`; B packed into nr-wide
    panels (the Move stays open); loops over k chunks of `kc` and row blocks of `mc`
    (default 256 and 96 when k > 512), then nr-wide column panels and mr-row blocks,
    mr x nr the target's register block (avx2: 6 x 16). Left open: zeroing C, the
    packing copy, and each mr x kc x nr block (register tile, loads, kernels) with the
    boundary blocks of sizes that mr does not divide."""
    blk = register_block(spec.target, "f32")
    mr, nr = blk.rows, blk.cols
    problems = []
    if spec.kind != "Matmul":
        problems.append(f"a Matmul spec (got {spec.kind})")
    else:
        b, _m, k, n = spec.shape
        if b != 1:
            problems.append(f"batch 1 (got {b})")
        if n % nr:
            problems.append(f"n a multiple of {nr}, to pack B into {nr}-wide panels (got n = {n})")
        if kc is None and k > 512:
            kc, mc = KC, MC
    if any(str(o.dtype) != "f32" for o in spec.operands):
        problems.append(f"f32 operands (the panels and register blocks are sized for {blk.lanes}-wide f32 vectors)")
    if problems:
        raise ScheduleError(f"guide 'blis' does not apply to {spec}: it needs " + "; ".join(problems))
    imp = spec.to_accum()
    memory = spec.target.memory_level.name  # pack B into panels in a buffer of its own
    imp = imp.subschedule([1], lambda a: a.move_param(1, memory, blk.pack))
    if kc:
        imp = _map_accum_holes(imp, _tile_dim(2, kc))  # k chunks (split)
    if mc:
        imp = _map_accum_holes(imp, _tile_dim(1, mc))  # row blocks of A (L2)
    imp = _map_accum_holes(imp, _tile_dim(3, nr))  # nr-wide panels of B and C
    return _map_accum_holes(imp, _tile_dim(1, mr))  # mr-row register blocks


CHANNELS_LAST = ("[0, 2, 3, 1]", "[2, 3, 1, 0]", "[0, 2, 3, 1]")  # image NHWC, filters HWCF, output NHWC
# A conv register block is the target's matmul block (recipes.register_block): its rows
# are output pixels, its columns output channels (avx2: 6 x 16, 12 ymm accumulators).


def conv(spec: Spec) -> Impl:
    """A channels-last f32 Conv of batch 1: the filters packed into blocks of nr output
    channels (when there are several), then loops over blocks of nr output channels,
    output rows and up to mr output pixels (the target's register block: 16 and 6 on
    avx2), each block `to_accum` and `spatial_split` (boundary blocks included). Left
    open: zeroing each block and, at each filter position, a MatmulAccum(1 x mr x c x nr)
    over views of the image, filters and output (the register block, its loads and
    kernels, found by the synthesizer)."""
    problems = []
    if not _is_conv(spec.k):
        problems.append(f"a Conv spec, of any stride or dilation (got {spec.kind})")
    elif spec.shape[0] != 1:
        problems.append(f"batch 1 (got {spec.shape[0]})")
    for ts, want in zip(spec.operands, CHANNELS_LAST):
        if str(ts.layout) != want.replace(" ", "").replace(",", ", "):
            problems.append(f"channels-last layouts (image and output {CHANNELS_LAST[0]}, filters {CHANNELS_LAST[1]})")
            break
    if any(str(o.dtype) != "f32" for o in spec.operands):
        lanes = register_block(spec.target, "f32").lanes
        problems.append(f"f32 operands (the register blocks are sized for {lanes}-wide f32 vectors)")
    if problems:
        raise ScheduleError(f"guide 'conv' does not apply to {spec}: it needs " + "; ".join(dict.fromkeys(problems)))
    nr = register_block(spec.target, "f32").cols
    imp: Impl = SpecHole(spec)
    f = spec.shape[1]
    if f > nr and f % nr == 0:
        # Filters packed into nr-wide blocks of output channels, [f/nr, fh, fw, c, nr]:
        # a block's (c, nr) planes are contiguous, so its filter rows stream from the
        # cache in order instead of lying f values apart (rows 1-2 KB apart alias in L1).
        imp = spec.move_param(1, spec.target.memory_level.name, filter_pack(nr))
        for path, hole in imp.holes():
            if hole.spec.kind == "Move":
                imp = imp.subschedule(path, _pack_filters(nr))
    for path, hole in imp.holes():  # the Conv
        if hole.spec.kind == spec.kind:
            imp = imp.subschedule(path, _conv_blocks)
    return imp


def _is_conv(k) -> bool:
    """A convolution of Conv's dimensions, operands, filters and output, with any image
    access: Conv, or a strided or dilated one (ConvS2, ConvD2, ...: kinds/conv.lp)."""
    conv = all_kinds().get("Conv")
    return (
        conv is not None
        and not k.is_accum
        and (k.dims, k.params, k.values) == (conv.dims, conv.params, conv.values)
        and k.accesses is not None
        and conv.accesses is not None
        and k.accesses[1:] == conv.accesses[1:]
        and [a.dims for a in k.accesses[0]] == [a.dims for a in conv.accesses[0]]
    )


def filter_pack(nr: int) -> str:
    """Channels-last filters (f, c, fh, fw) with the output channels blocked by nr."""
    return f"[0, 2, 3, 1, 0 p({nr})]"


def _pack_filters(nr: int):
    """The copy into filter_pack(nr): loops over fh, fw and c, then the blocks of nr
    output channels, each a VectorCopy of nr values (the search, which costs every
    order of these loops alike, may order them so that the reads are strided)."""

    def pack(mv: Impl) -> Impl:
        shape = list(mv.spec.shape)  # f, c, fh, fw
        for d in (2, 3, 1):
            if shape[d] > 1:
                shape[d] = 1
                mv = mv.tile(shape)
        if shape[0] > nr:
            shape[0] = nr
            mv = mv.tile(shape)
        cache = mv.spec.target.cache_levels[0].name
        mv = mv.move_param(0, cache).move_param(1, cache, filter_pack(nr))
        return mv.select("VectorCopy")

    return pack


def _conv_blocks(a: Impl) -> Impl:
    """Blocks of nr channels x 1 row x mr pixels (avx2: 16 and 6 or fewer, pixel_block),
    each zeroed (`to_accum`: the block's output is in L1 when it is accumulated, where
    zeroing the whole output first would write and re-read it from memory) and split by
    filter position; a boundary region (the pixels or channels they leave over, over all
    rows) is blocked again."""
    _b, f, c, h, w, fh, fw = a.spec.shape
    blk = register_block(a.spec.target, str(a.spec.operands[2].dtype))
    tile = [1, min(f, blk.cols), c, 1, pixel_block(w, blk.rows), fh, fw]
    if tile == list(a.spec.shape):
        imp = a.to_accum()
        for path, hole in imp.holes():
            if hole.spec.k.accum_of == a.spec.kind:
                imp = imp.subschedule(path, lambda acc: acc.spatial_split())
        return imp
    imp = a.tile(tile)
    for path, _hole in imp.holes():
        imp = imp.subschedule(path, _conv_blocks)
    return imp


def pixel_block(w: int, mr: int) -> int:
    """Pixels per register block for a row of w: the size t <= mr whose blocks (w // t of
    t, then one of w % t) take the least time, a block of r pixels running at
    min(r, 4) / 4 of the FMA units' rate (2 r accumulators, and 8 independent FMA chains
    keep both units busy) and blocks under mr paying 3% per missing row for their extra
    filter loads. 14 -> 5 (5 + 5 + 4, where 6 leaves a block of 2), 7 -> 4 (4 + 3, not
    6 + 1), 56 -> 6."""
    if w <= mr:
        return w

    def rows(r: int) -> float:
        return r * (4 / min(r, 4)) * (1 + 0.03 * (mr - r)) if r else 0.0

    return min(range(mr, 0, -1), key=lambda t: (w // t) * rows(t) + rows(w % t))


GUIDES: dict[str, Callable[[Spec], Impl]] = {"blis": blis, "conv": conv}


def guided(spec: Spec, name: str) -> Impl:
    """The partial program of guide `name` for `spec`."""
    try:
        guide = GUIDES[name]
    except KeyError:
        raise ScheduleError(f"unknown guide {name!r}; known guides: {', '.join(sorted(GUIDES))}") from None
    return guide(spec)


def hand_rewrites(imp: Impl) -> int:
    """How many rewrites a schedule applied by hand (its non-open nodes)."""
    return sum(1 for node in imp.walk() if not isinstance(node, SpecHole))
