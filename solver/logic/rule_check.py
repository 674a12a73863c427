"""A user's logic files checked before an engine loads them: readable UTF-8, no likely
typo of a predicate the shipped files use, and grounding in time with no `error/1`."""

from __future__ import annotations

from pathlib import Path

from morello_asp.errors import RuleError
from morello_asp.solver.logic.clingo_run import parsed_answer
from morello_asp.solver.logic.files import is_shipped, read_text, texts_with_includes, typo_warnings
from morello_asp.target import engine_files

_CHECKED: set[tuple] = set()  # the files (path, mtime, size) already checked in this process


def check_rules(target, rules) -> list[str]:
    """Check a target given as a path and the rule files of an engine before it loads
    them (see check_logic_files); returns warnings, only the first time a set of files
    (as they are now) is checked."""
    out = []
    if (
        target is not None
        and not hasattr(target, "files")
        and Path(str(target)).suffix == ".lp"
        and Path(str(target)).exists()
    ):
        out += check_logic_files([str(target)], "target file")
    if rules:
        out += check_logic_files(engine_files(target, rules))
    return out


def check_logic_files(files, what: str = "rule file") -> list[str]:
    """Check the user's files among `files` (the engine's whole list: synth.lp, the
    target's files, rule files); returns warnings. Raises InputError for a file that is
    not readable UTF-8 text, RuleError if the files do not ground, or do not finish
    grounding in time. A set of files already checked (unchanged since) passes at once,
    with no warnings."""
    files = [str(Path(f).resolve()) for f in files]  # workers may run in another directory
    user = [f for f in files if not is_shipped(f)]
    if not user:
        return []
    try:
        stamp = tuple((f, Path(f).stat().st_mtime_ns, Path(f).stat().st_size) for f in files)
    except OSError:
        stamp = None
    if stamp in _CHECKED:
        return []
    texts = {f: read_text(f, what) for f in user}
    others = texts_with_includes([f for f in files if f not in texts])
    warnings = []
    for f in user:
        warnings += typo_warnings(f, texts[f], others + [texts[g] for g in user if g != f])
    rc, _, errs, errors = parsed_answer(tuple(files), "", 0)
    if rc not in (10, 30):
        lines = [ln.strip() for ln in errs.splitlines() if ln.strip()]
        why = "; ".join(lines[:4]) or f"clingo exit code {rc}"
        if rc == 20:
            why = "they have no answer set even without a spec (a constraint always fails)"
        raise RuleError(f"clingo cannot ground the {what}{'s' if len(user) > 1 else ''} {', '.join(user)}: {why}")
    if errors:
        raise RuleError(
            f"the {what}{'s' if len(user) > 1 else ''} {', '.join(user)} report errors: " + "; ".join(errors)
        )
    if stamp is not None:
        _CHECKED.add(stamp)
    return warnings
