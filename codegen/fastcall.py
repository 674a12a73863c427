"""The compiled call path (fastcall.c): built once per Python, numpy and compiler into
the module cache, loaded once per process.

A call through cffi and Python-level checks costs about 1.5 µs before any C runs, as
much as a 64³ matmul itself; reading numpy's array structs from C costs a tenth of
that. When the module cannot be built (no compiler headers for this Python), programs
still run through the Python path, copy-free but slower, and a warning says why once.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
import warnings
from pathlib import Path
from types import ModuleType

import numpy as np

from morello_asp.codegen.build import cache_dir, compiler, load_extension
from morello_asp.errors import CompileError

SOURCE = Path(__file__).with_name("fastcall.c")


@functools.cache
def module() -> ModuleType | None:
    """The call-path extension, or None (with a warning) if it cannot be built here."""
    try:
        return _load()
    except (OSError, RuntimeError, ImportError, CompileError) as e:
        warnings.warn(
            f"morello-asp: the compiled call path could not be built ({e}); programs run through "
            "the slower Python path",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _load() -> ModuleType:
    cc, ccver = compiler(None)
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    text = SOURCE.read_text()
    key = hashlib.sha256("\0".join([text, ccver, np.__version__, sys.version, suffix]).encode()).hexdigest()[:20]
    name = f"_morello_fastcall_{key}"
    so = cache_dir() / f"{name}{suffix}"
    if not so.exists():
        with tempfile.TemporaryDirectory(prefix="morello-build-") as tmp:
            c_file = Path(tmp) / f"{name}.c"
            c_file.write_text(text.replace("MODNAME", name))
            out = Path(tmp) / so.name
            cmd = [
                cc,
                "-O2",
                "-shared",
                "-fPIC",
                f"-I{sysconfig.get_paths()['include']}",
                f"-I{np.get_include()}",
                str(c_file),
                "-o",
                str(out),
            ]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"gcc exited {r.returncode}: {r.stderr.strip()[:500]}")
            os.replace(out, so)  # atomic: a concurrent process never loads half a module
    return load_extension(name, so)
