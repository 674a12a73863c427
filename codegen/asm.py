"""Reading the machine code of a built module (objdump): is the inner loop what the
program's kernels promise?

    fn = imp.compile()
    print(inner_loop_asm(fn.module.__file__))
"""

from __future__ import annotations

import re
import shutil
import subprocess

_JUMP_BACK = re.compile(r"\sj\w+\s+([0-9a-f]+) <")
_STACK = re.compile(r"\((%rsp|%rbp)")


def have_objdump() -> bool:
    return shutil.which("objdump") is not None


def disassemble(so_path: str, symbol: str = "kernel") -> list[str]:
    """The instructions of `symbol` in the shared object, one objdump line each."""
    dis = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", str(so_path)], capture_output=True, text=True, check=True
    ).stdout
    if f"<{symbol}>:" not in dis:
        raise ValueError(f"no symbol {symbol} in {so_path}")
    return dis.split(f"<{symbol}>:", 1)[1].split("\n\n", 1)[0].splitlines()


def inner_loop_asm(so_path: str, symbol: str = "kernel") -> str:
    """The first loop of `symbol` that contains an FMA, disassembled: it should be
    broadcasts and vfmadd231ps on ymm registers with no stack (rsp/rbp) traffic. The
    last line counts its instructions, FMAs and stack accesses."""
    body = disassemble(so_path, symbol)
    addr = lambda line: int(line.split(":")[0], 16)  # noqa: E731
    first_fma = next((i for i, lv in enumerate(body) if "vfmadd" in lv), None)
    if first_fma is None:
        return "no FMA loop found"
    for j in range(first_fma, len(body)):
        m = _JUMP_BACK.search(body[j])
        if m and int(m.group(1), 16) < addr(body[j]):
            start = next(i for i, lv in enumerate(body) if lv.strip() and addr(lv) == int(m.group(1), 16))
            loop = body[start : j + 1]
            spills = [lv for lv in loop if _STACK.search(lv)]
            fmas = sum("vfmadd" in lv for lv in loop)
            return "\n".join(loop) + f"\n-- {len(loop)} instructions, {fmas} FMAs, {len(spills)} stack accesses"
    return "no FMA loop found"
