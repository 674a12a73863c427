"""A padded spec's regions (codegen/padding.py, `regions`) as one call: every region's
program and a driver in one C module (docs/convolutions.md, "Padding without a copy").

The driver (`padded_call`) takes the caller's unpadded arrays as fastcall.c takes any
program's: it copies each edge's window into a kept zero-bordered buffer (a static array
of the module: zeros once, its border never written), then calls the regions' programs
on those buffers and on pointers into the caller's image and output (the interior: no
copy). One call from Python, a microsecond, whatever the number of regions; where the
compiled call path cannot take the arrays (a strided view, another dtype), each region's
program is called from Python instead, on numpy's views.
"""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from morello_asp.codegen import fastcall
from morello_asp.codegen.api import Program, cdefs
from morello_asp.codegen.build import build
from morello_asp.codegen.calling import loadable
from morello_asp.codegen.convert import aligned_array, as_array, dense_order
from morello_asp.codegen.ctarget import CTarget
from morello_asp.codegen.emit import bench_function, call_function, emit_function, prelude, spans_of
from morello_asp.codegen.padding import Region, check_padded, checked_input, unpadded_shape
from morello_asp.codegen.views import copy_loops, element_strides, reach
from morello_asp.errors import CodegenError
from morello_asp.ir import Impl

DRIVER = "padded_call"


def copy_c(dst: str, dst_strides, src: str, src_strides, shape, nbytes: int) -> list[str]:
    """C copying the box `shape` from `src` to `dst` (pointer expressions, element
    strides per dimension), in the loops `copy_loops` plans: the innermost run one
    memcpy where it is adjacent on both sides."""
    sh, ds, ss = copy_loops(list(shape), list(dst_strides), list(src_strides))
    loops = [list(x) for x in zip(sh, ds, ss)]
    run = loops.pop()[0] if loops[-1][1] == 1 and loops[-1][2] == 1 else 1
    idx = [f"i{k}" for k in range(len(loops))]
    doff = " + ".join([f"{v} * {d}" for v, (_, d, _) in zip(idx, loops)] or ["0"])
    soff = " + ".join([f"{v} * {s}" for v, (_, _, s) in zip(idx, loops)] or ["0"])
    body = f"memcpy({dst} + {doff}, {src} + {soff}, {run * nbytes});"
    lines = [f"for (long {v} = 0; {v} < {n}; {v}++)" for v, (n, _, _) in zip(idx, loops)]
    return ["{", *[f"  {'  ' * k}{line}" for k, line in enumerate(lines)], f"  {'  ' * len(lines)}{body}", "}"]


