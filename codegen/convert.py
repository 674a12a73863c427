"""numpy arrays in logical shape <-> flat buffers in an operand's layout.

The C function takes each operand as a flat buffer in that operand's layout; Python
callers pass and get arrays in logical shape. The permutation is the layout's own
buffer expression evaluated on numpy index grids, so every layout (packed, odd-even)
converts with the same code that indexes it in C.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from morello_asp.errors import CodegenError
from morello_asp.layout import Layout

ALIGN = 64


def aligned_empty(n: int, dtype, zero: bool = False) -> np.ndarray:
    """A 1-D array of n values whose data starts on an ALIGN-byte boundary (zeros if
    `zero`: calloc'd, as np.zeros): a view into a byte array, its base."""
    dtype = np.dtype(dtype)
    raw = (np.zeros if zero else np.empty)(n * dtype.itemsize + ALIGN, dtype=np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    return raw[start : start + n * dtype.itemsize].view(dtype)


def aligned_array(shape, dtype, zero: bool = False, order=None) -> np.ndarray:
    """A writeable array of `shape` whose data starts on an ALIGN-byte boundary, where
    numpy's allocator puts large arrays 16 or 48 bytes past one (so a program's 64-byte
    vector loads and stores would split cache lines); zeros if `zero`. Its memory is in
    `order` (in_order: [0, 2, 3, 1] is channels-last), C-contiguous if None."""
    shape = tuple(shape)
    buf = aligned_empty(math.prod(shape), dtype, zero)
    return buf.reshape(shape) if order is None else in_order(buf, shape, order)


def in_order(buf: np.ndarray, shape, order) -> np.ndarray:
    """Flat or C-contiguous `buf` as an array of logical `shape` whose memory lies in
    `order` (dimensions from the outermost in memory; [0, 2, 3, 1]: channels-last): a view."""
    return buf.reshape([shape[d] for d in order]).transpose(np.argsort(order))


@functools.lru_cache(maxsize=64)
def index_map(layout: Layout, shape: tuple[int, ...]) -> np.ndarray | None:
    """Buffer offset of every logical coordinate, or None when the layout is the identity."""
    names = [f"x{i}" for i in range(len(shape))]
    grid = np.indices(shape)
    idx = np.broadcast_to(layout.buffer_expr(shape, names).eval(dict(zip(names, grid))), shape).astype(np.int64)
    if np.array_equal(idx.reshape(-1), np.arange(idx.size)) and layout.buffer_volume(shape) == idx.size:
        return None
    return idx


@functools.lru_cache(maxsize=256)
def dense_order(layout: Layout, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """The permutation p for which a `layout` buffer is `arr.transpose(p)` in C order
    (row_major: the identity; col_major: the reverse), or None when the layout packs or
    pads (its buffer is no permutation of the array's dimensions)."""
    shape = tuple(shape)
    n = len(shape)
    idx = index_map(layout, shape)
    if idx is None:
        return tuple(range(n))
    if layout.buffer_volume(shape) != idx.size:
        return None
    origin = idx[(0,) * n]
    stride = [int(idx[tuple(1 if e == d else 0 for e in range(n))] - origin) if shape[d] > 1 else 0 for d in range(n)]
    perm = tuple(sorted(range(n), key=lambda d: (-stride[d], d)))
    if np.array_equal(idx.transpose(perm).reshape(-1), np.arange(idx.size)):
        return perm
    return None


def to_buffer(arr: np.ndarray, layout: Layout, shape) -> np.ndarray:
    """An aligned flat buffer holding `arr` (logical shape) in `layout`."""
    shape = tuple(shape)
    buf = aligned_empty(layout.buffer_volume(shape), arr.dtype)
    idx = index_map(layout, shape)
    if idx is None:
        buf[...] = arr.reshape(-1)
    else:
        buf[...] = 0
        buf[idx.reshape(-1)] = arr.reshape(-1)
    return buf


def from_buffer(buf: np.ndarray, layout: Layout, shape, out: np.ndarray | None = None) -> np.ndarray:
    shape = tuple(shape)
    idx = index_map(layout, shape)
    vals = buf.reshape(shape) if idx is None else buf[idx]
    if out is None:
        return vals.copy()
    out[...] = vals
    return out


_DEVICES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 10: "rocm", 14: "oneapi"}


def as_array(x, what: str) -> np.ndarray:
    """`x` as a numpy array sharing its memory where it has any: an ndarray as is; a
    DLPack producer (torch CPU tensors, jax and cupy arrays, ...) through np.from_dlpack;
    anything with `__array_interface__`, `__array__` or the buffer protocol through
    np.asarray. A tensor on another device is refused, naming the device."""
    if isinstance(x, np.ndarray):
        return x
    device = getattr(x, "__dlpack_device__", None)
    if device is not None:
        try:
            kind = int(device()[0])
        except Exception as e:  # a producer's own error, whatever its class
            raise CodegenError(f"{what}: cannot ask {type(x).__name__} for its device ({e})") from None
        if kind != 1:
            raise CodegenError(
                f"{what} is on device {_DEVICES.get(kind, kind)}; programs run on the CPU (copy it there first)"
            )
        try:
            return np.from_dlpack(x)
        except (BufferError, TypeError, RuntimeError, ValueError):
            pass  # e.g. a dtype DLPack cannot carry: try numpy's other protocols
    try:
        return np.asarray(x)
    except Exception as e:
        raise CodegenError(f"{what}: cannot read a {type(x).__name__} as an array ({e})") from None
