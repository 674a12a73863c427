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
import gc
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
from concurrent.futures import Future, InvalidStateError
from pathlib import Path

import clingo

from morello_asp.errors import InputError, RuleError
from morello_asp.solver.logic import interrupt
from morello_asp.solver.logic.answer import errors, parse
from morello_asp.solver.logic.files import is_shipped, unsnapshot

ARGS = ("--verbose=0", "--warn=none", "--models=1")
DEFAULT_TIMEOUT = 60.0
_INLINE = False  # run_inline(): clingo in this process (a precompute worker)
_SPARE = None  # lend_cores(): how many cores a precompute worker may borrow now
LENT_CALLS = 0  # calls a precompute worker ran in helpers on borrowed cores
# The signals clasp's application installs handlers for (measured with clingo 5.8).
_CLASP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, s)
    for s in ("SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGXCPU")
    if hasattr(signal, s)
)


class _App:
    program_name = "morello-asp"
    version = "1"


_LIBC: ctypes.CDLL | None
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
    if _LIBC is None:
        return
    for s, buf in (saved or {}).items():
        _LIBC.sigaction(int(s), buf, None)


def clingo_main(args: list[str]) -> int:
    """clingo's front end, leaving this process's signal handling as it found it."""
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, _CLASP_SIGNALS)
    saved = _save_handlers()
    try:
        return clingo.clingo_main(_App(), args)  # type: ignore[arg-type]
    finally:
        _restore_handlers(saved)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)


_STDOUT_BUFFER: ctypes.Array[ctypes.c_char] | None = None  # the C stdout buffer clingo prints into


def _buffer_c_stdout() -> None:
    """Give C's stdout a buffer of its own. clingo prints an answer through C stdio, two
    calls per atom; under PYTHONUNBUFFERED=1 (or -u) Python leaves C's stdout unbuffered,
    and every call became a write(2): 136,000 system calls for one 482-class batch,
    a quarter of the call's time. Only clingo prints through C's stdout here, and
    `answer` flushes it before and after each call."""
    global _STDOUT_BUFFER
    if _LIBC is None or _STDOUT_BUFFER is not None:
        return
    try:
        stdout = ctypes.c_void_p.in_dll(_LIBC, "stdout")
    except ValueError:  # pragma: no cover - a libc without the symbol
        return
    buf = ctypes.create_string_buffer(1 << 20)
    _LIBC.fflush(stdout)
    if _LIBC.setvbuf(stdout, buf, 0, len(buf)) == 0:  # 0 = _IOFBF
        _STDOUT_BUFFER = buf  # setvbuf keeps the pointer: the buffer must outlive the process


def _flush_c_stdout() -> None:
    if _LIBC is not None:
        _LIBC.fflush(None)


def answer(files: tuple[str, ...], facts: str) -> tuple[int, str, str]:
    """(exit code, printed answer, messages) of clingo on `files` plus `facts`, in this
    process. clingo_main prints to file descriptors 1 and 2, which are redirected to files."""
    _buffer_c_stdout()
    with tempfile.TemporaryDirectory() as tmp:
        ff = Path(tmp) / "facts.lp"
        ff.write_text(facts)
        outp, errp = Path(tmp) / "out", Path(tmp) / "err"
        sys.stdout.flush()
        sys.stderr.flush()
        _flush_c_stdout()
        with open(outp, "wb") as out, open(errp, "wb") as err:
            s1, s2 = os.dup(1), os.dup(2)
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            try:
                rc = clingo_main([*files, str(ff), *ARGS])
            finally:
                _flush_c_stdout()  # what clingo printed goes to the answer file, not to fd 1 after it
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
def env_number(name: str, kind, default, lo, what: str):
    """The number environment variable `name` holds (`default` when unset or blank), of
    type `kind` and at least `lo`; anything else is an InputError naming it and `what`."""
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
    """Worker processes: MORELLO_ASP_JOBS, else one per core (at most 8); 1 in-process."""
    if _INLINE:
        return 1 + spare_cores()
    env = env_number("MORELLO_ASP_JOBS", int, None, 1, "a whole number of worker processes, at least 1")
    if env is not None:
        return env
    try:
        return max(1, min(len(os.sched_getaffinity(0)), 8))
    except AttributeError:  # not Linux
        return max(1, min(os.cpu_count() or 1, 8))


