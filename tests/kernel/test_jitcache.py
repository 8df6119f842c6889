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


def test_packets_and_service_times_from_table_columns_are_contiguous():
    """Numba compiles a kernel once per array layout (a fifo_run takes about 20 s): the station's
    arrays reach the kernels contiguous, whichever views the disciplines build them from."""
    import numpy as np

    from pubsim.sim.disciplines import Served
    from pubsim.sim.packets import Packets

    table = np.arange(24.0).reshape(6, 4)
    p = Packets(table[:, 0], table[:, 1], table[:, 2], table[:, 3], table[:, 0])
    assert all(getattr(p, f).flags.c_contiguous for f in ("t", "msg", "visit", "size", "pub_t"))
    assert p.t.tolist() == table[:, 0].tolist() and p.with_time(table[::-1, 1]).t.flags.c_contiguous
    served = Served(p, table[:, 1], table[:, 2], table[:, 3], Packets.empty(), table[:0, 0], np.empty(0, np.int64))
    served_end = Served(p, p.t, p.t, p.t, Packets.empty(), np.empty(0), np.empty(0, np.int64), service_end=table[:, 2])
    for a in (served.admit, served.start, served.depart, served.drop_t, served_end.service_end):
        assert a.flags.c_contiguous
    assert served.depart.tolist() == table[:, 3].tolist()
