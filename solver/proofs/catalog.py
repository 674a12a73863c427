"""The z3 proofs of the layout catalog (layout_cand/3), remembered in the user's cache
directory: an engine proves every catalog layout when it starts, and z3's import and
those proofs were a fifth of a warm `query`.

Only a proof that succeeded is remembered, under a key of the layout, its rank, z3's
version and the text of the prover and of the layout code (solver/proofs/obligations.py,
morello_asp/layout.py), so a change of any of them proves again; a layout that does not
prove is proved (and reported) every time.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib.util import find_spec
from pathlib import Path

from morello_asp import layout
from morello_asp.user_cache import keep, user_cache_dir


@cache
def _code_stamp() -> str:
    h = hashlib.sha256()
    for f in (Path(__file__).with_name("obligations.py"), Path(layout.__file__)):
        h.update(f.read_bytes())
    z3 = find_spec("z3")  # its installed files stand for its version (importing z3 is slow)
    if z3 is not None and z3.origin:
        for f in sorted(Path(z3.origin).parent.glob("*.py")):
            st = f.stat()
            h.update(f"{f.name} {st.st_size} {st.st_mtime_ns}".encode())
    return h.hexdigest()


def prove_catalog_layout_cached(lay, rank: int):
    """(proved, the obligation when not proved), as verify.prove_catalog_layout says."""

    key = hashlib.sha256(f"{_code_stamp()}\0{rank}\0{lay!r}".encode()).hexdigest()
    marker = user_cache_dir() / "proofs" / key
    if marker.is_file():
        return True, None

    from morello_asp.solver.proofs.obligations import prove_catalog_layout  # z3: only when a proof is not remembered

    ob = prove_catalog_layout(lay, rank)
    if ob.status != "proved":
        return False, ob
    keep(marker, f"{lay} (rank {rank}): {ob.what}\n")  # a read-only cache: proved every time
    return True, None
