"""Malformed input never ends in a traceback or a hang (issue 21): every case runs through
the real CLI (`morello_asp.cli.main` in this process, or the `morello-asp` command in a
subprocess where the environment or a pipe matters) and must exit with the documented
status (2 for bad input) and exactly one line on stderr naming what is wrong. Memo files
that are not ours are refused untouched. The Python API raises the package's own errors."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from morello_asp.cli import main

CLI = [sys.executable, "-m", "morello_asp.cli"]
TINY = "Matmul(2x2x2, f32)"
FULL = "(Matmul(1x4x4x4, {a}, (f32, GL, row_major), (f32, GL, row_major), serial), [16, 16, 1024, {lim}])"


def full(a="(f32, GL, row_major)", lim=100):
    return FULL.format(a=a, lim=lim)


def check_one_line(rc, err, want_rc, want):
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert rc == want_rc, (rc, err)
    assert len(lines) == 1, err
    assert lines[0].startswith("morello-asp: error:"), err
    assert want in lines[0], (want, err)


def run_main(capsys, argv):
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------------------ specs
SPECS = [
    ("Matmul(٤x4x4, f32)", "expected a dimension size"),  # Arabic-Indic digit: int() would take it
    ("Matmul(4x4x٤, f32)", "dimension size"),
    ("Matmul(4x4x1099511627776, f32)", "at most 2147483647"),  # 2^40
    ("Matmul(2147483648x1x1, f32)", "at most 2147483647"),  # 2^31
    ("Matmul(99999999999x4x4, f32)", "at most 2147483647"),
    ("Matmul(18446744073709551616x1x1, f32)", "at most 2147483647"),  # 2^64
    ("Matmul(65536x65536x4, f32)", "bytes"),  # each operand past 2 GiB
    ("Matmul(0x4x4, f32)", "at least 1"),
    ("Matmul(4x4x4, f33)", "a dtype (one of"),
    ("Convolve(4x4x4, f32)", "a spec kind (one of"),
    ("Softmax(4x8, f32)", "Softmax works along one dimension, written after its name: Softmax0..Softmax3"),
    ("Max7(4x8, f32)", "Max0..Max3"),
    ("MatMul(4x4x4, f32)", "unknown spec kind 'MatMul': did you mean Matmul?"),
    ("", "expected a spec kind"),
    ("Matmul(4x4x4, f32", "')'"),
    ("Matmul(4x4x4, f32) extra", "end of spec"),
    ("Matmul(4x, f32)", "dimension size"),
    (full(lim=10**30), "memory limit of at most 2147483647"),
    (full(lim="1" + "٠" * 3), "expected ']'"),
    (full("(f32, GL, [0, 1, 2 p(0)])"), "pack size must be from 1"),
    (full("(f32, GL, [0, 1, 2 p(٤)])"), "bad physical dimension"),
    (full("(f32, GL, [٠, 1, 2])"), "bad physical dimension"),
    (full("(f32, GL, row_major, c9)"), "cN with N at most 3"),
    (full("(f32, GL, row_major, v0)"), "vN with N from 1"),
    (full("(f32, GL, row_major, zz)"), "ua, cN, vN or sN"),
    (full("(f32, XL, row_major)"), "XL"),
]


@pytest.mark.parametrize("text,want", SPECS, ids=[f"spec{i}" for i in range(len(SPECS))])
def test_bad_spec(capsys, text, want):
    for cmd in (["parse", text], ["synth", text, "-q"]):
        rc, out, err = run_main(capsys, cmd)
        check_one_line(rc, err, 2, want)
        assert out == ""


def test_parse_spec_api_raises_package_errors():
    from morello_asp import parse_spec
    from morello_asp.errors import MorelloError, SpecSyntaxError, SpecTypeError
    from morello_asp.spec import parse_tensor_spec

    for bad in (None, 5, b"Matmul(2x2x2, f32)"):
        with pytest.raises(SpecTypeError, match="expects spec text"):
            parse_spec(bad)
        with pytest.raises(TypeError):  # also a TypeError, as Python code expects
            parse_spec(bad)
    with pytest.raises(SpecTypeError):
        parse_tensor_spec(None, 2)
    with pytest.raises(SpecSyntaxError, match="column 8"):
        parse_spec("Matmul(٤x4x4, f32)")
    with pytest.raises(MorelloError):
        parse_spec(full(lim=2**31))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no file can be created")
def test_a_memo_table_that_cannot_be_created_is_named_so(capsys):
    """Not "damaged or truncated" (SQLite's error for a file it cannot open): the table
    cannot be created, and the reason; the API raises the same MemoError."""
    from morello_asp.errors import MemoError
    from morello_asp.synthesis import synthesize

    rc, _, err = run_main(capsys, ["synth", TINY, "-q", "--db", "/proc/morello-asp-test.db"])
    check_one_line(rc, err, 2, "cannot create memo table /proc/morello-asp-test.db: No such file or directory")
    with pytest.raises(MemoError, match="cannot create memo table"):
        synthesize(TINY, db="/proc/morello-asp-test.db")


def test_synthesize_refuses_what_is_not_a_spec():
    from morello_asp.errors import SpecTypeError
    from morello_asp.synthesis import synthesize

    for bad in (12, None, b"Matmul(2x2x2, f32)"):
        with pytest.raises(SpecTypeError, match="synthesize expects a Spec or spec text"):
            synthesize(bad)


GL3 = "(f32, GL, row_major), (f32, GL, row_major), (f32, GL, row_major)"


@pytest.mark.parametrize(
    "rules,spec,want",
    [
        # every rewrite forbidden: nothing applies to the spec itself
        ("forbid(S, A) :- cand(S, A).", TINY, "): no rewrite applies to it under the rules in force"),
        # every kernel forbidden: the search ends at specs nothing applies to, not at a memory limit
        (
            "forbid(S, A) :- cand(S, A), A = select(_).",
            TINY,
            "): every way down ends where no rewrite applies to (",
        ),
        # no memory at all: the rewrites apply, and every one needs more than is left
        (None, f"(MatmulAccum(1x1x1, {GL3}), [0, 0, 0, 0])", "every rewrite that applies to it exceeds its memory"),
        (None, f"(Matmul(2x2x2, {GL3}), [0, 0, 0, 0])", "every way down ends where every rewrite of (MatmulAccum"),
    ],
    ids=["all-forbidden", "kernels-forbidden", "no-memory", "no-memory-below"],
)
def test_no_implementation_says_whether_the_rules_or_the_memory_limits_are_why(tmp_path, capsys, rules, spec, want):
    """Issue 56: "no implementation fits its memory limits" was said when the rules forbid
    every kernel. The message tells a spec no rewrite applies to (the rules) from one whose
    every rewrite exceeds its limits (memory: the least it needs, and what is left)."""
    argv = ["synth", spec, "-q", "--no-db"]
    if rules is not None:
        f = tmp_path / "forbid.lp"
        f.write_text(rules + "\n")
        argv += ["--rules", str(f)]
    rc, out, err = run_main(capsys, argv)
    check_one_line(rc, err, 2, want)
    assert ("memory" in err) == (rules is None), err
    if rules is None:
        assert "needs 1 line of L1, 0 left" in err, err


def test_no_implementation_says_when_its_budget_of_specs_ran_out(tmp_path, capsys, monkeypatch):
    """Issue 57: when why_none's budget of specs ran out before any way down ended, the
    message blamed a rule set that loops. It says the budget ran out, names it
    (MORELLO_ASP_WHY_NONE_SPECS) and how to raise it; with the budget raised the same
    spec gets the real reason (every kernel forbidden). A budget that is not a number is
    bad input naming the variable."""
    f = tmp_path / "forbid.lp"
    f.write_text("forbid(S, A) :- cand(S, A), A = select(_).\n")
    argv = ["synth", "Matmul(2x2x4, f32)", "-q", "--no-db", "--rules", str(f)]
    monkeypatch.setenv("MORELLO_ASP_WHY_NONE_SPECS", "1")
    rc, _, err = run_main(capsys, argv)
    check_one_line(rc, err, 2, "): no way down ended among the ")
    assert "specs below it reached before the budget MORELLO_ASP_WHY_NONE_SPECS=1 ran out" in err, err
    assert "set it higher (e.g. 10)" in err and "loops" not in err, err
    monkeypatch.setenv("MORELLO_ASP_WHY_NONE_SPECS", "100000")
    rc, _, err = run_main(capsys, argv)
    check_one_line(rc, err, 2, "every way down ends where no rewrite applies to (")
    monkeypatch.setenv("MORELLO_ASP_WHY_NONE_SPECS", "lots")
    rc, _, err = run_main(capsys, argv)
    check_one_line(rc, err, 2, "MORELLO_ASP_WHY_NONE_SPECS='lots': expected a whole number of specs, at least 1")


def test_synthesize_names_an_argument_of_the_wrong_type():
    """Issue 56: `db=42` was a bare TypeError from pathlib. Each argument of a type the API
    does not take is an InputTypeError (an InputError and a TypeError) naming it and what
    it accepts, before any search."""
    from morello_asp import SpecHole, parse_spec
    from morello_asp.errors import InputError, InputTypeError
    from morello_asp.synthesis import synthesize, synthesize_all

    cases = [
        (dict(db=42), r"db=42: expected a memo table file path \(str or os.PathLike\), None"),
        (dict(db=b"m.db"), "db=b'm.db': expected a memo table file path"),
        (dict(rules=42), "rules=42: expected a rule file path or rule set name"),
        (dict(rules=[1.5]), r"rules: 1.5 \(float\) is not a rule file path"),
        (dict(progress="yes"), "progress='yes': expected a morello_asp.solver.search.dp.Progress"),
    ]
    for kw, want in cases:
        with pytest.raises(InputTypeError, match=want) as e:
            synthesize(TINY, **kw)
        assert isinstance(e.value, InputError) and isinstance(e.value, TypeError)
    with pytest.raises(InputTypeError, match="db=42"):
        synthesize_all(SpecHole(parse_spec(TINY)), db=42)
    assert synthesize(TINY, db=None, progress=False).is_complete  # False (and True) say whether to show it


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc, where no file can be created")
@pytest.mark.parametrize("option", ["--out", "--graph"])
def test_an_output_file_that_cannot_be_written_is_one_line(capsys, option):
    """The directory exists (the argument check passes, and for root every directory is
    writable to access(2)), but the write fails: one line naming the file, exit 2."""
    path = f"/proc/morello-asp-test{'.json' if option == '--out' else '.dot'}"
    rc, _, err = run_main(capsys, ["synth", TINY, "-q", "--no-db", option, path])
    check_one_line(rc, err, 2, f"cannot write {path}:")


# ---------------------------------------------------------------------------- options
OPTIONS = [
    (["verify", "--layout", "[1, 0, 1 p(4)]", "--shape", "6xZ"], "expected a shape"),
    (["verify", "--layout", "[1, 0, 1 p(4)]", "--shape", "0x8"], "dimensions must be positive"),
    (["verify", "--layout", "[1, 0, 1 p(4)]", "--shape", "٦x8"], "expected a shape"),
    (["verify", "--layout", "[1, 0, 1 p(4)]", "--shape", "4294967296x8"], "at most 2147483647"),
    (["verify", "--layout", "[1, 0, 1 p(0)]", "--shape", "6x8"], "pack size must be from 1"),
    (["verify", "--layout", "[1, 0, 1 p(4)]"], "--layout needs --shape"),
    (["verify", "--layout", "rows", "--shape", "6x8"], "expected row_major"),
    (["run", TINY, "--seed", "-1"], "argument --seed"),
    (["run", TINY, "--seed", "x"], "argument --seed"),
    (["bench", TINY, "--reps", "0"], "argument --reps"),
    (["bench", TINY, "--reps", "١"], "argument --reps"),
    (["synth", TINY, "--numpy-threads", "-1"], "argument --numpy-threads"),
    (["db", "verify", "x.db", "--limit", "0"], "argument --limit"),
    (["synth", TINY, "--emit", "pdf"], "argument --emit"),
    (["frobnicate"], "invalid choice"),
    (["synth"], "required"),
    (["query", TINY], "the default one is off (MORELLO_ASP_DB=off)"),
    (["synth", TINY, "--target", "nosuch"], "unknown target"),
    (["synth", TINY, "--guide", "nosuch"], "guide"),
]


@pytest.mark.parametrize("argv,want", OPTIONS, ids=[f"opt{i}" for i in range(len(OPTIONS))])
def test_bad_option(capsys, argv, want):
    rc, out, err = run_main(capsys, argv)
    check_one_line(rc, err, 2, want)


# ----------------------------------------------------------------------- files: rules
@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    (d / "latin1.lp").write_bytes(b"a(1).\n% caf\xe9\n")
    (d / "syntax.lp").write_text("forbid(S, A) :- cand(S, A) A.\n")
    (d / "unsafe.lp").write_text("forbid(S, A) :- cand(S, B).\n")
    (d / "loop.lp").write_text("n(0).\nn(X+1) :- n(X).\n")
    (d / "loop_per_spec.lp").write_text("n(S, 0) :- spec(S, _).\nn(S, X+1) :- n(S, X).\n")
    (d / "typo.lp").write_text("forbid(S, A) :- cand(S, A), A = move(_, vrff, _, _).\n")
    (d / "adir").mkdir()
    (d / "adir.lp").mkdir()
    (d / "prog_garbage.json").write_text("{not json")
    (d / "prog_wrong.json").write_text(
        json.dumps({"format": "morello-asp-program", "version": 1, "program": {"node": "tile"}})
    )
    (d / "prog_list.json").write_text("[1, 2, 3]")
    (d / "prog_latin1.json").write_bytes(b'{"x": "caf\xe9"}')
    assert main(["synth", TINY, "-q", "--out", str(d / "prog.json")]) == 0
    return d


RULES = [
    ("nosuch.lp", "rule file not found"),
    ("nosuch_rule_set", "rule file not found"),
    ("adir", "is a directory"),
    ("adir.lp", "is a directory"),
    ("latin1.lp", "not UTF-8"),
    ("syntax.lp", "syntax.lp"),
    ("unsafe.lp", "unsafe.lp"),
]


@pytest.mark.parametrize("name,want", RULES, ids=[r[0] for r in RULES])
def test_bad_rule_file(capsys, files, name, want):
    arg = name if name.startswith("nosuch") else str(files / name)
    for cmd in (
        ["synth", TINY, "-q", "--rules", arg],
        ["explain", TINY, "--rules", arg],
        ["run", TINY, "--rules", arg],
        ["verify", str(files / "prog.json"), "--rules", arg],
    ):
        rc, out, err = run_main(capsys, cmd)
        check_one_line(rc, err, 2, want)


def test_bad_target_file(capsys, files):
    rc, out, err = run_main(capsys, ["synth", TINY, "-q", "--target", str(files / "latin1.lp")])
    check_one_line(rc, err, 2, "target file")
    rc, out, err = run_main(capsys, ["synth", TINY, "-q", "--target", str(files / "adir.lp")])
    check_one_line(rc, err, 2, "is a directory")


def test_typo_in_rule_file_is_a_warning(capsys, files):
    rc, out, err = run_main(capsys, ["synth", TINY, "-q", "--rules", str(files / "typo.lp")])
    assert rc == 0 and "cost" in out
    assert err.count("\n") == 1 and "warning" in err and "vrff" in err and "did you mean vrf" in err, err


VECTOR_TEMPLATE = """tgt_kernel(my_madd).
kernel_applies(S, my_madd) :- kernel_applies(S, mult_add).
kernel_cost(S, my_madd, 0) :- kernel_applies(S, my_madd).
tgt_kernel_c(my_madd, any, "{ {vt} t; {out} += {lhs} * {rhs}; }").
"""


@pytest.mark.parametrize("extra", [[], ["--run"], ["--emit", "c"]], ids=["out", "run", "emit-c"])
def test_a_template_that_needs_a_vector_operand_saves_no_program(capsys, tmp_path, extra):
    """Issue 56: {vt} (and {pfx}, {vs}, {nvec}, {bits}, {X_v}, @each) in a kernel's C
    template needs an operand in vector registers; a kernel applied without one made
    synth --out save the program first and refuse it after. The program is lowered first:
    one line names the kernel, the placeholder and the rule to fix, and no file is left
    that `run` would refuse."""
    rules = tmp_path / "vk.lp"
    rules.write_text(VECTOR_TEMPLATE)
    out = tmp_path / "p.json"
    rc, stdout, err = run_main(
        capsys, ["synth", TINY, "-q", "--no-db", "--rules", str(rules), "--out", str(out), *extra]
    )
    check_one_line(rc, err, 2, "kernel MyMadd on MatmulAccum(1x1x1x1, L1, L1, L1): its C template uses {vt}")
    assert "needs an operand in vector registers" in err and "kernel_applies(S, my_madd) must require one" in err
    assert f"the program was not saved to {out}" in err and not out.exists() and not stdout, err
    # a program saved otherwise (its JSON printed) is refused by `run`: its proof, which
    # runs first, refutes what codegen would refuse (issue 57), with codegen's reason
    rc, stdout, err = run_main(capsys, ["synth", TINY, "-q", "--no-db", "--rules", str(rules), "--emit", "json"])
    assert rc == 0
    out.write_text(stdout)
    rc, _, err = run_main(capsys, ["run", str(out), "--rules", str(rules)])
    check_one_line(rc, err, 1, "not proved legal")
    assert "its C template uses {vt}, which needs an operand in vector registers" in err


@pytest.mark.parametrize("command", ["synth", "explain", "precompute", "db verify"])
def test_quiet_keeps_the_warnings_about_the_users_rule_files(capsys, tmp_path, command):
    """Issue 56: -q silences progress and statistics, never a warning about the user's own
    inputs. Each command gets its own copy of the file (a process warns once per file as
    it is)."""
    typo = tmp_path / "typo.lp"
    typo.write_text("forbid(S, A) :- cand(S, A), A = move(_, vrff, _, _).\n")
    db = tmp_path / "m.db"
    if command == "db verify":
        assert main(["synth", TINY, "-q", "--db", str(db), "--rules", str(typo)]) == 0
        typo.write_text(typo.read_text() + "% the same rules, checked again\n")  # (a new file to this process)
        argv = ["db", "verify", str(db), "-q", "--limit", "2", "--rules", str(typo)]
    elif command == "precompute":
        argv = ["precompute", "--db", str(db), "--max-size", "2", "-q", "--rules", str(typo)]
    else:
        argv = [command, TINY, "-q", "--no-db", "--rules", str(typo)]
    capsys.readouterr()
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 0, err
    warnings = [ln for ln in err.splitlines() if ln.startswith("morello-asp: warning:")]
    assert len(warnings) == 1 and "vrff" in warnings[0] and "did you mean vrf" in warnings[0], err
    assert err.count("\n") == 1, err  # and nothing else: no progress, no statistics


@pytest.mark.parametrize("name", ["loop.lp", "loop_per_spec.lp"])
def test_rule_file_that_grounds_for_ever_times_out(files, name):
    """n(X+1) :- n(X) grounds for ever: a time-out names the file (in the preflight for
    the first, in the search's own clingo call for the second), no worker is left."""
    env = dict(os.environ, MORELLO_ASP_GROUND_TIMEOUT="2")
    p = subprocess.run(
        [*CLI, "synth", TINY, "-q", "--rules", str(files / name)], capture_output=True, text=True, env=env, timeout=90
    )
    check_one_line(p.returncode, p.stderr, 2, "did not finish in 2 s of CPU time")
    assert name in p.stderr


# --------------------------------------------------------------------- files: programs
PROGRAMS = [
    ("missing.json", "no program file"),
    ("adir", "is a directory"),
    ("prog_garbage.json", "cannot read program"),
    ("prog_wrong.json", "prog_wrong.json"),
    ("prog_list.json", "not a morello-asp program"),
    ("prog_latin1.json", "cannot read program"),
]


@pytest.mark.parametrize("name,want", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_bad_program_file(capsys, files, name, want):
    for cmd in ("run", "bench", "verify"):
        rc, out, err = run_main(capsys, [cmd, str(files / name)])
        check_one_line(rc, err, 2, want)


# ----------------------------------------------------------------------- files: memo
@pytest.fixture(scope="module")
def good_db(tmp_path_factory):
    d = tmp_path_factory.mktemp("memo")
    db = d / "good.db"
    assert main(["synth", TINY, "-q", "--db", str(db)]) == 0
    con = sqlite3.connect(str(db))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    return db


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"


def _bad_memo(kind: str, d: Path, good: Path) -> Path:
    p = d / f"{kind}.db"
    if kind == "garbage":
        p.write_bytes(os.urandom(4096))
    elif kind == "text":
        p.write_text("hello, world\n")
    elif kind == "truncated":
        p.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    elif kind == "header_only":
        p.write_bytes(good.read_bytes()[:60])
    elif kind == "foreign":
        con = sqlite3.connect(str(p))
        con.execute("CREATE TABLE users(id INTEGER, name TEXT)")
        con.execute("INSERT INTO users VALUES (1, 'ada')")
        con.commit()
        con.close()
    elif kind == "directory":
        p.mkdir()
    elif kind == "missing_parent":
        p = d / "no" / "such" / "dir" / "m.db"
    return p


MEMO_KINDS = {
    "garbage": "not an SQLite database",
    "text": "not an SQLite database",
    "truncated": "truncated",
    "header_only": "truncated",
    "foreign": "something else",
    "directory": "is a directory",
    "missing_parent": "does not exist",
}


def _memo_commands(p: Path, tmp: Path):
    yield ["synth", TINY, "-q", "--db", str(p)]
    yield ["query", TINY, "--db", str(p)]
    yield ["explain", TINY, "--db", str(p)]
    yield ["db", "stats", str(p)]
    yield ["db", "compact", str(p)]
    yield ["db", "export", str(p), str(tmp / "out.jsonl")]
    yield ["db", "verify", str(p), "-q"]


@pytest.mark.parametrize("kind", list(MEMO_KINDS))
def test_memo_file_not_ours_is_refused_untouched(capsys, tmp_path, good_db, kind):
    p = _bad_memo(kind, tmp_path, good_db)
    before = _digest(p) if p.exists() else None
    listing = sorted(q.name for q in tmp_path.iterdir())
    for argv in _memo_commands(p, tmp_path):
        rc, out, err = run_main(capsys, argv)
        want = MEMO_KINDS[kind]
        if kind == "missing_parent" and argv[0] in ("query", "db"):  # these never create a table
            want = "no memo table"
        check_one_line(rc, err, 2, want)
        assert str(p.name) in err or "no memo table" in err, err
        assert (_digest(p) if p.exists() else None) == before, f"{argv} changed {p}"
        assert sorted(q.name for q in tmp_path.iterdir()) == listing, f"{argv} left files behind"


def test_foreign_sqlite_gets_no_tables_through_the_api(tmp_path, good_db):
    from morello_asp.errors import MemoError
    from morello_asp.synthesis import synthesize

    p = _bad_memo("foreign", tmp_path, good_db)
    with pytest.raises(MemoError, match="something else"):
        synthesize(TINY, db=p)
    con = sqlite3.connect(str(p))
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["users"]
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL
    con.close()


def _export(good_db, tmp_path) -> list[str]:
    out = tmp_path / "ok.jsonl"
    assert main(["db", "export", str(good_db), str(out)]) == 0
    return out.read_text().splitlines()


def test_db_import_refuses_bad_lines_and_writes_nothing(capsys, tmp_path, good_db):
    lines = _export(good_db, tmp_path)
    capsys.readouterr()
    head, row = lines[0], lines[1]
    cases = {
        "empty": ("", "is empty"),
        "not_json": ("garbage\n", "line 1: not JSON"),
        "no_meta": ('{"meta": 1}\n', "line 1"),
        "old_schema": (json.dumps({"meta": {**json.loads(head)["meta"], "schema": "1"}}) + "\n", "schema '1'"),
        "row_not_json": (f"{head}\n{row}\nnot json\n", "line 3"),
        "row_missing_key": (f'{head}\n{{"key": 5}}\n', "line 2"),
        "row_bad_box": (f'{head}\n{{"key": "{{}}", "lo": [1], "hi": [0], "value": {{}}}}\n', "line 2"),
        "row_bad_value": (
            f"{head}\n{json.dumps({**json.loads(row), 'value': {'a': {'rewrite': 'warp'}}})}\n",
            "line 2",
        ),
        "latin1": (None, "not UTF-8"),
    }
    for name, (text, want) in cases.items():
        src = tmp_path / f"{name}.jsonl"
        if text is None:
            src.write_bytes(b"\xe9\xe9\n")
        else:
            src.write_text(text)
        target = tmp_path / f"new_{name}.db"
        rc, out, err = run_main(capsys, ["db", "import", str(target), str(src)])
        check_one_line(rc, err, 2, want)
        assert src.name in err
        assert not target.exists(), f"{name}: a table was created"
    for argv, want in (
        (["db", "import", str(tmp_path / "n.db"), str(tmp_path / "nosuch.jsonl")], "no file"),
        (["db", "import", str(tmp_path / "n.db"), str(tmp_path)], "is a directory"),
    ):
        rc, out, err = run_main(capsys, argv)
        check_one_line(rc, err, 2, want)
    # a good file imports, into a new table and not into a foreign one
    good = tmp_path / "good.jsonl"
    good.write_text("\n".join(lines) + "\n")
    rc, out, err = run_main(capsys, ["db", "import", str(tmp_path / "fresh.db"), str(good)])
    assert rc == 0 and f"{len(lines) - 1} rectangles read" in out, err
    foreign = _bad_memo("foreign", tmp_path, good_db)
    before = _digest(foreign)
    rc, out, err = run_main(capsys, ["db", "import", str(foreign), str(good)])
    check_one_line(rc, err, 2, "something else")
    assert _digest(foreign) == before


def test_db_export_into_a_missing_directory(capsys, tmp_path, good_db):
    for out, want in ((tmp_path / "no" / "dir" / "x.jsonl", "does not exist"), (tmp_path, "is a directory")):
        rc, _, err = run_main(capsys, ["db", "export", str(good_db), str(out)])
        check_one_line(rc, err, 2, want)


# ------------------------------------------------------------ environment and pipes
ENV = [
    ({"MORELLO_ASP_JOBS": "abc"}, ["synth", TINY, "-q"], "MORELLO_ASP_JOBS='abc'"),
    ({"MORELLO_ASP_JOBS": "0"}, ["synth", TINY, "-q"], "MORELLO_ASP_JOBS='0'"),
    ({"MORELLO_ASP_JOBS": "-3"}, ["synth", TINY, "-q"], "MORELLO_ASP_JOBS"),
    ({"MORELLO_ASP_GROUND_TIMEOUT": "soon"}, ["synth", TINY, "-q"], "MORELLO_ASP_GROUND_TIMEOUT"),
    ({"MORELLO_ASP_GROUND_TIMEOUT": "nan"}, ["synth", TINY, "-q"], "MORELLO_ASP_GROUND_TIMEOUT"),
    ({"MORELLO_ASP_CACHE": "FILE"}, ["run", TINY], "is a file"),
    ({"MORELLO_ASP_PREFETCH": "maybe"}, ["synth", TINY, "-q", "--no-db", "--emit", "c"], "MORELLO_ASP_PREFETCH"),
]


@pytest.mark.parametrize("env,argv,want", ENV, ids=[f"env{i}" for i in range(len(ENV))])
def test_bad_environment(tmp_path, env, argv, want):
    env = {k: (str(tmp_path / "afile") if v == "FILE" else v) for k, v in env.items()}
    (tmp_path / "afile").write_text("not a directory")
    p = subprocess.run([*CLI, *argv], capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    check_one_line(p.returncode, p.stderr, 2, want)


def test_closed_stdout_exits_quietly(good_db):
    """`morello-asp db stats FILE | head -0`: status 141, nothing on stderr (no
    BrokenPipeError); --help into a closed pipe is quiet too (argparse ignores the error)."""
    for argv, codes in ((["db", "stats", str(good_db)], (141,)), (["--help"], (0, 141))):
        p = subprocess.Popen([*CLI, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()  # before the command writes anything
        err = p.stderr.read().decode()
        assert p.wait(timeout=60) in codes, (argv, err)
        assert err == "", err


def test_internal_error_is_one_line_exit_3_and_debug_shows_the_traceback(capsys, monkeypatch):
    import morello_asp.cli.schedule as cs

    def boom(args):
        raise ValueError("something impossible")

    monkeypatch.setattr(cs, "_parse", boom)
    rc, out, err = run_main(capsys, ["parse", TINY])
    assert rc == 3 and "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("morello-asp: internal error: ValueError: something impossible"), err
    rc, out, err = run_main(capsys, ["--debug", "parse", TINY])
    assert rc == 3 and "Traceback" in err and "something impossible" in err
    rc, out, err = run_main(capsys, ["synth", "Matmul(2x2x, f32)", "--debug"])  # --debug anywhere
    assert rc == 2 and "Traceback" in err


def test_help_documents_exit_statuses(capsys):
    rc, out, err = run_main(capsys, ["--help"])
    assert rc == 0
    for code in ("130", "141", "  3 ", "  2 ", "  1 "):
        assert code in out, code
    assert "--debug" in out and "MORELLO_ASP_GROUND_TIMEOUT" in out


def _benchmark_refusal(script: str, *args: str, timeout: float = 120) -> list[str]:
    """A benchmark script's stderr lines, asserting it exited 2 with no traceback."""
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run(
        [sys.executable, str(root / "benchmarks" / script), *args], capture_output=True, text=True, timeout=timeout
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    return [ln for ln in r.stderr.splitlines() if ln.strip()]


@pytest.mark.parametrize("script", ["softmax.py", "conv.py"])
def test_a_benchmark_script_refuses_a_bad_table_in_one_line(tmp_path, script):
    """The benchmark scripts README points to have the CLI's error boundary: a memo table
    that is not one (or was built by other rules) is one line and exit 2, not a traceback."""
    bad = tmp_path / "bad.db"
    bad.write_text("not a table\n")
    args = ["--only", "1x16384", "--no-torch"] if script == "softmax.py" else ["--only", "1x64x256x56x56x1x1"]
    # --hold-back: the tests leave OPENBLAS_CORETYPE and the like as the machine sets them
    err = _benchmark_refusal(script, "--db", str(bad), "--rounds", "1", "--hold-back", *args, timeout=300)
    errors = [ln for ln in err if "error" in ln]  # progress lines (conv.py's) may precede it
    assert len(errors) == 1 and err[-1] == errors[0], err
    assert str(bad) in errors[0] and "not a memo table" in errors[0], err


def test_panel_width_refuses_a_width_that_does_not_divide_the_size_in_one_line():
    """benchmarks/panel_width.py checks its widths before it searches: one line, exit 2."""
    err = _benchmark_refusal("panel_width.py", "--size", "1024", "--widths", "100")
    assert err == ["panel_width.py: error: width 100 must be a multiple of 16 that divides 1024"], err


def test_pruning_benchmark_refuses_an_upper_bound_below_the_optimum_in_one_line():
    err = _benchmark_refusal("pruning.py", "--size", "4", "--factors", "1", "0.5")
    assert err == [
        "pruning.py: error: --factors 0.5: an upper bound is at least the optimum (a factor of 1 or more)"
    ], err


def test_synthesis_benchmark_refuses_an_unknown_target_in_one_line():
    err = _benchmark_refusal("synthesis.py", "--sizes", "4", "--target", "nosuch")
    assert len(err) == 1 and err[0].startswith("synthesis.py: error: unknown target 'nosuch'"), err


def test_the_revision_comparisons_refuse_a_revision_or_spec_they_cannot_use_in_one_line():
    """differential.py and replay.py check the base revision (and differential.py each
    spec) before installing or searching anything."""
    err = _benchmark_refusal("differential.py", "--base", "no-such-revision")
    assert len(err) == 1 and err[0].startswith("differential.py: error: git rev-parse --short no-such-revision"), err
    err = _benchmark_refusal("differential.py", "--base", "HEAD", "--specs", "Nope(3)")
    assert len(err) == 1 and "expected a spec kind" in err[0] and "Nope(3)" in err[0], err
    err = _benchmark_refusal("replay.py", "--base", "no-such-revision")
    assert len(err) == 1 and err[0].startswith("replay.py: error: git rev-parse --short no-such-revision"), err
