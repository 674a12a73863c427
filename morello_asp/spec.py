"""Specs and tensor specs (paper 2.2), their text form, validation and canonical form."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from math import prod
from typing import TYPE_CHECKING, NoReturn

from morello_asp.default_table import DEFAULT_TABLE
from morello_asp.dtypes import Dtype
from morello_asp.errors import SpecError, SpecSyntaxError, SpecTypeError
from morello_asp.kinds import kind as get_kind
from morello_asp.kinds import load as load_kinds
from morello_asp.kinds import summary as kinds_summary
from morello_asp.kinds import unknown_kind_hint
from morello_asp.kinds.compose import needs_rank
from morello_asp.layout import Layout, LayoutError
from morello_asp.naming import compose_name, is_compose_name, parse_compose_name
from morello_asp.ports import port
from morello_asp.schedulable import Schedulable
from morello_asp.target import Target, as_target, get_target, rule_file

if TYPE_CHECKING:
    from morello_asp.kinds import Kind


@dataclass(frozen=True)
class TensorSpec:
    dtype: Dtype
    level: str
    layout: Layout
    aligned: bool = True
    contig: int | None = None  # None: fully contiguous (filled in by canonical())
    vector_size: int | None = None
    # A view that is not contiguous: log2 of the largest power of two dividing the byte
    # distance between its runs (the step of the first physical dim it does not cover
    # whole), as the rules compute it (clamped to the target's cache geometry). It tells
    # the rules whether the view's rows fall into the same cache sets. None: contiguous,
    # or unknown, which the rules take as the worst (every row in the same sets).
    stride: int | None = None

    def canonical(self, shape, target: Target) -> TensorSpec:
        """Equal tensors get equal specs: contiguousness defaults to full, a single value
        is contiguous and row-major, register tensors are always aligned."""
        lay = self.layout
        full = lay.full_contiguity()
        contig = full if self.contig is None else min(self.contig, full)
        aligned = self.aligned
        if not lay.is_packed:
            # Dimensions of size one do not affect placement: a layout whose other
            # dimensions run in increasing order is row-major for this shape.
            order = [p.dim for p in lay.pdims if shape[p.dim] > 1]
            if order == sorted(order) and lay != Layout.row_major(len(shape)):
                adjacent = {p.dim for p in lay.pdims[len(lay.pdims) - contig :]} if contig else set()
                lay = Layout.row_major(len(shape))
                contig = 0
                for p in reversed(lay.pdims):
                    if p.dim not in adjacent and shape[p.dim] > 1:
                        break
                    contig += 1
                if prod(shape) == 1:
                    contig = lay.full_contiguity()
        if target.is_register(self.level):
            aligned = True
        # Registers have no cache sets: a stride there would only split spec classes.
        stride = self.stride if contig < lay.full_contiguity() and not target.is_register(self.level) else None
        return TensorSpec(self.dtype, self.level, lay, aligned, contig, self.vector_size, stride)

    def __hash__(self) -> int:
        # Specs are hashed constantly by the search's tables: compute once.
        try:
            return self._hash  # type: ignore[attr-defined]  # set below, once
        except AttributeError:
            pass
        h = hash((self.dtype, self.level, self.layout, self.aligned, self.contig, self.vector_size, self.stride))
        object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self):  # the cached hash is per process (string hashing is salted)
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    def is_contiguous(self) -> bool:
        return self.contig is None or self.contig >= self.layout.full_contiguity()

    def text(self) -> str:
        parts = [str(self.dtype), self.level, str(self.layout)]
        if not self.aligned:
            parts.append("ua")
        if self.contig is not None and self.contig < self.layout.full_contiguity():
            parts.append(f"c{self.contig}")
        if self.vector_size:
            parts.append(f"v{self.vector_size}")
        if self.stride is not None:
            parts.append(f"s{self.stride}")
        return "(" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class Spec(Schedulable):
    """What to compute (paper 2.2): a kind over a shape, one TensorSpec per operand, the
    serial-only flag and per-level memory limits, for a target (which owns the levels;
    it takes no part in equality, since a search never mixes targets)."""

    kind: str
    shape: tuple[int, ...]
    operands: tuple[TensorSpec, ...]
    serial: bool = True
    limits: tuple[int, ...] = ()
    target: Target = field(default_factory=get_target, compare=False, repr=False)

    def __hash__(self) -> int:
        try:
            return self._hash  # type: ignore[attr-defined]  # set below, once
        except AttributeError:
            pass
        h = hash((self.kind, self.shape, self.operands, self.serial, self.limits))
        object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self):  # cached hash, class and coordinates are per process
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    # ---- the search's fast paths ---------------------------------------------------
    # The DP builds millions of specs that differ from a known one only in their limits;
    # dataclasses.replace and re-hashing dominated its profile.
    @property
    def without_limits(self) -> Spec:
        """The spec class (limits dropped), computed once per object."""
        c = self.__dict__.get("_class")
        if c is None:
            c = self if not self.limits else replace(self, limits=())
            object.__setattr__(self, "_class", c)
        return c

    def with_limits(self, limits: tuple[int, ...]) -> Spec:
        s = object.__new__(Spec)
        d = s.__dict__
        d["kind"], d["shape"], d["operands"], d["serial"], d["limits"], d["target"] = (
            self.kind,
            self.shape,
            self.operands,
            self.serial,
            limits,
            self.target,
        )
        d["_class"] = self.without_limits
        return s

    # ---- derived facts -------------------------------------------------------------
    @property
    def k(self) -> Kind:
        return get_kind(self.kind)

    @property
    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        return self.k.operand_shapes(self.shape)

    @property
    def output(self) -> int:
        """The (first) output operand."""
        return self.k.output

    @property
    def outputs(self) -> tuple[int, ...]:
        return self.k.outputs

    @property
    def volume(self) -> int:
        return prod(self.shape)

    def with_operand(self, i: int, ts: TensorSpec) -> Spec:
        ops = list(self.operands)
        ops[i] = ts
        return replace(self, operands=tuple(ops)).canonical()

    def canonical(self) -> Spec:
        ops = tuple(t.canonical(s, self.target) for t, s in zip(self.operands, self.operand_shapes))
        return replace(self, operands=ops)

    def validate(self, target: Target | None = None, buffers: bool = True) -> Spec:
        """Raise SpecError unless the spec is well formed; with `buffers`, its operands
        are whole buffers (a program's arguments), so their layouts may not pad them
        (a sub-spec's operands are views into larger buffers, where a pack may exceed
        the view)."""
        target = target or self.target
        k = self.k
        if k.rank is not None and len(self.shape) != k.rank:
            raise SpecError(
                f"{self.kind} takes {k.rank} dimensions ({'x'.join(k.dim_names(k.rank))}), got {len(self.shape)}"
            )
        if k.rank is None and len(self.shape) < k.min_rank:
            raise SpecError(f"{self.kind} needs at least {k.min_rank} dimensions, got {len(self.shape)}")
        if any(d < 1 for d in self.shape):
            raise SpecError(f"dimensions must be positive: {self.shape}")
        if len(self.operands) != k.arity(len(self.shape)):
            raise SpecError(f"{self.kind} takes {k.arity(len(self.shape))} tensor specs, got {len(self.operands)}")
        if len(self.limits) != len(target.levels):
            raise SpecError(
                f"memory limits need {len(target.levels)} entries ({', '.join(target.level_names)}), got "
                f"{len(self.limits)}"
            )
        for lim, lv in zip(self.limits, target.levels):
            if lim < 0:
                raise SpecError(f"memory limit for {lv.name} is negative")
        for i, (t, shp) in enumerate(zip(self.operands, self.operand_shapes)):
            target.level(t.level)
            try:
                t.layout.validate(len(shp))
            except LayoutError as e:
                raise SpecError(f"operand {i}: {e}") from None
            if buffers and not t.layout.buffer_ok(shp):
                raise SpecError(
                    f"operand {i}: layout {t.layout} does not fit shape {'x'.join(map(str, shp))}: "
                    "a pack must divide its dimension (a padded buffer is not supported)"
                )
            vol = prod(shp)
            if target.holds_vectors(t.level):
                if not t.vector_size:
                    raise SpecError(f"operand {i} is in {t.level} and needs a vector size (e.g. v8)")
                if t.vector_size * t.dtype.nbytes not in target.vector_types:
                    raise SpecError(
                        f"operand {i}: v{t.vector_size} of {t.dtype} is {t.vector_size * t.dtype.nbytes} bytes; "
                        f"vector registers hold {sorted(target.vector_types)} bytes"
                    )
                if vol % t.vector_size:
                    raise SpecError(f"operand {i}: vector size {t.vector_size} does not divide its volume {vol}")
            elif t.vector_size:
                vl = "/".join(lv.name for lv in target.vector_levels) or "a vector register level"
                raise SpecError(f"operand {i}: a vector size is only meaningful in {vl}, not {t.level}")
        return self

    def _program(self) -> Spec:
        return self

    def synthesize(self, db=DEFAULT_TABLE, rules=(), progress=None, guide: str | None = None):
        """The optimal program for this spec on its target (morello_asp.synthesize)."""
        return port("synthesize")(self, db=db, rules=rules, progress=progress, guide=guide)

    # ---- text ----------------------------------------------------------------------
    def text(self) -> str:
        if is_compose_name(self.kind):
            return _compose_text(self)
        dims = "x".join(str(d) for d in self.shape)
        ops = ", ".join(t.text() for t in self.operands)
        serial = ", serial" if self.serial else ""
        lims = ", ".join(str(x) for x in self.limits)
        return f"({self.kind}({dims}, {ops}{serial}), [{lims}])"

    def short(self) -> str:
        """Compact form for program listings: kind, shape and operand levels."""
        dims = "x".join(str(d) for d in self.shape)
        return f"{self.kind}({dims}, {', '.join(t.level for t in self.operands)})"

    __str__ = text


# ----------------------------------------------------------------------------- parsing

_TOKEN = re.compile(r"\s*(?:(?P<num>[0-9]+)|(?P<word>[A-Za-z_][A-Za-z_0-9]*)|(?P<punct>[(),\[\]×x]))")
# The logic files compute in clingo's 32-bit integers: every number of a spec (a
# dimension, a limit, a vector size) and every operand's size in bytes must fit.
INT_MAX = 2**31 - 1


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, expected: str) -> NoReturn:
        snippet = self.text[self.pos : self.pos + 20]
        found = repr(snippet) if snippet else "the end of the text"
        raise SpecSyntaxError(f"at column {self.pos + 1}: expected {expected}, found {found}")

    def skip_ws(self):
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self, s: str) -> bool:
        self.skip_ws()
        return self.text.startswith(s, self.pos)

    def eat(self, s: str):
        if not self.peek(s):
            self.error(repr(s))
        self.pos += len(s)

    def maybe(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def word(self, what="a name") -> str:
        self.skip_ws()
        m = re.compile(r"[A-Za-z_][A-Za-z_0-9]*").match(self.text, self.pos)
        if not m:
            self.error(what)
        self.pos = m.end()
        return m.group(0)

    def number(self, what="a number", lo: int = 0) -> int:
        """A whole number in ASCII digits (str.isdigit and int() also take other
        scripts' digits), from `lo` to INT_MAX."""
        self.skip_ws()
        m = re.compile(r"[0-9]+").match(self.text, self.pos)
        if not m:
            self.error(what)
        v = int(m.group(0))
        if v < lo:
            self.error(f"{what} of at least {lo}")
        if v > INT_MAX:
            self.error(f"{what} of at most {INT_MAX} (2^31-1: the logic files compute in 32-bit integers)")
        self.pos = m.end()
        return v

    def limits_tail(self, tgt: Target, full: bool) -> tuple[int, ...]:
        """The end of a spec: in the full form `, [limits])` (limits optional), then
        nothing; the target's whole memory when no limits are given."""
        limits = tgt.max_limits()
        if full:
            if self.maybe(","):
                self.eat("[")
                given = [self.number("a memory limit")]
                while self.maybe(","):
                    given.append(self.number("a memory limit"))
                self.eat("]")
                limits = tuple(given)
            self.eat(")")
        self.skip_ws()
        if self.pos != len(self.text):
            self.error("end of spec")
        return tuple(limits)

    def dims(self) -> tuple[int, ...]:
        out = [self.number("a dimension size", 1)]
        while True:
            self.skip_ws()
            if self.text.startswith("x", self.pos) or self.text.startswith("×", self.pos):
                self.pos += 1
                out.append(self.number("a dimension size after 'x'", 1))
            else:
                return tuple(out)

    def layout_text(self) -> str:
        self.skip_ws()
        if self.peek("["):
            end = self.text.find("]", self.pos)
            if end < 0:
                self.error("']' closing the layout")
            s = self.text[self.pos : end + 1]
            self.pos = end + 1
            return s
        return self.word("a layout (row_major, col_major or [..])")

    def tensor_spec(self, rank: int) -> TensorSpec:
        self.eat("(")
        return self.tensor_fields(rank)

    def tensor_fields(self, rank: int, default_level: str | None = None) -> TensorSpec:
        """A tensor spec after its "(": dtype, level, layout, flags, ")". With a
        `default_level`, `dtype)` alone means that level, row-major."""
        start = self.pos
        dt = self.word("a dtype")
        try:
            dtype = Dtype.parse(dt)
        except ValueError:
            self.pos = start
            self.error(f"a dtype (one of {Dtype.choices()})")
        if default_level is not None and self.maybe(")"):
            return TensorSpec(dtype, default_level, Layout.row_major(rank))
        self.eat(",")
        level = self.word("a memory level").upper()
        self.eat(",")
        lpos = self.pos
        ltext = self.layout_text()
        try:
            layout = Layout.parse(ltext, rank)
        except LayoutError as e:
            self.pos = lpos
            self.error(f"a layout for a rank-{rank} tensor ({e})")
        aligned, contig, vsize, stride = True, None, None, None
        while self.maybe(","):
            fpos = self.pos
            flag = self.word("ua, cN, vN or sN")
            if flag == "ua":
                aligned = False
            elif re.fullmatch(r"c[0-9]+", flag):
                contig = int(flag[1:])
                full = layout.full_contiguity()
                if contig > full:
                    self.pos = fpos
                    self.error(
                        f"cN with N at most {full} (contiguity counts the physical dimensions of layout "
                        f"{layout}, which has {full})"
                    )
            elif re.fullmatch(r"v[0-9]+", flag):
                vsize = int(flag[1:])
                if not 1 <= vsize <= INT_MAX:
                    self.pos = fpos
                    self.error(f"vN with N from 1 to {INT_MAX}")
            elif re.fullmatch(r"s[0-9]+", flag):
                stride = int(flag[1:])
                if stride > 62:
                    self.pos = fpos
                    self.error("sN with N from 0 to 62 (log2 of the largest power of two dividing the stride in bytes)")
            else:
                self.pos = fpos
                self.error("ua, cN, vN or sN")
        self.eat(")")
        return TensorSpec(dtype, level, layout, aligned, contig, vsize, stride)


def tensor_text(ts: TensorSpec, shape) -> str:
    """A buffer's or view's shape, dtype, level, and layout and vector size when notable."""
    s = "×".join(map(str, shape))
    extra = [] if str(ts.layout) == "row_major" else [str(ts.layout)]
    if ts.vector_size:
        extra.append(f"v{ts.vector_size}")
    return f"({s}, {ts.dtype}, {ts.level}{''.join(', ' + e for e in extra)})"


def parse_spec(text: str, target: Target | str | None = None, buffers: bool = True, rules=()) -> Spec:
    """Parse the paper's spec syntax, or the sugar `Kind(MxKxN, dtype)`.

    Sugar puts every tensor in GL, row-major, serial, with the target's full memory.
    `rules`: logic files that may declare more kinds (encodings/kinds/declare.lp).
    """
    _check_text(text, "parse_spec")
    if rules:
        load_kinds(rule_file(r) for r in rules)
    tgt = as_target(target)
    p = _Parser(text)
    full = p.maybe("(")
    kname = p.word("a spec kind")
    if kname == "Compose":  # Morello's Compose((Head, ..., Innermost), [operands, out=...])
        spec = _parse_compose(p, tgt, full)
        spec.validate(tgt, buffers)
        _check_sizes(spec)
        return spec.canonical()
    try:
        k = get_kind(kname)
    except ValueError:
        hint = unknown_kind_hint(kname)
        if hint:
            raise SpecSyntaxError(f"unknown spec kind {kname!r}: {hint}") from None
        p.pos = 0
        p.error(f"a spec kind (one of {kinds_summary()})")
    p.eat("(")
    shape = p.dims()
    if k.rank is not None and k.defaults and len(shape) == k.rank - len(k.defaults):
        # sugar: leave out the dimensions the declaration gives defaults (Matmul's batch)
        rest = iter(shape)
        fixed = dict(k.defaults)
        shape = tuple(fixed[d] if d in fixed else next(rest) for d in range(k.rank))
    rank_for = k.access(len(shape))
    ops: list[TensorSpec] = []
    serial = True
    p.eat(",")
    p.skip_ws()
    if not p.peek("("):
        start = p.pos
        dt = p.word("a dtype or a tensor spec")
        try:
            dtype = Dtype.parse(dt)
        except ValueError:
            p.pos = start
            p.error(f"a dtype (one of {Dtype.choices()}) or a tensor spec")
        ops = [TensorSpec(dtype, tgt.memory_level.name, Layout.row_major(len(d))) for d in rank_for]
        if p.maybe(","):
            flag = p.word("serial or parallel")
            if flag not in ("serial", "parallel"):
                p.error("serial or parallel")
            serial = flag == "serial"
        p.eat(")")
    else:
        serial = False
        i = 0
        while True:
            if p.peek("("):
                if i >= len(rank_for):
                    p.error(f"')' ({kname} takes {len(rank_for)} tensor specs)")
                ops.append(p.tensor_spec(len(rank_for[i])))
                i += 1
            else:
                w = p.word("a tensor spec or 'serial'")
                if w != "serial":
                    p.error("'serial'")
                serial = True
            if not p.maybe(","):
                break
        p.eat(")")
    limits = p.limits_tail(tgt, full)
    spec = Spec(kname, tuple(shape), tuple(ops), serial, tuple(limits), tgt)
    spec.validate(tgt, buffers)
    _check_sizes(spec)
    return spec.canonical()


def _check_text(text, fn: str) -> None:
    if not isinstance(text, str):
        raise SpecTypeError(f"{fn} expects spec text (a str), got {type(text).__name__}: {text!r:.60}")


def _check_sizes(spec: Spec) -> None:
    """Every operand must fit clingo's 32-bit integers in bytes (the logic files compute
    buffer sizes from volumes)."""
    for i, (t, shp) in enumerate(zip(spec.operands, spec.operand_shapes)):
        nbytes = prod(shp) * t.dtype.nbytes
        if nbytes > INT_MAX:
            raise SpecError(
                f"operand {i} ({'x'.join(map(str, shp))} {t.dtype}) takes {nbytes} bytes; the logic files "
                f"compute in 32-bit integers, so an operand may take at most {INT_MAX} bytes (2 GiB)"
            )


def parse_tensor_spec(text: str, rank: int) -> TensorSpec:
    """Parse one tensor spec, e.g. `(f32, VRF, row_major, v8)`, for a rank-`rank` tensor."""
    _check_text(text, "parse_tensor_spec")
    p = _Parser(text)
    ts = p.tensor_spec(rank)
    p.skip_ws()
    if p.pos != len(p.text):
        p.error("end of tensor spec")
    return ts


# ---------------------------------------------------------------- Compose text
# The text form of Compose specs, as Morello prints them (spec.rs, `Display for
# LogicalSpec`): the components head first, then the operands with their shapes, the
# output last as `out=...`:
#
#     (Compose((Softmax2, Matmul), [(1x8x4, f32, GL, row_major), (1x4x16, f32, GL, row_major),
#               out=(1x8x16, f32, GL, row_major)], serial), [16, 16, 1024, 33554432])
#
# Sugar (like `Matmul(8x8x8, f32)`): bare shapes and one dtype, everything in the
# target's memory level, row-major and serial, the output derived:
#
#     Compose((Softmax2, Matmul), [1x8x4, 1x4x16], f32)
#
# A tensor may also be `(1x8x4, f32)` (memory level, row-major). The Compose's shape (its
# merged dimensions, morello_asp/compose.py) is inferred from the operands' shapes.


def _compose_text(spec: Spec) -> str:
    parsed = parse_compose_name(spec.kind)
    assert parsed is not None
    names, _ = parsed
    shapes = spec.operand_shapes
    ops = []
    for i, (ts, shp) in enumerate(zip(spec.operands, shapes)):
        t = "(" + "x".join(map(str, shp)) + ", " + ts.text()[1:]
        ops.append(("out=" if i == len(shapes) - 1 else "") + t)
    serial = ", serial" if spec.serial else ""
    lims = ", ".join(str(x) for x in spec.limits)
    return f"(Compose(({', '.join(names)}), [{', '.join(ops)}]{serial}), [{lims}])"


def _parse_compose(p: _Parser, tgt: Target, full: bool) -> Spec:
    """After the word `Compose` (and a "(" before it when `full`): the rest of the text."""
    p.eat("(")
    p.eat("(")
    names = [p.word("a component kind")]
    while p.maybe(","):
        names.append(p.word("a component kind"))
    p.eat(")")
    for n in names:
        try:
            get_kind(n)
        except ValueError as e:
            raise SpecError(f"Compose component: {e}") from None
    if len(names) < 2:
        raise SpecError("a Compose has at least two components")
    p.eat(",")
    p.eat("[")
    items: list[tuple[tuple[int, ...], TensorSpec | None, bool]] = []
    while True:
        is_out = False
        save = p.pos
        p.skip_ws()
        if p.text.startswith("out", p.pos):
            p.word()
            p.eat("=")
            is_out = True
        elif p.pos != save:
            p.pos = save
        if p.maybe("("):
            shape = p.dims()
            p.eat(",")
            ts = p.tensor_fields(len(shape), tgt.memory_level.name)
            items.append((shape, ts, is_out))
        else:
            items.append((p.dims(), None, is_out))
        if not p.maybe(","):
            break
    p.eat("]")
    serial = not full  # sugar is serial, like a primitive's
    dtype = None
    while p.maybe(","):
        w = p.word("a dtype, serial or parallel")
        if w in ("serial", "parallel"):
            serial = w == "serial"
            continue
        try:
            dtype = Dtype.parse(w)
        except ValueError:
            p.error(f"a dtype (one of {Dtype.choices()}), serial or parallel")
    p.eat(")")
    limits = p.limits_tail(tgt, full)
    if any(o for *_, o in items[:-1]):
        raise SpecError("out= names the Compose's output, its last operand")
    tss: list[TensorSpec | None] = []
    for item_shape, given, _ in items:
        if given is None:
            if dtype is None:
                raise SpecError("a Compose with bare operand shapes needs a dtype after the list: [..], f32)")
            given = TensorSpec(dtype, tgt.memory_level.name, Layout.row_major(len(item_shape)))
        tss.append(given)
    rank = None
    if needs_rank(names):
        rank = len(items[0][0])
    kname = compose_name(names, rank)
    try:
        k = get_kind(kname)
    except ValueError as e:
        raise SpecError(str(e)) from None
    nops = len(k.params)
    shapes: list[tuple[int, ...] | None] = [sh for sh, _, _ in items]
    if len(items) == nops - 1 and not items[-1][2]:  # the output left out: derived
        shapes.append(None)
        tss.append(None)
    if len(items) != nops and len(shapes) != nops:
        raise SpecError(f"{kname} takes {nops} operands ({', '.join(k.params)}; the last is out=), got {len(items)}")
    dims = _infer_shape(k, shapes)
    want = k.operand_shapes(dims)
    for i, (got, expect) in enumerate(zip(shapes, want)):
        if got is not None and tuple(got) != tuple(expect):
            raise SpecError(
                f"{kname}: operand {i} ({k.params[i]}) has shape {'x'.join(map(str, got))}, but the other "
                f"operands make it {'x'.join(map(str, expect))}"
            )
    if tss[-1] is None:
        first = next(t for t in tss if t is not None)
        tss[-1] = TensorSpec(first.dtype, first.level, Layout.row_major(len(want[-1])))
    ops = tuple(t for t in tss if t is not None)
    return Spec(kname, dims, ops, serial, tuple(limits), tgt)


def _infer_shape(k, shapes) -> tuple[int, ...]:
    """The Compose's dimensions from the operand shapes given (None: not given): each
    dimension from an operand dimension that is exactly it."""
    assert k.rank is not None
    out: list[int | None] = [None] * k.rank
    for i, s in enumerate(shapes):
        if s is None:
            continue
        acc = k.access(k.rank)[i]
        if len(s) != len(acc):
            raise SpecError(f"{k.name}: operand {i} ({k.params[i]}) has rank {len(s)}; it needs rank {len(acc)}")
        for a, x in zip(acc, s):
            d = a.single
            if d is None:
                continue
            if out[d] is not None and out[d] != x:
                raise SpecError(f"{k.name}: dimension {k.dims[d]} is {out[d]} in one operand and {x} in {k.params[i]}")
            out[d] = x
    missing = [k.dims[d] for d, x in enumerate(out) if x is None]
    if missing:
        raise SpecError(f"{k.name}: no operand gives dimension {missing[0]}: write the output (out=...) too")
    return tuple(x for x in out if x is not None)
