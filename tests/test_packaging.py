"""What the wheel ships (issue 56): pyproject.toml names every package, each folder of logic
files included, so setuptools neither warns of a folder it would ship unnamed nor leaves a
package out (morello_asp.rewrites was missing from the wheel), and every .lp file, the
encodings' README and the call path's C source are package data. Checked on the source
tree against the configuration, without building (`python -m pip wheel --no-deps -w DIR .`
builds the wheel itself)."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folder(package: str) -> Path:
    """The source folder of a package, by the longest prefix package-dir maps."""
    dirs = CONFIG.get("package-dir", {})
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        head = ".".join(parts[:n])
        if head in dirs:
            return ROOT / dirs[head] / Path(*parts[n:])
    return ROOT / Path(*parts)


def _tree() -> dict[str, Path]:
    """Every folder of the package's sources that holds Python or logic files, by the
    package name it installs as."""
    out = {}
    for top in ("morello_asp", *CONFIG.get("package-dir", {})):
        base = _folder(top)
        for d in [base, *(p for p in base.rglob("*") if p.is_dir())]:
            if "__pycache__" in d.parts or not any(d.glob("*.py")) and not any(d.glob("*.lp")):
                continue
            out[".".join([top, *d.relative_to(base).parts])] = d
    return out


def _shipped(package: str, name: str) -> bool:
    data = CONFIG.get("package-data", {})
    return any(fnmatch.fnmatch(name, pat) for key in ("*", package) for pat in data.get(key, []))


def test_every_package_and_folder_of_logic_files_is_named():
    listed = set(CONFIG["packages"])
    tree = _tree()
    assert not set(tree) - listed, f"add to [tool.setuptools] packages: {sorted(set(tree) - listed)}"
    assert all(_folder(p).is_dir() for p in listed), [p for p in listed if not _folder(p).is_dir()]
    assert {"morello_asp.rewrites", "morello_asp.encodings.kinds", "morello_asp.encodings.options"} <= listed


def test_every_logic_file_and_data_file_is_package_data():
    tree = _tree()
    lp = [(p, f.name) for p, d in tree.items() for f in d.glob("*.lp")]
    assert len(lp) == len(list((ROOT / "encodings").rglob("*.lp"))) > 40
    assert all(_shipped(p, n) for p, n in lp), [f"{p}/{n}" for p, n in lp if not _shipped(p, n)]
    assert _shipped("morello_asp.encodings", "README.md") and _shipped("morello_asp.codegen", "fastcall.c")
