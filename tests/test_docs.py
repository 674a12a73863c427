"""The docs site builds (`mkdocs build --strict`), its CLI reference matches the CLI, and
the examples of README.md and docs/ run.

Which examples run (the convention the pages follow):

- a fenced ```python block is run in a fresh interpreter;
- in a fenced console block (```console, ```shell, ```sh, ```bash or a bare ```), every
  line that starts with `$ morello-asp` is run by bash (a trailing `\\` continues it),
  with this environment's `morello-asp`; other lines (output, `$ python benchmarks/...`,
  `$ make ...`) are not run;
- a fenced block with a title (```prolog title="no_vrf.lp"), in any language, is a file:
  it is written under its title before the page's examples run, so a rule file a page
  shows is the one its commands use;
- an HTML comment on the line before a fence marks it: `<!-- docs-test: skip -->` (never
  run: a placeholder, a cluster address, minutes of work), `<!-- docs-test: slow -->` (run
  only with the tests marked slow, after the page's quick examples).

A page's examples run in order, in one scratch directory (so `synth --out prog.json`
then `verify prog.json` works) that links the repository's `examples/` and
`encodings/`, as if run from the top of a checkout. Every example exits 0 within its
time limit, or the test fails with its output. The memo table is the default one
(`MORELLO_ASP_DB=on`) in a cache directory made for this test run
(`MORELLO_ASP_CACHE`): empty at the start, shared by the pages, so nothing is read from
or written to the user's cache.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
SHELL_LANGS = {"", "console", "shell", "sh", "bash"}
TIMEOUT = 600  # seconds per example, slow ones included

FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>```+|~~~+)\s*(?P<info>.*)$")
MARK = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<mark>skip|slow)\s*-->\s*$")
TITLE = re.compile(r"""title=["']([^"']+)["']""")


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    title: str | None
    mark: str | None  # "skip", "slow" or None
    text: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        """The `$ morello-asp ...` lines of a console block, continuations joined."""
        out: list[str] = []
        lines = self.text.split("\n")
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.startswith("$ morello-asp"):
                continue
            cmd = line[2:]
            while cmd.endswith("\\") and i < len(lines):
                cmd = cmd[:-1] + " " + lines[i].strip()
                i += 1
            out.append(cmd)
        return out


def blocks(page: Path, text: str | None = None) -> list[Block]:
    """The fenced blocks of a page (or of `text`, as if it were the page's), with the
    mark on the line before each."""
    lines = (page.read_text() if text is None else text).split("\n")
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(m.group("indent")) :])
            i += 1
        i += 1
        prev = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = MARK.match(prev)
        title = TITLE.search(info)
        lang = info.split()[0].lstrip(".{") if info.split() else ""
        out.append(
            Block(
                page,
                line=start + 1,
                lang=lang,
                title=title.group(1) if title else None,
                mark=mark.group("mark") if mark else None,
                text="\n".join(body),
            )
        )
    return out


def runnable(b: Block) -> bool:
    if b.mark == "skip" or b.title:
        return False
    return b.lang == "python" or (b.lang in SHELL_LANGS and bool(b.commands()))


def examples(page: Path, slow: bool) -> list[Block]:
    """A page's examples to run: the quick ones, or (slow) every one if any is slow."""
    found = [b for b in blocks(page) if runnable(b)]
    if slow:
        return found if any(b.mark == "slow" for b in found) else []
    return [b for b in found if b.mark != "slow"]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


QUICK = [p for p in PAGES if examples(p, slow=False)]
# the tutorial's quick examples take ~30 s: they run with the slow tests (the default
# suite stays under 5 minutes on 2 cores)
HEAVY = {"tutorial.md"}
SLOW = [p for p in PAGES if examples(p, slow=True)]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("morello_asp_cache")


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["MORELLO_ASP_DB"] = "on"
    env["MORELLO_ASP_CACHE"] = str(cache)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.pop("PYTHONPATH", None)
    return env


def run_page(page: Path, todo: list[Block], workdir: Path, cache: Path) -> None:
    for name in ("examples", "encodings"):
        (workdir / name).symlink_to(ROOT / name, target_is_directory=True)
    for b in blocks(page):
        if b.title:
            path = workdir / b.title
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(b.text + "\n")
    env = _env(cache)
    for n, b in enumerate(todo):
        if b.lang == "python":
            script = workdir / f"example_{n}.py"
            script.write_text(b.text + "\n")
            runs = [([sys.executable, str(script)], b.text)]
        else:
            runs = [(["bash", "-c", cmd], cmd) for cmd in b.commands()]
        for argv, shown in runs:
            try:
                r = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{b.where}: the example ran over {TIMEOUT} s:\n{shown}")
            assert r.returncode == 0, (
                f"{b.where}: the example exited {r.returncode}:\n{shown}\n"
                f"--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
            )


@pytest.mark.parametrize(
    "page", [pytest.param(p, marks=pytest.mark.slow) if p.name in HEAVY else p for p in QUICK], ids=_id
)
def test_examples_run(page, tmp_path, cache_dir):
    run_page(page, examples(page, slow=False), tmp_path, cache_dir)


@pytest.mark.slow  # the examples marked <!-- docs-test: slow --> (with their page's quick ones first)
@pytest.mark.parametrize("page", SLOW, ids=_id)
def test_slow_examples_run(page, tmp_path, cache_dir):
    run_page(page, examples(page, slow=True), tmp_path, cache_dir)


def test_the_convention_finds_examples():
    """The parser sees the pages' examples (a broken fence or a renamed page would
    silently leave none to run)."""
    readme = examples(ROOT / "README.md", slow=False)
    assert any(b.lang == "python" for b in readme) and any(b.commands() for b in readme)
    assert len(QUICK) >= 5, [_id(p) for p in QUICK]
    text = "```python\nx = 1\n```\n<!-- docs-test: skip -->\n```\n$ morello-asp synth SPEC \\\n  --run\n```\n"
    got = blocks(DOCS / "example.md", text)
    assert [(b.lang, b.mark) for b in got] == [("python", None), ("", "skip")]
    assert got[1].commands() == ["morello-asp synth SPEC  --run"] and not runnable(got[1])


def test_cli_reference_matches_the_cli():
    """docs/cli.md is what docs/gen_cli.py prints from the CLI's own --help (run it to
    update the page)."""
    r = subprocess.run(
        [sys.executable, str(DOCS / "gen_cli.py"), "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]


def test_the_site_builds_strictly(tmp_path):
    """`mkdocs build --strict`: every page in the nav, every link and anchor resolves,
    the included encodings/README.md is found."""
    for mod in ("mkdocs", "material"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{mod} is not installed (the docs extra: pip install -e '.[docs]')")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").is_file()
