"""Build generated C into a Python extension with cffi (API mode) and gcc.

cffi writes the module's C (our source plus its glue); we run gcc ourselves so a
failure carries gcc's own message. Modules are cached by a hash of everything that
affects the binary (source, flags, compiler, cffi and Python versions), so a changed
program or toolchain never loads a stale module.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from functools import cache
from pathlib import Path

import cffi

from morello_asp.codegen.errors import CompileError
from morello_asp.errors import InputError
from morello_asp.user_cache import user_cache_dir

# -fno-semantic-interposition: calls inside the module (kernel_bench -> kernel) are
# direct, as in a standalone executable, not through the PLT.
BASE_FLAGS = ("-O3", "-std=c99", "-fPIC", "-shared", "-fno-semantic-interposition")


def cache_dir() -> Path:
    env = os.environ.get("MORELLO_ASP_CACHE")
    d = user_cache_dir()
    what = f"MORELLO_ASP_CACHE={env}" if env else f"the module cache {d}"
    if d.exists() and not d.is_dir():
        raise InputError(f"{what} is a file, not a directory for compiled modules")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot create {what}: {e.strerror}") from None
    if not os.access(d, os.W_OK | os.X_OK):
        raise InputError(f"{what} is not writable")
    return d


@cache
def compiler(cc: str | None = None) -> tuple[str, str]:
    """(path, version line) of the C compiler `cc` (None: $CC or gcc)."""
    cc = cc or os.environ.get("CC", "gcc")
    path = shutil.which(cc)
    if path is None:
        raise CompileError(f"C compiler {cc!r} not found on PATH (set CC to a gcc, or install the target's compiler)")
    ver = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    return path, ver[0] if ver else ""


_LOADED: dict[str, object] = {}


def build(source: str, cdef: str, flags: tuple[str, ...] = (), openmp: bool = False, cc: str | None = None):
    """The cffi module (with .ffi and .lib) for `source`, compiled by `cc` (None: $CC or
    gcc) or from the cache."""
    cc, ccver = compiler(cc)
    all_flags = (*BASE_FLAGS, *flags, *(("-fopenmp",) if openmp else ()))
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    key = hashlib.sha256(
        "\0".join([source, cdef, " ".join(all_flags), ccver, cffi.__version__, sys.version, suffix]).encode()
    ).hexdigest()[:20]
    name = f"_morello_{key}"
    if name in _LOADED:
        return _LOADED[name]
    so = cache_dir() / f"{name}{suffix}"
    if not so.exists():
        ffi = cffi.FFI()
        ffi.cdef(cdef)
        ffi.set_source(name, source)
        with tempfile.TemporaryDirectory(prefix="morello-build-") as tmp:
            c_file = Path(tmp) / f"{name}.c"
            with contextlib.redirect_stdout(io.StringIO()):  # cffi announces each file it writes
                ffi.emit_c_code(str(c_file))
            (cache_dir() / f"{name}.src.c").write_text(source)  # for reading assembly / debugging
            out = Path(tmp) / so.name
            cmd = [cc, *all_flags, f"-I{sysconfig.get_paths()['include']}", str(c_file), "-o", str(out)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise CompileError(
                    f"gcc failed (exit {r.returncode}) on the generated C (kept at "
                    f"{cache_dir() / (name + '.src.c')}):\n" + r.stderr.strip()
                )
            os.replace(out, so)  # atomic: a concurrent reader never sees half a module
    mod = load_extension(name, so)
    _LOADED[name] = mod
    return mod


def load_extension(name: str, so: Path):
    """Import the compiled extension module `name` from the file `so`."""
    spec = importlib.util.spec_from_file_location(name, so)
    if spec is None or spec.loader is None:
        raise CompileError(f"cannot load the compiled module {so}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
