"""Message header and per-subscriber record buffers of the load generator.

The first :data:`HEADER_BYTES` (20) bytes of every payload are the header
``<HQQH``: publisher id, sequence number, send time (ns, CLOCK_MONOTONIC),
topic index. A subscriber keeps one record per received message (the header,
the time its code read the message and the kernel's receive time of that
read, both ns CLOCK_MONOTONIC, the latter 0 where the socket gave none):
:data:`RECORD_DTYPE`, :data:`STRIDE` (36) bytes.
"""

from __future__ import annotations

import struct

import numpy as np

__all__ = ["HEADER", "HEADER_BYTES", "RECORD_DTYPE", "STRIDE", "PROBE_SEQ"]

HEADER = struct.Struct("<HQQH")  # publisher id, seq, t_send_ns, topic index
HEADER_BYTES = HEADER.size  # 20
RECORD_DTYPE = np.dtype(
    {
        "names": ["pub", "seq", "t_send_ns", "topic", "t_recv_ns", "t_kernel_ns"],
        "formats": ["<u2", "<u8", "<u8", "<u2", "<i8", "<i8"],
        "offsets": [0, 2, 10, 18, 20, 28],
        "itemsize": 36,
    }
)
STRIDE = RECORD_DTYPE.itemsize
PROBE_SEQ = 2**64 - 1
_SEQ_TIME = struct.Struct("<QQ")  # patched at header offset 2


class _Records:
    """Growable record buffer: ``bytearray`` chunks of :data:`RECORD_DTYPE` records."""

    def __init__(self, first_records):
        self.chunk_records = int(first_records)
        self.done = []
        self.buf = bytearray(self.chunk_records * STRIDE)
        self.off = 0
        self.count_before = 0  # records in finished chunks

    def ensure(self, n_records):
        if self.off + n_records * STRIDE > len(self.buf):
            self.done.append(self.buf[: self.off])
            self.count_before += self.off // STRIDE
            self.chunk_records = max(min(self.chunk_records * 2, 4_000_000), n_records)
            self.buf = bytearray(self.chunk_records * STRIDE)
            self.off = 0

    @property
    def count(self):
        return self.count_before + self.off // STRIDE

    def record_at(self, k):
        """``HEADER`` fields of record ``k`` of the current chunk."""
        return HEADER.unpack_from(self.buf, k * STRIDE)

    def array(self):
        parts = [np.frombuffer(bytes(c), dtype=RECORD_DTYPE) for c in self.done + [self.buf[: self.off]]]
        return np.concatenate(parts) if parts else np.zeros(0, RECORD_DTYPE)


def _flag_records(rec):
    """(duplicate, out_of_order) boolean arrays, in arrival order."""
    n = len(rec)
    dup = np.zeros(n, bool)
    ooo = np.zeros(n, bool)
    if n == 0:
        return dup, ooo
    pub = rec["pub"]
    seq = rec["seq"]
    order = np.lexsort((np.arange(n), seq, pub))
    same = (pub[order][1:] == pub[order][:-1]) & (seq[order][1:] == seq[order][:-1])
    dup[order[1:][same]] = True
    for p in np.unique(pub):
        idx = np.flatnonzero(pub == p)
        s = seq[idx]
        prev_max = np.maximum.accumulate(s)[:-1]
        ooo[idx[1:]] = s[1:] < prev_max
    return dup, ooo
