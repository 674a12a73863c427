"""The machine a benchmark runs on, and the libraries it compares with at their full ISA.

Call `full_isa(sys.argv)` before numpy or torch is imported: one thread for OpenBLAS,
OpenMP and MKL, and the variables that hold the libraries back to an older ISA removed
(OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE, which some machines set for old OpenBLAS
builds; ONEDNN_MAX_CPU_ISA, MKL_ENABLE_INSTRUCTIONS), so they run as a user's would.
`--hold-back` keeps them as set, and sets `pins` where given. `title(target)` names the
target (the native one by its microarchitecture) and the CPU for a table's first line.
"""

from __future__ import annotations

import os

HOLD_BACK = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS")
HOLD_BACK_HELP = "keep OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE, ONEDNN_MAX_CPU_ISA as set (default: the full ISA)"


def full_isa(argv: list[str], pins: dict[str, str] | None = None) -> None:
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
    if "--hold-back" in argv:
        for k, v in (pins or {}).items():
            os.environ.setdefault(k, v)
        return
    for k in HOLD_BACK:
        os.environ.pop(k, None)


def libraries() -> str:
    """How the libraries run: at the full ISA, or held back by which variables."""
    held = [f"{k}={os.environ[k]}" for k in HOLD_BACK if k in os.environ]
    return "libraries held back: " + ", ".join(held) if held else "libraries at the full ISA"


def cpu_name() -> str:
    """The model name, with family and model numbers (a VM may call a Zen 5 "AMD EPYC")."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break
    except OSError:
        return "unknown CPU"
    name = fields.get("model name", "unknown CPU")
    return f"{name} (family {fields.get('cpu family', '?')} model {fields.get('model', '?')})"


def title(target=None) -> str:
    """'target native_x86_64_v4 (avx512 files), AMD EPYC (family 26 model 2)': the target
    (None: the default one) and the CPU; for the native target, the ISA it chose."""
    from morello_asp import native  # here, not above: the package loads numpy, which full_isa must precede
    from morello_asp.target import as_target  # (the same)

    t = as_target(target)
    isa = f" ({native.host().isa} files)" if t.name.startswith("native_") else ""
    return f"target {t.name}{isa}, {cpu_name()}"
