"""The load generator split by role: the package keeps today's names, each role lives in its module."""

from __future__ import annotations

import multiprocessing as mp

import pytest

import pubsim.calibration.harness.loadgen as L
from pubsim.calibration.harness.loadgen import (
    STRIDE,
    batch_size,
    pacing_batch,
    publisher,
    records,
    result,
    runner,
    spec,
    subscriber,
    subscriber_topics,
    topic_of,
)


def test_public_names_unchanged():
    assert L.__all__ == [
        "PROTOCOLS",
        "HEADER",
        "HEADER_BYTES",
        "RECORD_DTYPE",
        "PROBE_SEQ",
        "LoadSpec",
        "LoadResult",
        "HarnessError",
        "SetupTimeout",
        "run_load",
        "subscriber_topics",
        "topic_of",
    ]
    assert (STRIDE, batch_size, pacing_batch, subscriber_topics, topic_of) == (
        records.STRIDE,
        spec.batch_size,
        spec.pacing_batch,
        spec.subscriber_topics,
        spec.topic_of,
    )


def test_each_role_in_its_module():
    assert L.LoadSpec.__module__ == spec.__name__ and L.LoadResult.__module__ == result.__name__
    assert L.run_load.__module__ == runner.__name__
    assert publisher._publisher_main.__module__ == publisher.__name__
    assert subscriber._subscriber_main.__module__ == subscriber.__name__
    assert records.RECORD_DTYPE.itemsize == records.STRIDE == records.HEADER_BYTES + 8


@pytest.mark.skipif("forkserver" not in mp.get_all_start_methods(), reason="no forkserver here")
def test_forkserver_preloads_the_whole_package():
    ctx = runner._context()
    assert ctx.get_start_method() == "forkserver"
    assert runner.__package__ == L.__name__
