"""The numba cache directory follows every compiled source (pubsim.sim._jitcache)."""

from __future__ import annotations

import os
import sys

import numba

from pubsim.sim import _jitcache


def test_digest_moves_when_any_source_changes(tmp_path, monkeypatch):
    pkg = tmp_path / "jitpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    helper = pkg / "sub" / "helper.py"
    helper.write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("jitpkg", None)
    before = _jitcache.sources_digest(("jitpkg",))
    assert _jitcache.sources_digest(("jitpkg",)) == before
    helper.write_text("X = 22\n")  # another size
    assert _jitcache.sources_digest(("jitpkg",)) != before
    st = helper.stat()
    os.utime(helper, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # same size, touched
    assert _jitcache.sources_digest(("jitpkg",)) != before


def test_the_package_cache_is_named_by_the_digest():
    if os.environ.get("NUMBA_CACHE_DIR"):  # the user's own directory is kept
        assert numba.config.CACHE_DIR == os.environ["NUMBA_CACHE_DIR"]
    else:
        assert numba.config.CACHE_DIR.endswith(_jitcache.sources_digest())


def test_a_chosen_directory_is_left_alone(monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", "/somewhere/else")
    _jitcache.configure()
    assert numba.config.CACHE_DIR == "/somewhere/else"
