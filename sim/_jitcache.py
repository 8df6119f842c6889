"""Numba's on-disk cache, one directory per version of the compiled sources.

Numba reuses a cached kernel while the file that defines it is unchanged,
but pubsim's kernels inline helpers from other modules (``inline="always"``:
:func:`pubsim.sim.kernels.quota_finish` runs inside
``models/mechanisms/iothreads/pass_kernel.py``'s loop, among others). After
an edit of the helper's module, the caller's cached machine code would still
be the old helper's. So the cache lives in a directory named by a digest of
the names, sizes and modification times of every source file of
``pubsim.sim`` and ``pubsim.models``: any edit moves every kernel to a fresh
directory. A ``NUMBA_CACHE_DIR`` set by the user is left alone.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from pathlib import Path

import numba

__all__ = ["configure", "sources_digest"]

_PACKAGES = ("pubsim.sim", "pubsim.models")


def sources_digest(packages: tuple[str, ...] = _PACKAGES) -> str:
    """Digest of the (relative name, size, mtime) of the ``.py`` files of ``packages``."""
    h = hashlib.sha256()
    for name in packages:
        spec = importlib.util.find_spec(name)  # the location only: the package is not executed
        for root in (spec.submodule_search_locations if spec else None) or ():
            base = Path(root)
            for path in sorted(base.rglob("*.py")):
                st = path.stat()
                h.update(f"{name}/{path.relative_to(base)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


def configure() -> None:
    """Point numba's cache at the directory of the current sources (unless the user chose one)."""
    if os.environ.get("NUMBA_CACHE_DIR") or numba.config.CACHE_DIR:
        return
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pubsim-numba"
    target = base / sources_digest()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError:  # no writable cache home: numba's default (next to the sources) stays
        return
    numba.config.CACHE_DIR = str(target)
