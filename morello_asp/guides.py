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

from .errors import ScheduleError
from .ir import Impl, SpecHole
from .recipes import register_block
from .spec import Spec

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
    """A channels-last f32 Conv of batch 1: `to_accum`, then loops over blocks of nr
    output channels, output rows and mr output pixels (the target's register block: 16
    and 6 on avx2), and `spatial_split` on each block (boundary blocks included). Left
    open: zeroing the output and, at each filter position, a MatmulAccum(1 x mr x c x nr)
    over views of the image, filters and output (the register block, its loads and
    kernels, found by the synthesizer)."""
    problems = []
    if spec.kind != "Conv":
        problems.append(f"a Conv spec (got {spec.kind})")
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
    imp = spec.to_accum()
    for path, hole in imp.holes():  # the ConvAccum
        if hole.spec.kind == "ConvAccum":
            imp = imp.subschedule(path, _conv_blocks)
    return imp


def _conv_blocks(a: Impl) -> Impl:
    """Blocks of nr channels x 1 row x mr pixels (avx2: 16 and 6), split by filter
    position; a boundary region (the pixels or channels they leave over, over all rows)
    is blocked again."""
    _b, f, c, h, w, fh, fw = a.spec.shape
    blk = register_block(a.spec.target, str(a.spec.operands[2].dtype))
    tile = [1, min(f, blk.cols), c, 1, min(w, blk.rows), fh, fw]
    if tile == list(a.spec.shape):
        return a.spatial_split()
    imp = a.tile(tile)
    for path, _hole in imp.holes():
        imp = imp.subschedule(path, _conv_blocks)
    return imp


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