def calls_ahead() -> int:
    """How many calls a pipelined caller keeps out at once: one per worker process. A
    precompute worker runs its calls here, one at a time (chunks of one call side by
    side on borrowed cores): one."""
    return 1 if _INLINE else jobs()


def ground_timeout(nspecs: int) -> float:
    base = env_number(
        "MORELLO_ASP_GROUND_TIMEOUT",
        float,
        DEFAULT_TIMEOUT,
        0.01,
        "a time limit in seconds for one clingo call, e.g. 60",
    )
    return base * (1 + nspecs / 1000)


def _timeout_error(files, nspecs: int, limit: float) -> RuleError:
    user = [unsnapshot(f) for f in files if not is_shipped(f)]
    where = (
        f"the rule file{'s' if len(user) > 1 else ''} {', '.join(user)}"
        if user
        else "the logic files " + ", ".join(Path(f).name for f in files)
    )
    batch = f" with a batch of {nspecs} spec{'s' if nspecs > 1 else ''}" if nspecs else ""
    return RuleError(
        f"grounding {where}{batch} did not finish in {limit:.0f} s of CPU time: a rule that derives ever larger "
        f"terms (such as n(X+1) :- n(X).) grounds for ever; set MORELLO_ASP_GROUND_TIMEOUT=SECONDS "
        f"to allow longer"
    )


# ------------------------------------------------------------------------ workers
# A small pool of our own rather than concurrent.futures: each worker has one pipe and
# one thread here that sends it a call and waits for the answer with the call's time
# limit, so a stuck call kills exactly what must be killed, and there is no manager or
# feeder thread that interpreter exit must join (or race with).
_LOCK = threading.Lock()
_CTX = multiprocessing.get_context("fork")  # workers need nothing but this module, and start in milliseconds


class _Worker:
    def __init__(self):
        here, there = _CTX.Pipe()
        self.proc = _CTX.Process(target=_worker_main, args=(there, os.getpid()), daemon=True)
        self.proc.start()
        there.close()
        self.conn = here
        self.error: BaseException | None = None  # set when stopped on purpose

    def kill(self, error: BaseException) -> None:
        """SIGKILL; the thread serving it sees the pipe's end and fails its call with `error`."""
        self.error = error
        try:
            self.proc.kill()
        except (OSError, ValueError, AttributeError):
            pass


_WORKERS: list[_Worker] = []
_IDLE: list[_Worker] = []
_QUEUE: list[tuple] = []  # calls waiting for a worker: (files, facts, n, future, limit)


def worker_setup(parent: int) -> None:
    """In a worker process just started by `parent`: die with the parent whatever kills
    it, leave Ctrl-C to it, let SIGTERM end it (precompute's workers use this too)."""
    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _CLASP_SIGNALS)
    gc.freeze()  # the parent's heap, copied by fork: the collector need not rescan it here


