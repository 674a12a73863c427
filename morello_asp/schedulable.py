"""The scheduling API as methods of specs and programs (paper 2.3; Exo's
API_scheduling is the model): each is a thin wrapper over the checked free function of
the same name in morello_asp.schedule, so `spec.tile(...).move_param(...)` chains.

The scheduling API is built on the core model, so these methods reach it through
morello_asp/ports.py (plugged in when the package is imported), and Spec and Impl can
inherit from this class without the core importing what is built on it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from morello_asp.ports import port

if TYPE_CHECKING:
    from morello_asp.ir import Impl
    from morello_asp.layout import Layout
    from morello_asp.spec import Spec


class Schedulable:
    """Rewrites of the open spec a value stands for: the spec itself, or the sole open
    spec of a partial program that is not a copy (Kind.is_copy: a Move) (use `subschedule` to pick another)."""

    def _program(self) -> Spec | Impl:
        raise NotImplementedError  # Spec and Impl return themselves

    def tile(self, shape: Sequence[int], parallel: bool = False) -> Impl:
        """Spec(N) -> loop over tiles: Spec(tile), plus one boundary spec per leftover
        region. `shape` has one size per spec dimension (b, m, k, n for Matmul).

            Matmul(1x8x8x8).tile([1, 4, 8, 8])  ->  tile (2 trips): Matmul(1x4x8x8)
        """
        return port("schedule").tile(self._program(), shape, parallel)

    def split(self, k: int) -> Impl:
        """An accumulating spec -> loop over its reduction in steps of k.

        MatmulAccum(1x4x64x4).split(16)  ->  tile (4 trips): MatmulAccum(1x4x16x4)
        """
        return port("schedule").split(self._program(), k)

    def to_accum(self) -> Impl:
        """Matmul -> block: Zero(out); MatmulAccum(lhs, rhs, out).

        Matmul(1x4x4x4).to_accum()  ->  block: [Zero(1x4x4), MatmulAccum(1x4x4x4)]
        """
        return port("schedule").to_accum(self._program())

    def spatial_split(self) -> Impl:
        """ConvAccum of one channels-last image row -> loop over the filter positions
        (fh, fw), each a MatmulAccum(1 x w x c x f) over views of the operands.

        ConvAccum(1x16x8x1x4x3x3).spatial_split()  ->  for fh, fw: MatmulAccum(1x4x8x16)
        """
        return port("schedule").spatial_split(self._program())

    def subsample(self, level: str = "GL") -> Impl:
        """A strided 1 x 1 convolution -> its image's pixels read (every S-th) copied into
        a dense channels-last buffer at `level`, then the stride-1 convolution on it.

        ConvS2(1x16x8x3x5x1x1).subsample("GL")  ->  alloc: [Move(1x8x3x5), Conv(1x16x8x3x5x1x1)]
        """
        return port("schedule").subsample(self._program(), level)

    def move_param(
        self,
        operand: int,
        level: str,
        layout: str | Layout = "row_major",
        vector_size: int | None = None,
        dtype: str | None = None,
    ) -> Impl:
        """Spec(.., t, ..) -> alloc t' at `level` in `layout`: [load t -> t'] Spec(.., t', ..)
        [store t' -> t] (loads for inputs, stores for outputs, none for a cache move).
        With `dtype`, t' holds that dtype: a casting move of an input, which must widen
        exactly (bf16 -> f32, i8/u8 -> i16/i32); the load converts.

            Matmul(1x4x4x4, GL, GL, GL).move_param(1, "L1")  ->  alloc l: ... Matmul(.., L1, ..)   (avx2)
            Matmul(bf16, bf16, f32).move_param(0, "L1", dtype="f32")  ->  alloc l: (f32, L1) ...
        """
        return port("schedule").move_param(self._program(), operand, level, layout, vector_size, dtype)

    def select(self, kernel: str) -> Impl:
        """Spec -> the target microkernel `kernel` (e.g. BroadcastVecMultAdd), if the
        target's rules apply it to the spec.

            MatmulAccum(1x1x1x8, RF, VRF, VRF).select("BroadcastVecMultAdd")  ->  the kernel
        """
        return port("schedule").select(self._program(), kernel)

    def bufferize(
        self, index: int, level: str, layout: str | Layout = "row_major", vector_size: int | None = None
    ) -> Impl:
        """Compose -> pipeline: the components after `index` write a new intermediate
        buffer at `level`, then components 0..index read it (Morello's bufferize).

            Compose((Softmax2, Matmul)).bufferize(0, "L1")  ->  pipeline: Matmul(a, b, t); Softmax2(t, out)
        """
        return port("schedule").pipeline(self._program(), "bufferize", level, layout, vector_size, index)

    def pipeline(
        self, step: str, level: str = "", layout: str | Layout = "row_major", vector_size: int | None = None
    ) -> Impl:
        """Any declared pipeline step by name (a --rules file's own too: encodings/README.md,
        "Pipelines"), its intermediates at `level` ("" for a step without any)."""
        return port("schedule").pipeline(self._program(), step, level, layout, vector_size)

    def to_softmax_parts(self, level: str, layout: str | Layout = "row_major", vector_size: int | None = None) -> Impl:
        """Softmax{D} -> pipeline: SoftmaxDenominatorAndUnscaled{D} (the denominators in a
        new buffer at `level`, the unscaled values in out), then DivideVecScalar{D} in place."""
        return port("schedule").pipeline(self._program(), "to_softmax_parts", level, layout, vector_size)

    def to_softmax_parts_recompute(
        self, level: str, layout: str | Layout = "row_major", vector_size: int | None = None
    ) -> Impl:
        """Softmax{D} -> pipeline: SoftmaxDenominatorAndMax{D} (maxima and denominators at
        `level`), then SoftmaxComplete{D}."""
        return port("schedule").pipeline(self._program(), "to_softmax_parts_recompute", level, layout, vector_size)

    def to_max_and_unscaled(
        self, level: str, layout: str | Layout = "row_major", vector_size: int | None = None
    ) -> Impl:
        """SoftmaxDenominatorAndUnscaled{D} -> pipeline: Max{D} (maxima at `level`), then
        SoftmaxDenominatorAndUnscaledFromMax{D}."""
        return port("schedule").pipeline(self._program(), "to_max_and_unscaled", level, layout, vector_size)

    def to_max_and_denominator(self) -> Impl:
        """SoftmaxDenominatorAndMax{D} -> Max{D}; SoftmaxDenominator{D} (no new buffer)."""
        return port("schedule").pipeline(self._program(), "to_max_and_denominator")

    def subschedule(self, path: Sequence[int], fn: Callable[[Impl], Impl]) -> Impl:
        """Apply `fn` to the child at `path` (child indices from this program's root).

        prog.subschedule([0], lambda load: load.select("VectorAssign"))
        """
        return port("schedule").subschedule(self._program(), path, fn)
