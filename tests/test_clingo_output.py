"""clingo prints its answer through C's stdout, two calls per atom. Under
PYTHONUNBUFFERED=1 (set in many container images) Python leaves that stream unbuffered,
and each call became a system call; the answer must be printed in large writes and arrive
whole."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROGRAM = "n(0..19999).\n#show n/1.\n"

CHILD = textwrap.dedent(
    """
    import sys
    from morello_asp.solver.logic import clingo_run

    def writes():
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("syscw")).split()[1])

    before = writes()
    rc, text, errs = clingo_run.answer((sys.argv[1],), "")
    after = writes()
    atoms = text.split("SATISFIABLE")[0].split()
    print(rc, len(atoms), len(set(atoms)), after - before)
    """
)


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counting write(2) calls needs Linux's /proc/self/io")
def test_an_answer_is_printed_in_few_writes_even_when_python_is_unbuffered(tmp_path):
    prog = tmp_path / "many.lp"
    prog.write_text(PROGRAM)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(prog)], env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    rc, atoms, distinct, writes = map(int, out)
    assert rc == 30 and atoms == distinct == 20000  # the whole answer, once
    # 20,000 atoms and their separators were 40,000 writes unbuffered; a 1 MiB buffer needs a few
    assert writes < 200, writes
