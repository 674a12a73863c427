"""What the C of one program is written with: buffers, views, the emitter that rewrite
families write their nodes' C through (`emit_c`), and kernel templates.

Every operand of the spec being emitted is a *view*: a buffer (a C array, pointer or a
set of register variables) plus the view's origin in buffer coordinates. Index
expressions are the buffer layout's expression applied to origin + in-view coordinate,
simplified with the ranges of the enclosing loop variables. Register buffers have one
C variable per register, so loops whose bodies index registers are unrolled and every
register index is a constant. The emitter finds each node's family through the
`family_of` it is given (codegen/emit.py passes morello_asp.rewrites.for_node): the
families are built on this module, not under it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from math import prod
from typing import TYPE_CHECKING, Any, NoReturn

from morello_asp.codegen import prefetch
from morello_asp.codegen.ctarget import CTarget
from morello_asp.codegen.simplify import VarRange, simplify
from morello_asp.dtypes import Dtype
from morello_asp.errors import CodegenError
from morello_asp.expr import Add, Const, Expr, Mul, Var, lift
from morello_asp.ir import Impl, KernelApp, SpecHole
from morello_asp.naming import snake
from morello_asp.spec import Spec, TensorSpec

if TYPE_CHECKING:
    import numpy as np

STACK_BYTES = 32 * 1024  # larger memory buffers go to the heap (OpenMP threads have small stacks)
ALIGN = 64


@dataclass(frozen=True)
class Buffer:
    name: str
    shape: tuple[int, ...]
    ts: TensorSpec
    in_registers: bool
    root: str = ""  # the program parameter this buffer copies, for readable names
    # Bytes its first value is known to be aligned to: ALIGN for the buffers a program
    # allocates; a parameter's element size, since callers pass numpy's arrays as they
    # come (16-byte aligned, or less for views) and the call copies nothing.
    align: int = ALIGN

    @property
    def volume(self) -> int:
        return self.ts.layout.buffer_volume(self.shape)


@dataclass(frozen=True)
class View:
    buf: Buffer
    origin: tuple[Expr, ...]  # per dimension of the buffer
    shape: tuple[int, ...]  # per dimension of the view
    ts: TensorSpec  # the tensor spec the current spec sees (level, alignment flags)
    # Per buffer dimension, the view dimension that indexes it (None: fixed at the origin);
    # None for a view with the buffer's dimensions in order (a reshaping rewrite such as
    # spatial_split drops and permutes them).
    axes: tuple[int | None, ...] | None = None
    # Per buffer dimension, how many positions of the buffer one step of the view moves
    # (None: one each): spatial_split's view of a stride-2 convolution's image takes every
    # other pixel of a row.
    steps: tuple[int, ...] | None = None

    def position(self, coord) -> list[Expr]:
        """The buffer coordinates of view coordinate `coord`."""
        st = self.steps or (1,) * len(self.origin)
        if self.axes is None:
            return [o + _scaled(c, k) for o, c, k in zip(self.origin, coord, st)]
        return [o if a is None else o + _scaled(coord[a], k) for o, a, k in zip(self.origin, self.axes, st)]

    def buffer_dim(self, j: int) -> int:
        """The buffer dimension view dimension j indexes."""
        return j if self.axes is None else self.axes.index(j)

    def shifted(self, j: int, by: Expr) -> tuple[Expr, ...]:
        """The origin moved `by` positions of the view along its dimension j."""
        b = self.buffer_dim(j)
        origin = list(self.origin)
        origin[b] = origin[b] + _scaled(by, self.steps[b] if self.steps else 1)
        return tuple(origin)


def _scaled(c, k: int) -> Expr:
    """Coordinate `c` (an Expr or int) times k."""
    return lift(c) if k == 1 else lift(c) * k


def param_names(spec: Spec) -> list[str]:
    return list(spec.k.params or [f"op{i}" for i in range(len(spec.operands))])


def inputs_of(spec: Spec) -> list[int]:
    """Operands the program reads: all but a non-accumulating output."""
    k = spec.k
    return [i for i in range(len(spec.operands)) if i not in spec.outputs or (k.is_accum and i in k.filled)]


def parameter_views(
    em: Emitter, spec: Spec, buffer_shapes: dict[int, tuple[int, ...]] | None = None
) -> tuple[list[View], list[str], list[str]]:
    """The views a program's body sees of its parameters (named by param_names, which
    `em` reserves), and the C that loads them into registers before the body and stores
    them after (an operand of the spec in registers: register variables loaded from /
    stored to the argument). `buffer_shapes`: operands that are regions of larger arrays
    (codegen/views.py), indexed with those arrays' strides."""
    em.used.update(param_names(spec))
    views: list[View] = []
    pre: list[str] = []
    post: list[str] = []
    for i, (n, t, shp) in enumerate(zip(param_names(spec), spec.operands, spec.operand_shapes)):
        origin = tuple(Const(0) for _ in shp)
        mem = Buffer(n, (buffer_shapes or {}).get(i, shp), t, False, n, align=t.dtype.nbytes)
        if not em.is_register(t.level):
            views.append(View(mem, origin, shp, t))
            continue
        reg = Buffer(f"{n}_r", shp, t, True, n)
        em.used.add(reg.name)
        vol = reg.volume
        if t.vector_size:
            vt = em.ct.vector_type(str(t.dtype), t.vector_size * t.dtype.nbytes)
            regs = [f"{reg.name}_{r}" for r in range(vol // t.vector_size)]
            pre.append(f"{vt} {', '.join(regs)};")
            if i in inputs_of(spec):
                pre += [f"memcpy(&{r}, {n} + {k * t.vector_size}, sizeof {r});" for k, r in enumerate(regs)]
            if i in spec.outputs:
                post += [f"memcpy({n} + {k * t.vector_size}, &{r}, sizeof {r});" for k, r in enumerate(regs)]
        else:
            regs = [reg.name] if vol == 1 else [f"{reg.name}_{r}" for r in range(vol)]
            pre.append(f"{t.dtype.c_type} {', '.join(regs)};")
            if i in inputs_of(spec):
                pre += [f"{r} = {n}[{k}];" for k, r in enumerate(regs)]
            if i in spec.outputs:
                post += [f"{n}[{k}] = {r};" for k, r in enumerate(regs)]
        views.append(View(reg, origin, shp, t))
    return views, pre, post


class Emitter:
    def __init__(self, ct: CTarget, family_of: Callable[[Impl], Any]):
        self.ct = ct
        self.family_of = family_of  # IR node -> the rewrite family that writes its C
        self.lines: list[str] = []
        self.depth = 1
        self.env: dict[str, VarRange] = {}
        self.used: set[str] = set()
        self.headers: list[str] = []  # tgt_c_kernel_header/2 of the kernels emitted
        self.helpers: list[str] = []  # tgt_c_kernel_helper/2 of the kernels emitted
        self.uses_omp = False
        pf = prefetch.mode()  # MORELLO_ASP_PREFETCH, read (and checked) once per function
        self.prefetch_on, self.prefetch_split = pf != "off", pf == "on"
        self.prefetches: list = []  # cache moves' next tiles, for the loop nest inside them (prefetch.py)
        self.parallel_vars: set[str] = set()  # counters of OpenMP loops (their next trip is another thread's)
        self.loop_bytes: dict[str, int] = {}  # loop counter -> bytes of the operands its loop spans

    # ---------------------------------------------------------------- helpers
    def out(self, text: str = ""):
        self.lines.append("    " * self.depth + text if text else "")

    def fresh(self, base: str) -> str:
        n, name = 0, base
        while name in self.used:
            n += 1
            name = f"{base}{n}"
        self.used.add(name)
        return name

    def fresh_index(self, dim: str) -> str:
        """Loop variables: m0, m1, ... (d1_0, d1_1, ... for numbered dimensions)."""
        base = dim + "_" if dim[-1].isdigit() else dim
        n = 0
        while f"{base}{n}" in self.used:
            n += 1
        self.used.add(f"{base}{n}")
        return f"{base}{n}"

    def is_register(self, level: str) -> bool:
        return self.ct.target.level(level).kind == "register"

    def offset(self, v: View, coord) -> Expr:
        pos = v.position(coord)
        return simplify(v.buf.ts.layout.buffer_expr(v.buf.shape, pos), self.env)

    def lvalue(self, v: View, coord) -> str:
        off = self.offset(v, coord)
        b = v.buf
        if not b.in_registers:
            return f"{b.name}[{_bare(off)}]"
        if not isinstance(off, Const):
            raise CodegenError(
                f"register buffer {b.name} indexed by a non-constant ({off.to_c()}); loops over registers must be "
                "unrolled"
            )
        if b.ts.vector_size:
            vs = b.ts.vector_size
            return f"{b.name}_{off.value // vs}[{off.value % vs}]"  # GNU vector subscript
        return b.name if b.volume == 1 else f"{b.name}_{off.value}"

    def aligned(self, v: View, nbytes: int, coord=None) -> bool:
        """True if the view's first value (or its value at `coord`) is provably
        `nbytes`-aligned for every value of the enclosing loop variables (Buffer.align:
        the program's own buffers are allocated ALIGN-aligned, its parameters are not
        assumed aligned). This is decided here rather than trusted from the spec, since a
        cache move only renames; verify proves each decision it takes (rely_aligned)."""
        if v.buf.in_registers:
            return True
        size = v.buf.ts.dtype.nbytes
        off = self.offset(v, (0,) * len(v.shape) if coord is None else coord)
        terms = off.terms if isinstance(off, Add) else (off,)
        for t in terms:
            coef, atom = (t.coef, t.term) if isinstance(t, Mul) else (1, t)
            if isinstance(atom, Const):
                mult = atom.value
            elif isinstance(atom, Var) and atom.name in self.env:
                mult = self.env[atom.name].step
            else:
                return False
            if (coef * mult * size) % nbytes:
                return False
        return nbytes <= v.buf.align

    def rely_aligned(self, what: str, v: View, nbytes: int, coords: list[tuple[int, ...]]) -> None:
        """Called for each template line emitted in its aligned variant (`X=aligned`):
        `what` names the kernel and operand, the values at `coords` of view `v` start the
        accesses the line makes, and the C relies on each being `nbytes`-aligned. Nothing
        here (aligned() decided it); solver/proofs/verify.py proves it with z3."""

    def rely_vector(self, what: str, v: View, runs: list[list[tuple[int, ...]]], width: int) -> None:
        """Called for each operand whose vectors a template line takes (`{X_v}`, in an
        `@each` line): the C loads or stores vector j of view `v` as `width` values from
        the address of its first (or takes it as one register variable), so it relies on
        the values at the coordinates runs[j], in order, lying at consecutive offsets of the
        buffer (runs[j] is short where the view ends first). Nothing here: the kernels'
        rules require contiguous operands; solver/proofs/verify.py proves it with z3."""

    def pointer(self, v: View, coord) -> str:
        if v.buf.in_registers:
            raise CodegenError(f"a kernel asked for a pointer into register buffer {v.buf.name}")
        off = self.offset(v, coord)
        return v.buf.name if off == Const(0) else f"({v.buf.name} + {_bare(off)})"

    def vector(self, v: View, j: int, vs: int) -> str:
        """The j-th vector of a view (in the view's layout order): register or pointer."""
        coord = position_coord(order_layout(v), v.shape, j * vs)
        if not v.buf.in_registers:
            return self.pointer(v, coord)
        off = self.offset(v, coord)
        if not isinstance(off, Const) or off.value % vs:
            raise CodegenError(f"vector {j} of {v.buf.name} does not start a register (offset {off.to_c()})")
        return f"{v.buf.name}_{off.value // vs}"

    # ---------------------------------------------------------------- nodes
    def emit(self, node: Impl, views: list[View]):
        spec = node.spec
        if len(views) != len(spec.operands):
            raise CodegenError(f"{spec.short()} got {len(views)} operands")
        views = [replace(v, ts=t) for v, t in zip(views, spec.operands)]
        self.visit(node, views)
        if isinstance(node, SpecHole):
            raise CodegenError(f"the program is incomplete: open spec {spec} has no implementation")
        try:
            fam = self.family_of(node)
        except TypeError:
            raise CodegenError(f"no C for IR node {type(node).__name__}") from None
        fam.emit_c(node, views, self)

    def visit(self, node: Impl, views: list[View]) -> None:
        """Called with every node emitted and the views of its operands, the loop
        counters in self.env (solver/proofs/verify.py proves what each view claims); nothing
        by default."""

    def open_buffer(
        self, base: str, shape: tuple[int, ...], ts: TensorSpec, root: str, source: str = ""
    ) -> tuple[Buffer, bool]:
        """Open a C scope and declare a new buffer for a `shape` tensor in `ts` (register
        variables, a stack array, or heap memory for large ones), with a comment naming
        the buffer it copies (`source`); (buffer, on the heap). Close it with close_buffer."""
        level = ts.level
        name = self.fresh(self.ct.target.prefix(level) + base)
        buf = Buffer(name, shape, ts, self.is_register(level), root)
        ct = ts.dtype.c_type
        self.out("{")
        self.depth += 1
        self.out(f"/* {name}: {'x'.join(map(str, shape))} {ts.text()}{' <- ' + source if source else ''} */")
        heap = False
        if buf.in_registers and ts.vector_size:
            vt = self.ct.vector_type(str(ts.dtype), ts.vector_size * ts.dtype.nbytes)
            regs = [f"{name}_{r}" for r in range(buf.volume // ts.vector_size)]
            for chunk in range(0, len(regs), 8):
                self.out(f"{vt} {', '.join(regs[chunk : chunk + 8])};")
        elif buf.in_registers:
            regs = [name] if buf.volume == 1 else [f"{name}_{r}" for r in range(buf.volume)]
            self.out(f"{ct} {', '.join(regs)};")
        else:
            nbytes = buf.volume * ts.dtype.nbytes
            if nbytes <= STACK_BYTES:
                self.out(f"{ct} {name}[{buf.volume}] __attribute__((aligned({ALIGN})));")
            else:
                heap = True
                rounded = -(-nbytes // ALIGN) * ALIGN
                self.out(f"{ct} *restrict {name} = ({ct} *)aligned_alloc({ALIGN}, {rounded});")
        return buf, heap

    def close_buffer(self, buf: Buffer, heap: bool) -> None:
        if heap:
            self.out(f"free({buf.name});")
        self.depth -= 1
        self.out("}")

    def check_contiguous(self, node: KernelApp, views: list[View]):
        """Kernels rely on the contiguity their spec claims (memset, vector loads); refuse
        to emit one whose memory view is not actually dense, rather than emit wrong C."""
        for i, v in enumerate(views):
            if v.buf.in_registers or not v.ts.is_contiguous() or prod(v.shape) == 1:
                continue
            off = self.value_offsets(v)
            if off.max() - off.min() + 1 != off.size:
                raise CodegenError(
                    f"kernel {node.kernel} on {node.spec.short()}: operand {param_names(node.spec)[i]} is contiguous "
                    f"in its spec but its view of {v.buf.name} is not (a rule gave it the wrong contiguousness)"
                )

    def check_strides(self, node: KernelApp, views: list[View]):
        """The rules decide cache residency from the stride exponent a spec claims
        (rules/aliasing.lp); refuse a claim the memory view contradicts."""
        for i, v in enumerate(views):
            why = self.stride_mismatch(v, node.spec.target.line_bytes)
            if why:
                raise CodegenError(
                    f"kernel {node.kernel} on {node.spec.short()}: operand {param_names(node.spec)[i]} {why} "
                    "(a rule gave it the wrong stride)"
                )

    def stride_mismatch(self, v: View, line_bytes: int, at: dict[str, int] | None = None) -> str | None:
        """Why view `v`'s stride claim (TensorSpec.stride) is wrong at the loops' first
        iteration (or with the loop counters in `at`), or None if it holds or claims
        nothing: the distance between its first two runs must be 2^P times an odd number
        of bytes (or, for P at the line size of `line_bytes`, a smaller power of two: the
        rules clamp there)."""
        import numpy as np  # heavy: loaded when C is written, not with the package

        p = v.ts.stride
        if p is None or v.buf.in_registers or v.ts.is_contiguous() or prod(v.shape) == 1:
            return None
        off = np.unique(self.value_offsets(v, at))
        gaps = np.nonzero(np.diff(off) != 1)[0]
        if not len(gaps):
            return None
        step = int(off[gaps[0] + 1] - off[0]) * v.ts.dtype.nbytes
        exp = (step & -step).bit_length() - 1
        line_exp = line_bytes.bit_length() - 1
        if exp != p and not (p == line_exp and exp < p):
            return f"claims stride exponent {p} but its runs in {v.buf.name} are {step} bytes apart"
        return None

    def value_offsets(self, v: View, at: dict[str, int] | None = None) -> np.ndarray:
        """The buffer offsets of every value of view `v` at the loops' first iteration,
        but for the loop counters given values in `at`."""
        import numpy as np  # heavy: loaded when C is written, not with the package

        names = [f"x{d}" for d in range(len(v.shape))]
        grid = np.indices(v.shape).reshape(len(v.shape), -1)
        env: dict[str, Any] = {n: g for n, g in zip(names, grid)}
        env.update({n: r.lo for n, r in self.env.items()})
        env.update(at or {})
        pos = v.position([Var(n) for n in names])
        return np.asarray(v.buf.ts.layout.buffer_expr(v.buf.shape, pos).eval(env)).reshape(-1)

    def kernel(self, node: KernelApp, views: list[View]):
        spec = node.spec
        self.check_contiguous(node, views)
        self.check_strides(node, views)
        dtype = str(spec.operands[spec.output].dtype)
        text = self.ct.template(node.kernel, dtype)
        for used, table in ((self.headers, self.ct.kernel_headers), (self.helpers, self.ct.kernel_helpers)):
            used += [h for h in table.get(snake(node.kernel), ()) if h not in used]
        if "{point}" in text:
            text = text.replace("{point}", point_statement(spec, self.ct))
        ctx = KernelContext(self, spec, views, node.kernel)
        for line in expand_template(text, ctx):
            self.out(line)


def point_statement(spec: Spec, ct) -> str:
    """The kind's semantics at one point as a C template (operands as `{name}`), with
    the target's operators: what the generic scalar kernel `point` runs. A one-point
    reduction combines nothing, so the value is the result; an accumulating kind
    combines it with the output's old value."""
    k = spec.k
    names = param_names(spec)
    if k.merged:
        return _merge_statement(spec, ct, names)
    lines = []
    for o in k.outputs:
        dt = str(spec.operands[o].dtype)
        value = _lower(k.value(o), names, dt, ct)
        comb = k.combiner(o)
        if k.is_accum and comb:
            value = _c_op(ct, comb, dt, ["{" + names[o] + "}", value])
        lines.append("{" + names[o] + "} = " + value + ";")
    return "\n".join(lines)


def _merge_statement(spec: Spec, ct, names: list[str]) -> str:
    """An accumulating kind with merges (kind_merge/3) at one point: every output's
    value (new) and contents (old) are read before any output is written."""
    k = spec.k
    lines = ["{"]
    for o in k.outputs:
        ts = spec.operands[o]
        if ts.dtype.c_type not in ("float", "double"):
            raise CodegenError(f"{spec.short()}: the point kernel merges only float outputs, not {ts.dtype}")
        dt = str(ts.dtype)
        lines.append(f"  const {ts.dtype.c_type} pm_new{o} = {_lower(k.value(o), names, dt, ct)};")
        lines.append(f"  const {ts.dtype.c_type} pm_old{o} = {{{names[o]}}};")
    for o in k.outputs:
        dt = str(spec.operands[o].dtype)
        m, c = k.merge(o), k.combiner(o)
        if m is not None:
            value = _lower(m, names, dt, ct)
        elif c:
            value = _c_op(ct, c, dt, [f"pm_old{o}", f"pm_new{o}"])
        else:
            value = f"pm_new{o}"
        lines.append("  {" + names[o] + "} = " + value + ";")
    return "\n".join(lines + ["}"])


def _lower(e, names: list[str], dt: str, ct) -> str:
    if e[0] == "op":
        return "{" + names[e[1]] + "}"
    if e[0] in ("old", "new"):  # a merge's operands (_merge_statement)
        return f"pm_{e[0]}{e[1]}"
    if e[0] == "const":
        return ct.c_const(e[1], dt)
    if e[0] == "red":  # on one point, a combination along a dimension is its one value
        return _lower(e[3], names, dt, ct)
    return _c_op(ct, e[0], dt, [_lower(a, names, dt, ct) for a in e[1:]])


def _c_op(ct, op: str, dt: str, args: list[str]) -> str:
    """The target's C for operator `op` (tgt_c_op/3) with `args` as {0}, {1}."""
    text = ct.c_op(op, dt)
    for i, a in enumerate(args):
        text = text.replace("{" + str(i) + "}", a)
    return text


def _bare(e: Expr) -> str:
    """C text of an index without the outer parentheses Add puts around itself."""
    return " + ".join(t.to_c() for t in e.terms) if isinstance(e, Add) else e.to_c()


def order_layout(v: View):
    """The layout whose order a view's vectors take its values in: the buffer's, but a
    reshaped view's own (its dimensions are not the buffer's)."""
    return v.buf.ts.layout if v.axes is None else v.ts.layout


def position_coord(layout, shape, pos: int) -> tuple[int, ...]:
    """The coordinate of the pos-th value of a `shape` tensor in `layout` order."""
    return _order(layout, tuple(shape))[pos]


_ORDER_CACHE: dict = {}


def _order(layout, shape):
    import numpy as np  # heavy: loaded when C is written, not with the package

    key = (layout, shape)
    if key not in _ORDER_CACHE:
        names = [f"x{i}" for i in range(len(shape))]
        grid = np.indices(shape).reshape(len(shape), -1)
        off = np.broadcast_to(layout.buffer_expr(shape, names).eval(dict(zip(names, grid))), grid.shape[1:])
        _ORDER_CACHE[key] = [tuple(int(x) for x in grid[:, k]) for k in np.argsort(off, kind="stable")]
    return _ORDER_CACHE[key]


# -------------------------------------------------------------------- templates
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_DTYPE_NAMES = frozenset(d.short for d in Dtype)
_TAGGED = re.compile(r"^@([^:]*):\s?(.*)$")
_VECTOR = re.compile(r"\{([A-Za-z][A-Za-z0-9]*)_v\}")  # {X_v}: vector j of operand X


class KernelContext:
    """What a template's placeholders and tags mean for one kernel application."""

    def __init__(self, em: Emitter, spec: Spec, views: list[View], kernel: str):
        self.em, self.spec, self.views, self.kernel = em, spec, views, kernel
        self.names = {n: i for i, n in enumerate(param_names(spec))}
        self.names.update({f"op{i}": i for i in range(len(views))})
        vss = [v.ts.vector_size for v in views if v.ts.vector_size]
        self.vs = vss[0] if vss else None
        vec_ops = [v for v in views if v.ts.vector_size]
        # Vectors are counted in each register operand's own vector size (a u8 x i8 -> i16
        # kernel holds 32 bytes of i8 against 16 i16 lanes); memory operands step by `vs`.
        self.nvec = max((prod(v.shape) // (v.ts.vector_size or 1) for v in vec_ops), default=0) if self.vs else 0
        if not self.vs:  # a vector move: vectors follow the register side
            self.nvec = 0
        self.dtype = spec.operands[spec.output].dtype

    def fail(self, msg: str) -> NoReturn:
        raise CodegenError(f"kernel {self.kernel} on {self.spec.short()}: {msg}")

    def no_vector(self, what: str) -> str:
        """Why a vector placeholder (or an @each line) cannot be expanded here."""
        return (
            f"its C template uses {what}, which needs an operand in vector registers (one with a vector "
            f"size, e.g. (f32, VRF, row_major, v8)), and no operand of this application has one: the kernel's "
            f"rule kernel_applies(S, {snake(self.kernel)}) must require one, or its template must not use {what}"
        )

    def operand(self, name: str) -> View:
        if name not in self.names:
            self.fail(f"template names operand {name!r}; this spec has {', '.join(self.names)}")
        return self.views[self.names[name]]

    def align_bytes(self) -> int:
        """What an `X=aligned` line's accesses are aligned to: a vector's bytes (64 with
        no vector operand)."""
        return self.vs * self.dtype.nbytes if self.vs else 64

    def access_coords(self, v: View, each: bool) -> list[tuple[int, ...]]:
        """Where a line's accesses of memory view `v` start: in an `@each` line, the
        first value of each vector (what {X_v} points to); else its first value."""
        zero = (0,) * len(v.shape)
        if not each or not self.vs or v.buf.in_registers:
            return [zero]
        return [run[0] for run in self.vector_runs(v)[1] if run] or [zero]

    def vector_runs(self, v: View) -> tuple[int, list[list[tuple[int, ...]]]]:
        """(width, runs): the coordinates of the values an `@each` line's {X_v} takes as
        vector j of view `v`, in order (Emitter.vector's); a run is short where the view
        ends before it."""
        layout = order_layout(v)
        width = v.ts.vector_size or self.vs or 1
        vol = prod(v.shape)
        return width, [
            [position_coord(layout, v.shape, p) for p in range(j * width, min((j + 1) * width, vol))]
            for j in range(self.nvec)
        ]

    def tag(self, t: str, each: bool = False) -> bool:
        if t == "each":
            return True
        if "=" not in t:
            self.fail(f"unknown template tag {t!r}")
        x, want = t.split("=", 1)
        v = self.operand(x)
        if want in ("reg", "mem"):
            return v.buf.in_registers == (want == "reg")
        if want in ("aligned", "unaligned"):
            # aligned only if every access the line makes is: each vector's, in @each lines
            nbytes = self.align_bytes()
            ok = all(self.em.aligned(v, nbytes, c) for c in self.access_coords(v, each))
            return ok == (want == "aligned")
        if want in _DTYPE_NAMES:  # X=f32, X=bf16, ...: the operand's dtype (mixed-precision kernels)
            return v.ts.dtype.short == want
        return v.ts.level.lower() == want.lower()

    def value(self, key: str, j: int | None) -> str:
        em = self.em
        if key == "j":
            if j is None:
                self.fail("{j} outside an @each line")
            return str(j)
        if key in ("nvec", "vs", "vt", "pfx", "bits"):
            if not self.vs:
                self.fail(self.no_vector(f"{{{key}}}"))
            nbytes = self.vs * self.dtype.nbytes
            return {
                "nvec": str(self.nvec),
                "vs": str(self.vs),
                "vt": em.ct.vector_type(str(self.dtype), nbytes),
                "pfx": em.ct.prefix(nbytes),
                "bits": str(nbytes * 8),
            }[key]
        if key == "ct":
            return self.dtype.c_type
        if key.startswith("dim_"):
            dn = self.spec.k.dim_names(len(self.spec.shape))
            if key[4:] in dn:
                return str(self.spec.shape[dn.index(key[4:])])
            self.fail(f"no dimension {key[4:]!r} (dimensions: {', '.join(dn)})")
        x, _, what = key.partition("_") if key.split("_")[0] in self.names else (key, "", "")
        if x not in self.names:
            self.fail(f"unknown placeholder {{{key}}}")
        v = self.operand(x)
        zero = (0,) * len(v.shape)
        if what == "":
            return em.lvalue(v, zero)
        if what == "ptr":
            return em.pointer(v, zero)
        if what == "vol":
            return str(prod(v.shape))
        if what == "bytes":
            return str(prod(v.shape) * v.ts.dtype.nbytes)
        if what == "v":
            if not self.vs:
                self.fail(self.no_vector(f"{{{key}}}"))
            if j is None:
                self.fail(f"{{{key}}} outside an @each line (one line per vector: `@each: ...`)")
            return em.vector(v, j, v.ts.vector_size or self.vs)
        self.fail(f"unknown placeholder {{{key}}}")


def expand_template(text: str, ctx: KernelContext) -> list[str]:
    out = []
    for line in text.split("\n"):
        m = _TAGGED.match(line)
        tags, code = (m.group(1).split(), m.group(2)) if m else ([], line)
        each = "each" in tags
        if not all(ctx.tag(t, each) for t in tags):
            continue
        for t in tags:  # what the line's aligned variant relies on, for verify to prove
            x, _, want = t.partition("=")
            if want == "aligned":
                v = ctx.operand(x)
                if not v.buf.in_registers:
                    what = f"{ctx.spec.short()}: kernel {ctx.kernel}'s aligned access to {x} {v.ts.text()}"
                    ctx.em.rely_aligned(what, v, ctx.align_bytes(), ctx.access_coords(v, each))
        if each and ctx.nvec:  # what the line's vector loads and stores ({X_v}) rely on
            for x in dict.fromkeys(m.group(1) for m in _VECTOR.finditer(code) if m.group(1) in ctx.names):
                v = ctx.operand(x)
                width, runs = ctx.vector_runs(v)
                ctx.em.rely_vector(
                    f"{ctx.spec.short()}: kernel {ctx.kernel}'s vectors of {x} {v.ts.text()}", v, runs, width
                )
        reps = range(ctx.nvec) if "each" in tags else [None]
        if "each" in tags and not ctx.nvec:
            ctx.fail(ctx.no_vector("an @each line"))
        for j in reps:
            out.append(_PLACEHOLDER.sub(lambda mm, j=j: ctx.value(mm.group(1), j), code))
    return out
