"""Public synthesis API: optimal programs for specs and for the open leaves of
partially scheduled programs (paper 2.3, `synthesize_all`)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from morello_asp.default_table import DEFAULT_TABLE
from morello_asp.errors import InputTypeError, SpecTypeError
from morello_asp.guides import guided
from morello_asp.ir import Impl
from morello_asp.solver.logic.rule_check import check_rules
from morello_asp.solver.memo.sqlite import default_table
from morello_asp.solver.search.dp import Progress, Search
from morello_asp.solver.search.engine import get_engine
from morello_asp.spec import Spec, parse_spec
from morello_asp.target import Target, as_target

if TYPE_CHECKING:
    from morello_asp.solver.search.dp import Progress, Search


def make_search(
    target: str | Target | None = None, rules=(), db: Any = DEFAULT_TABLE, progress: Progress | bool | None = None
) -> Search:
    rules = _checked_args(rules, db, progress)
    for w in check_rules(target, rules):  # exist, UTF-8, ground in time (before loading them here)
        warnings.warn(w, stacklevel=3)
    engine = get_engine(as_target(target), tuple(str(r) for r in rules))
    memo = open_db(db, engine) if db is not None else None
    return Search(engine, memo, Progress() if progress is True else progress or Progress(enabled=False))


def _checked_args(rules, db: Any, progress) -> tuple:
    """The rule files as a tuple; InputTypeError naming the argument for a value of a
    type the API does not take (`db=42` was a bare TypeError from pathlib)."""
    if isinstance(rules, (str, os.PathLike)):  # one rule file or rule set, not its characters
        return _checked_args((rules,), db, progress)
    try:
        rules = tuple(rules)
    except TypeError:
        raise InputTypeError(
            f"rules={rules!r}: expected a rule file path or rule set name, or a sequence of them"
        ) from None
    for r in rules:
        if not isinstance(r, (str, os.PathLike)):
            raise InputTypeError(f"rules: {r!r} ({type(r).__name__}) is not a rule file path or rule set name")
    memo_like = hasattr(db, "get") and hasattr(db, "put")
    if not (db is None or db is DEFAULT_TABLE or memo_like or isinstance(db, (str, os.PathLike))):
        raise InputTypeError(
            f"db={db!r}: expected a memo table file path (str or os.PathLike), None (keep nothing), "
            "or a memo table object with get and put (default: the user's default table)"
        )
    if not isinstance(progress, bool | None) and not all(hasattr(progress, m) for m in ("update", "done")):
        raise InputTypeError(
            f"progress={progress!r}: expected a morello_asp.solver.search.dp.Progress, True (a display on a terminal) "
            "or None/False (none)"
        )
    return rules


def open_db(db: Any, engine):
    """A memo table: an object with get/put/flush is used as is; a path opens the
    persistent table; DEFAULT_TABLE opens the user's default one (None if that is off or
    its directory cannot be made: the search then keeps nothing, and says so)."""
    if db is DEFAULT_TABLE:
        path = default_table(engine)
        if path is None:
            return None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            warnings.warn(f"no default memo table ({path.parent}: {e.strerror}); nothing is kept", stacklevel=3)
            return None
        db = path
    if hasattr(db, "get") and hasattr(db, "put"):
        return db
    from morello_asp.solver.memo.sqlite import open_memo  # persistent table

    return open_memo(Path(db), engine)


def synthesize(
    spec: Spec | str,
    target: str | Target | None = None,
    rules=(),
    db: Any = DEFAULT_TABLE,
    progress: Progress | bool | None = None,
    guide: str | None = None,
) -> Impl:
    """The lowest-cost implementation of `spec` under the cost model, for `target`
    (default: the spec's own; a spec text is parsed for it); with `guide` (a name in
    morello_asp.guides.GUIDES), the lowest-cost completion of that guide's hand-scheduled
    outer loops."""
    rules = _checked_args(rules, db, progress)
    if isinstance(spec, str):
        spec = parse_spec(spec, target, rules=rules)
    elif not isinstance(spec, Spec):
        raise SpecTypeError(f"synthesize expects a Spec or spec text, got {type(spec).__name__}")
    elif target is not None and as_target(target) is not spec.target:
        spec = parse_spec(spec.text(), target)
    partial = None
    if guide is not None:
        partial = guided(spec, guide)
    search = make_search(spec.target, rules, db, progress)
    try:
        return search.build(spec) if partial is None else search.complete(partial)
    finally:
        _done_with(search, db)
        if search.progress:
            search.progress.done()


def synthesize_all(impl: Impl, db: Any = DEFAULT_TABLE, rules=(), progress: Progress | bool | None = None) -> Impl:
    """Complete a partial program: every open spec gets its optimal implementation,
    for the program's own target."""
    _checked_args(rules, db, progress)
    search = make_search(impl.spec.target, rules, db, progress)
    try:
        return search.complete(impl)
    finally:
        _done_with(search, db)


def _done_with(search: Search, db: Any) -> None:
    """Commit the search's table, and close it if it was opened here from a path (a
    table object the caller passed stays theirs): an open connection per call would
    hold every table's rows in memory until the process exits."""
    memo = search.memo
    memo.flush()
    if memo is not db and hasattr(memo, "close"):  # open_db returns a caller's table as is
        memo.close()
