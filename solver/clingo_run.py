"""Running clingo's own front end on the rule files plus a batch of facts, in this
process or in worker processes.

Grounding is single-threaded and is the larger half of a search's time, so big batches
are cut into one chunk per core and grounded side by side in a pool of forked workers
(`MORELLO_ASP_JOBS` sets the number; 1 keeps everything in this process). clingo's
printed answer is returned as text: scanning it with regular expressions is far cheaper
than walking symbols through the API.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
import sys
import tempfile
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import clingo

from .answer import errors, parse

ARGS = ("--verbose=0", "--warn=none", "--models=1")


class _App:
    program_name = "morello-asp"
    version = "1"


def answer(files: tuple[str, ...], facts: str) -> tuple[int, str, str]:
    """(exit code, printed answer, messages) of clingo on `files` plus `facts`.
    clingo_main prints to file descriptors 1 and 2, which are redirected to files."""
    with tempfile.TemporaryDirectory() as tmp:
        ff = Path(tmp) / "facts.lp"
        ff.write_text(facts)
        outp, errp = Path(tmp) / "out", Path(tmp) / "err"
        sys.stdout.flush()
        sys.stderr.flush()
        with open(outp, "wb") as out, open(errp, "wb") as err:
            s1, s2 = os.dup(1), os.dup(2)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            try:
                rc = clingo.clingo_main(_App(), [*files, str(ff), *ARGS])
            finally:
                os.dup2(s1, 1)
                os.dup2(s2, 2)
                os.close(s1)
                os.close(s2)
        return rc, outp.read_text(), errp.read_text()


def parsed_answer(files: tuple[str, ...], facts: str, n: int):
    """`answer`, then read: (exit code, answer.parse result, messages, error/1 atoms)."""
    rc, text, errs = answer(files, facts)
    if rc not in (10, 30):
        return rc, None, errs, []
    return rc, parse(text, n), errs, errors(text)


def jobs() -> int:
    env = os.environ.get("MORELLO_ASP_JOBS")
    if env:
        return max(1, int(env))
    try:
        return max(1, min(len(os.sched_getaffinity(0)), 8))
    except AttributeError:  # not Linux
        return max(1, min(os.cpu_count() or 1, 8))


_POOL: ProcessPoolExecutor | None = None


def _pool() -> ProcessPoolExecutor:
    global _POOL
    if _POOL is None:
        # fork: workers need nothing but this module, and start in milliseconds.
        _POOL = ProcessPoolExecutor(max_workers=jobs(), mp_context=multiprocessing.get_context("fork"))
        atexit.register(_POOL.shutdown, wait=False, cancel_futures=True)
    return _POOL


def submit(files: tuple[str, ...], facts: str, n: int) -> Future:
    """Run `parsed_answer` in a worker process."""
    return _pool().submit(parsed_answer, files, facts, n)