class SplitPadded:
    """A padded spec called on unpadded arrays without copying them: one program per
    region (`regions`), the driver calling them all from C. Called as `Padded` (the same
    arguments, out= too); not re-entrant either (the edges' buffers are the module's)."""

    def __init__(self, spec, borders, parts: list[tuple[Region, Impl]], ct: CTarget):
        self.spec = spec
        self.borders = borders
        self.ins = [i for i in range(len(spec.operands)) if i not in spec.outputs]
        if len(spec.outputs) != 1:
            raise CodegenError(f"{spec.short()}: a padded call cut into regions writes one output")
        (self.out,) = spec.outputs
        self._unpadded = {i: unpadded_shape(borders, i, shape) for i, shape in enumerate(spec.operand_shapes)}
        self._orders = {i: dense_order(ts.layout, self._unpadded[i]) for i, ts in enumerate(spec.operands)}
        if any(o is None for o in self._orders.values()):
            raise CodegenError(f"{spec.short()}: an operand in a packing layout; regions need dense layouts")
        ts = spec.operands[self.out]
        self._out_shape = tuple(spec.operand_shapes[self.out])
        self._out_dtype = np.dtype(ts.dtype.np_dtype)
        # per part: per operand ("whole" | "view", index, numpy slices) or ("copy", index,
        # (kept buffer, its slices, the caller's array's slices)): the Python path's steps
        self._steps: list[list[tuple[str, int, Any]]] = []
        for region, _ in parts:
            ops: list[tuple[str, int, Any]] = []
            for i, src in enumerate(region.sources):
                shape = tuple(region.spec.operand_shapes[i])
                if src.how == "whole":
                    ops.append(("whole", i, None))
                elif src.how == "view":
                    ops.append(("view", i, tuple(slice(a, a + n) for a, n in zip(src.start, shape))))
                else:
                    ops.append(("copy", i, self._window(region, i, shape)))
            self._steps.append(ops)
        ct = loadable(ct)
        source, omp = self._source(parts, ct)
        decls = [cdefs(r.spec, f"kernel_{k}") for k, (r, _) in enumerate(parts)]
        module = build(source, "\n".join([*decls, f"int {DRIVER}(void **p);"]), ct.flags, omp, cc=ct.compiler_command)
        self.source = source
        self.parts = [
            (r, Program(impl, ct, (module, f"kernel_{k}"), buffer_shapes=r.buffer_shapes))
            for k, (r, impl) in enumerate(parts)
        ]
        fast = fastcall.module()
        self._run = fast.run if fast else None
        self._fast = None
        if fast is not None:
            addr = int(module.ffi.cast("uintptr_t", module.ffi.addressof(module.lib, DRIVER)))
            self._fast = fast.plan(
                addr,
                len(spec.operands),
                tuple(self._entry(i) for i in self.ins),
                (self._entry(self.out),),
            )

    def _entry(self, i: int) -> tuple:
        """fastcall.c's plan of operand i: the unpadded array's shape and memory order."""
        ts = self.spec.operands[i]
        return (i, np.dtype(ts.dtype.np_dtype), self._unpadded[i], False, self._orders[i])

    def _window(self, region: Region, i: int, shape: tuple[int, ...]) -> tuple:
        """The kept zero-bordered buffer of operand i's window in `region` (a view of the
        module's static array once built; numpy's until then) and the slices of it and of
        the caller's array that a call copies (the window's part inside the array)."""
        ts, src = region.spec.operands[i], region.sources[i]
        buf = aligned_array(shape, ts.dtype.np_dtype, zero=True, order=dense_order(ts.layout, shape))
        sides = self.borders.get(i, {})
        dst, srcs = [], []
        for j, (n, st) in enumerate(zip(shape, src.start)):
            lo = sides.get(j, (0, 0))[0]
            a = max(st, lo)  # in bordered coordinates
            b = min(st + n, lo + self._unpadded[i][j])
            dst.append(slice(a - st, b - st))
            srcs.append(slice(a - lo, b - lo))
        return buf, tuple(dst), tuple(srcs)

    def _source(self, parts: list[tuple[Region, Impl]], ct: CTarget) -> tuple[str, bool]:
        """The module's C: each region's program (kernel_k, its call and timing entries)
        and the driver."""
        spec = self.spec
        bodies, omp = [], False
        for k, (r, impl) in enumerate(parts):
            body, uses = emit_function(impl, f"kernel_{k}", ct, r.buffer_shapes)
            omp |= uses
            spans = spans_of(impl.spec, r.buffer_shapes)
            bodies += [
                body,
                call_function(impl.spec, f"kernel_{k}", spans),
                bench_function(impl.spec, f"kernel_{k}", spans),
            ]
        names = [f"op{i}" for i in range(len(spec.operands))]
        strides = {i: element_strides(self._unpadded[i], self._orders[i]) for i in range(len(spec.operands))}
        spans = {i: reach(self._unpadded[i], strides[i]) for i in strides}
        D = [f"int {DRIVER}(void **p)", "{"]
        for i, ts in enumerate(spec.operands):
            c = ts.dtype.c_type
            const = "" if i == self.out else "const "
            D.append(f"    {const}{c} *{names[i]} = ({const}{c} *)p[{i}];")
        o = self.out
        for i in self.ins:
            D.append(
                f"    if ((uintptr_t){names[o]} < (uintptr_t)({names[i]} + {spans[i]}) && "
                f"(uintptr_t){names[i]} < (uintptr_t)({names[o]} + {spans[o]})) return 1;"
            )
        statics = []
        for k, ((r, _), ops) in enumerate(zip(parts, self._steps)):
            args = []
            D.append(f"    /* region {k}: {r.spec.short()} over {', '.join(f'{a}:{b}' for a, b in r.box)} */")
            for how, i, what in ops:
                ts = spec.operands[i]
                if how == "whole":
                    args.append(names[i])
                elif how == "view":
                    off = sum(sl.start * st for sl, st in zip(what, strides[i]))
                    args.append(f"{names[i]} + {off}")
                else:
                    buf, dst, srcs = what
                    shape = tuple(r.spec.operand_shapes[i])
                    kept = f"kept_{k}_{i}"
                    statics.append(f"static {ts.dtype.c_type} {kept}[{prod(shape)}] __attribute__((aligned(64)));")
                    kst = element_strides(shape, dense_order(r.spec.operands[i].layout, shape))
                    d0 = sum(sl.start * st for sl, st in zip(dst, kst))
                    s0 = sum(sl.start * st for sl, st in zip(srcs, strides[i]))
                    box = [sl.stop - sl.start for sl in dst]
                    D += [
                        "    " + line
                        for line in copy_c(
                            f"({kept} + {d0})", kst, f"({names[i]} + {s0})", strides[i], box, ts.dtype.nbytes
                        )
                    ]
                    args.append(kept)
            D.append(f"    kernel_{k}({', '.join(args)});")
        D += ["    return 0;", "}"]
        text = (
            "\n".join(prelude(ct))
            + "\n\n"
            + "\n\n".join(bodies)
            + "\n\n"
            + "\n".join(statics)
            + "\n\n"
            + "\n".join(D)
            + "\n"
        )
        return text, omp

    def shape(self, i: int) -> tuple[int, ...]:
        """The shape a call takes for operand i (unpadded)."""
        return self._unpadded[i]

    def __call__(self, *args, out=None):
        if self._fast is not None:
            r = self._run(self._fast, args, out)
            if r is not NotImplemented:
                return r
            if not all(type(a) is np.ndarray for a in args):  # torch tensors, DLPack: numpy's views of them
                args = tuple(as_array(a, f"argument {k + 1}") for k, a in enumerate(args))
                r = self._run(self._fast, args, out)
                if r is not NotImplemented:
                    return r
        return self._call_regions(args, out)

    def _call_regions(self, args, out):
        """Each region's program from Python, on numpy's views of the arrays: arrays the
        driver's plan does not take (strided views, an out= in another memory order,
        operands that overlap), and checks that name what is wrong."""
        spec = self.spec
        if len(args) != len(self.ins):
            raise CodegenError(f"{spec.short()} padded takes {len(self.ins)} input array(s), got {len(args)}")
        arrays: list = [None] * len(spec.operands)
        for k, (i, x) in enumerate(zip(self.ins, args)):
            arrays[i] = checked_input(spec, k, i, as_array(x, f"argument {k + 1}"), self._unpadded[i], "padded")
        shape, dtype, order = self._out_shape, self._out_dtype, self._orders[self.out]
        given = None if out is None else as_array(out, "out")
        if given is not None and (given.shape != shape or given.dtype != dtype or not given.flags.writeable):
            raise CodegenError(
                f"out has shape {given.shape} and dtype {given.dtype}; {spec.short()} writes a writeable "
                f"{shape} array of {dtype}"
            )
        if given is not None and given.transpose(order).flags.c_contiguous:
            res = given
        else:  # the regions write views of an array in the output's layout
            res = aligned_array(shape, dtype, order=order)
        arrays[self.out] = res
        for (_, prog), ops in zip(self.parts, self._steps):
            vals = []
            for how, i, what in ops:
                if how == "whole":
                    vals.append(arrays[i])
                elif how == "view":
                    vals.append(arrays[i][what])
                else:
                    buf, dst, srcs = what
                    buf[dst] = arrays[i][srcs]
                    vals.append(buf)
            prog(*(vals[i] for i in self.ins), out=vals[self.out])
        if given is not None and given is not res:
            given[...] = res
            return given
        return res

    def check(self, seed: int = 0) -> tuple[float, float]:
        """As Padded.check: random unpadded inputs against the reference over them zero-padded."""
        return check_padded(self, self.spec, self.borders, seed)