def requests(conn):
    """A worker's requests from its parent, until it says stop (None) or goes away; then
    the worker exits at once (no interpreter teardown, no atexit of the parent's)."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            os._exit(0)
        if msg is None:
            os._exit(0)
        yield msg


def _worker_main(conn, parent: int) -> None:
    """A worker: die with the parent, leave Ctrl-C to it, answer calls until told to stop."""
    worker_setup(parent)
    for msg in requests(conn):
        try:
            reply = ("ok", _parsed_answer_here(*msg))
        except BaseException as e:  # noqa: BLE001 - sent back and raised there
            reply = ("error", e)
        try:
            conn.send(reply)
        except (TypeError, AttributeError, ValueError):  # an exception that does not pickle
            conn.send(("error", RuleError(f"clingo call failed: {reply[1]!r}")))
        except OSError:
            os._exit(0)


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds process `pid` has used (user + system, /proc), None where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _answered(w: _Worker, limit: float) -> bool:
    """Wait for worker `w`'s answer until the call has used `limit` seconds of the worker's
    CPU: a rule that grounds for ever burns CPU, while a machine busy with other work only
    slows a call (measured by the clock, a loaded machine's calls timed out with a message
    blaming the rules). Where /proc cannot say, `limit` seconds by the clock."""
    start = cpu_seconds(w.proc.pid)
    if start is None:
        return w.conn.poll(limit)
    while not w.conn.poll(1.0):
        used = cpu_seconds(w.proc.pid)
        if used is None:  # the worker is gone: its pipe's end says so to the caller
            return True
        if used - start >= limit:
            return False
    return True


def _serve(w: _Worker, call) -> None:
    """In a thread: run calls on worker `w` until none is waiting."""
    while call is not None:
        files, facts, n, fut, limit = call
        try:
            w.conn.send((files, facts, n))
            if not _answered(w, limit):
                shutdown(_timeout_error(files, n, limit))  # the stuck worker cannot be stopped otherwise
                _set(fut, exc=w.error)
                w.conn.close()
                return
            status, value = w.conn.recv()
        except (EOFError, OSError, ValueError):
            if w.error is None:  # it died by itself
                shutdown(
                    RuleError(
                        f"a clingo worker process died while grounding{f' {n} specs' if n else ''} "
                        "(out of memory, or killed?)"
                    )
                )
            _set(fut, exc=w.error)
            w.conn.close()
            return
        _set(fut, value if status == "ok" else None, value if status != "ok" else None)
        with _LOCK:
            if w.error is not None:
                return
            call = _QUEUE.pop(0) if _QUEUE else None
            if call is None:
                _IDLE.append(w)


def workers() -> list[int]:
    """Process ids of the live workers."""
    with _LOCK:
        return [w.proc.pid for w in _WORKERS if w.proc.is_alive()]


def shutdown(error: BaseException | None = None) -> None:
    """Kill the workers now (their calls are abandoned and fail with `error`); the next
    call starts fresh ones."""
    error = error or RuleError("clingo workers were stopped")
    with _LOCK:
        ws = list(_WORKERS)
        queued = list(_QUEUE)
        _WORKERS.clear()
        _IDLE.clear()
        _QUEUE.clear()
    for w in ws:
        w.kill(error)
    for call in queued:
        _set(call[3], exc=error)
    for w in ws:
        try:
            w.proc.join(5)
        except (OSError, ValueError, AssertionError):
            pass


atexit.register(shutdown)


def _set(fut: Future, result=None, exc: BaseException | None = None) -> None:
    try:
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(result)
    except InvalidStateError:  # already failed
        pass


def run_inline(on: bool = True) -> None:
    """Call clingo in this process from now on, one call at a time. For processes that
    are themselves workers (`morello-asp precompute`'s, which leave signals to their
    driver and are one per core): no helper process, no time limit of its own."""
    global _INLINE
    _INLINE = on


def lend_cores(spare) -> None:
    """In a precompute worker (run_inline): `spare()` says how many cores no other
    worker is using now (the driver counts the idle ones). While it is above 0, batches
    are cut into 1 + spare chunks and grounded side by side in helper processes, so the
    last task of a stage does not run on one core while the others idle. What is
    grounded does not change, only where: the table is the same."""
    global _SPARE
    _SPARE = spare


def spare_cores() -> int:
    if _SPARE is None:
        return 0
    try:
        return max(0, int(_SPARE()))
    except (OSError, ValueError):
        return 0


def submit(files: tuple[str, ...], facts: str, n: int, side_by_side: bool = True) -> Future:
    """Run `_parsed_answer_here` in a worker process. The future fails with a RuleError
    if the call outlives its time limit (the workers are then killed) or a worker dies.
    In a precompute worker, a call runs in a helper only if it is one of several chunks
    run `side_by_side` on borrowed cores; otherwise here."""
    global LENT_CALLS
    if _INLINE and not (side_by_side and spare_cores()):
        done: Future = Future()
        done.set_result(_parsed_answer_here(files, facts, n))
        return done
    if _INLINE:
        LENT_CALLS += 1
    limit = ground_timeout(n)
    interrupt.check()
    fut: Future = Future()
    fut.set_running_or_notify_cancel()
    call = (files, facts, n, fut, limit)
    # Workers are forked, and threads started, with SIGINT and SIGTERM blocked: a thread
    # inherits the mask, so only the main thread ever handles them (workers unblock).
    old = signal.pthread_sigmask(signal.SIG_BLOCK, interrupt.SIGNALS)
    try:
        with _LOCK:
            w = _IDLE.pop() if _IDLE else None
            if w is None and len(_WORKERS) < jobs():
                w = _Worker()
                _WORKERS.append(w)
            if w is None:
                _QUEUE.append(call)
            else:
                threading.Thread(target=_serve, args=(w, call), daemon=True, name="clingo-call").start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return fut
