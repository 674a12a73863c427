"""Running clingo's own front end on the rule files plus a batch of facts, in worker
processes.

Grounding is single-threaded and is the larger half of a search's time, so big batches
are cut into one chunk per core and grounded side by side in a pool of forked workers
(`MORELLO_ASP_JOBS` sets the number). clingo's printed answer is returned as text:
scanning it with regular expressions is far cheaper than walking symbols through the API.

Every call runs in a worker, never in the main process, because `clingo_main` installs
signal handlers of its own and leaves them installed when it returns (a later Ctrl-C
then runs them on a finished application). In a worker, the handlers of the signals it
touches are saved before each call and restored after it, with those signals held back
meanwhile. Workers ignore Ctrl-C (the parent decides), die with their parent whatever
kills it (PR_SET_PDEATHSIG), and each call has a time limit (`MORELLO_ASP_GROUND_TIMEOUT`,
seconds, default 60, plus 0.1% of it per spec of the batch): a rule file that grounds
for ever is reported, naming it, instead of hanging.
"""
from __future__ import annotations

import atexit
import ctypes
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
from concurrent.futures import Future, InvalidStateError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import clingo

from morello_asp.errors import InputError, RuleError

from . import interrupt
from .answer import errors, parse

ARGS = ("--verbose=0", "--warn=none", "--models=1")
DEFAULT_TIMEOUT = 60.0
# The signals clasp's application installs handlers for (measured with clingo 5.8).
_CLASP_SIGNALS = tuple(s for s in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGXCPU")
                       if hasattr(signal, s))
_CLASP_SIGNALS = tuple(getattr(signal, s) for s in _CLASP_SIGNALS)


class _App:
    program_name = "morello-asp"
    version = "1"


try:
    _LIBC = ctypes.CDLL(None, use_errno=True)
    _LIBC.sigaction  # noqa: B018  (present on every POSIX libc)
except (OSError, AttributeError):  # pragma: no cover - not POSIX
    _LIBC = None


def _save_handlers():
    """The C-level handlers of clasp's signals, as opaque `struct sigaction` buffers."""
    if _LIBC is None:
        return None
    saved = {}
    for s in _CLASP_SIGNALS:
        buf = ctypes.create_string_buffer(512)
        if _LIBC.sigaction(int(s), None, buf) == 0:
            saved[s] = buf
    return saved


def _restore_handlers(saved) -> None:
    for s, buf in (saved or {}).items():
        _LIBC.sigaction(int(s), buf, None)


def clingo_main(args: list[str]) -> int:
    """clingo's front end, leaving this process's signal handling as it found it."""
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _CLASP_SIGNALS)
    saved = _save_handlers()
    try:
        return clingo.clingo_main(_App(), args)
    finally:
        _restore_handlers(saved)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


def answer(files: tuple[str, ...], facts: str) -> tuple[int, str, str]:
    """(exit code, printed answer, messages) of clingo on `files` plus `facts`, in this
    process. clingo_main prints to file descriptors 1 and 2, which are redirected to files."""
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
                rc = clingo_main([*files, str(ff), *ARGS])
            finally:
                os.dup2(s1, 1)
                os.dup2(s2, 2)
                os.close(s1)
                os.close(s2)
        return rc, outp.read_text(errors="replace"), errp.read_text(errors="replace")


def _parsed_answer_here(files: tuple[str, ...], facts: str, n: int):
    """`answer`, then read: (exit code, answer.parse result, messages, error/1 atoms)."""
    rc, text, errs = answer(files, facts)
    if rc not in (10, 30):
        return rc, None, errs, []
    return rc, parse(text, n), errs, errors(text)


def parsed_answer(files: tuple[str, ...], facts: str, n: int):
    """`_parsed_answer_here` in a worker process, waited for here (Ctrl-C stops the wait)."""
    return submit(files, facts, n).result()


# ----------------------------------------------------------------------- settings
def _env_number(name: str, kind, default, lo, what: str):
    text = os.environ.get(name)
    if text is None or text.strip() == "":
        return default
    try:
        v = kind(text.strip())
    except ValueError:
        v = None
    if v is None or v != v or v < lo or v > 1e9:
        raise InputError(f"{name}={text!r}: expected {what}")
    return v


def jobs() -> int:
    """Worker processes: MORELLO_ASP_JOBS, else one per core (at most 8)."""
    env = _env_number("MORELLO_ASP_JOBS", int, None, 1, "a whole number of worker processes, at least 1")
    if env is not None:
        return env
    try:
        return max(1, min(len(os.sched_getaffinity(0)), 8))
    except AttributeError:  # not Linux
        return max(1, min(os.cpu_count() or 1, 8))


def ground_timeout(nspecs: int) -> float:
    base = _env_number("MORELLO_ASP_GROUND_TIMEOUT", float, DEFAULT_TIMEOUT, 0.01,
                       "a time limit in seconds for one clingo call, e.g. 60")
    return base * (1 + nspecs / 1000)


def _timeout_error(files, nspecs: int, limit: float) -> RuleError:
    from .logic_files import is_shipped

    user = [f for f in files if not is_shipped(f)]
    where = (f"the rule file{'s' if len(user) > 1 else ''} {', '.join(user)}" if user
             else "the logic files " + ", ".join(Path(f).name for f in files))
    batch = f" with a batch of {nspecs} spec{'s' if nspecs > 1 else ''}" if nspecs else ""
    return RuleError(f"grounding {where}{batch} did not finish in {limit:.0f} s: a rule that derives ever larger "
                     f"terms (such as n(X+1) :- n(X).) grounds for ever; set MORELLO_ASP_GROUND_TIMEOUT=SECONDS "
                     f"to allow longer")


# --------------------------------------------------------------------------- pool
_POOL: ProcessPoolExecutor | None = None
_LOCK = threading.Lock()
_OUTSTANDING: dict[Future, tuple] = {}  # proxy future -> (real future, files, n, limit, timer)


def _worker_init(parent: int) -> None:
    """In each worker: die with the parent, leave Ctrl-C to it."""
    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _CLASP_SIGNALS)


def _pool() -> ProcessPoolExecutor:
    global _POOL
    if _POOL is None:
        # fork: workers need nothing but this module, and start in milliseconds. The
        # pool's helper threads are started with the signals blocked (they inherit the
        # mask), so only the main thread ever handles SIGINT and SIGTERM.
        _POOL = ProcessPoolExecutor(max_workers=jobs(), mp_context=multiprocessing.get_context("fork"),
                                    initializer=_worker_init, initargs=(os.getpid(),))
    return _POOL


def workers() -> list[int]:
    """Process ids of the live workers."""
    pool = _POOL
    procs = getattr(pool, "_processes", None) or {}
    return [p.pid for p in list(procs.values()) if p.is_alive()]


def shutdown(error: BaseException | None = None) -> None:
    """Kill the workers now (their calls are abandoned), failing outstanding calls with
    `error`; the next call starts a fresh pool."""
    global _POOL
    with _LOCK:
        pool, _POOL = _POOL, None
        pending = list(_OUTSTANDING.items())
        _OUTSTANDING.clear()
    for proxy, (_, _, _, _, timer) in pending:
        timer.cancel()
        _set(proxy, exc=error or RuleError("clingo workers were stopped"))
    if pool is None:
        return
    procs = list((getattr(pool, "_processes", None) or {}).values())
    for p in procs:
        try:
            p.kill()
        except (OSError, ValueError):
            pass
    pool.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        try:
            p.join(5)
        except (OSError, ValueError, AssertionError):
            pass


atexit.register(shutdown)


def _set(proxy: Future, result=None, exc: BaseException | None = None) -> None:
    try:
        if exc is not None:
            proxy.set_exception(exc)
        else:
            proxy.set_result(result)
    except InvalidStateError:  # already failed (time-out, shutdown)
        pass


def _finished(proxy: Future, real: Future) -> None:
    with _LOCK:
        entry = _OUTSTANDING.pop(proxy, None)
    if entry is None:
        return
    entry[4].cancel()
    if real.cancelled():
        _set(proxy, exc=RuleError("a clingo call was cancelled"))
        return
    exc = real.exception()
    if isinstance(exc, BrokenProcessPool):
        n = entry[2]
        exc = RuleError(f"a clingo worker process died while grounding{f' {n} specs' if n else ''} "
                        "(out of memory, or killed?)")
    _set(proxy, real.result() if exc is None else None, exc)


def _expired(proxy: Future) -> None:
    with _LOCK:
        entry = _OUTSTANDING.get(proxy)
    if entry is None:
        return
    _, files, n, limit, _ = entry
    shutdown(_timeout_error(files, n, limit))  # the stuck worker cannot be stopped otherwise


def submit(files: tuple[str, ...], facts: str, n: int) -> Future:
    """Run `_parsed_answer_here` in a worker process. The future fails with a RuleError
    if the call outlives its time limit (the workers are then killed) or a worker dies."""
    limit = ground_timeout(n)
    interrupt.check()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, interrupt.SIGNALS)  # for threads the pool starts
    try:
        try:
            real = _pool().submit(_parsed_answer_here, files, facts, n)
        except BrokenProcessPool:
            shutdown()
            real = _pool().submit(_parsed_answer_here, files, facts, n)
        proxy: Future = Future()
        proxy.set_running_or_notify_cancel()
        timer = threading.Timer(limit, _expired, (proxy,))
        timer.daemon = True
        with _LOCK:
            _OUTSTANDING[proxy] = (real, files, n, limit, timer)
        timer.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    real.add_done_callback(lambda f: _finished(proxy, f))
    return proxy
