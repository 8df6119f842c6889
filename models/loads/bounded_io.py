"""Reading untrusted trace files with bounded memory.

The trace readers (:mod:`pubsim.models.loads.readers`) take files recorded by
others, possibly truncated or corrupted. Two things here keep a corrupt file
from allocating what its bytes claim:

- :func:`bounded_lines`: the lines of a (gzip'd) text file, read in binary
  with a cap on each line's length, so a gzip member that inflates into one
  huge line never sits in memory whole (the line is skipped in chunks and
  reported as too long);
- :class:`BoundedReads`: a file object whose ``read(n)`` refuses ``n`` above
  a bound (or negative), raising :class:`CorruptLength` before the caller
  allocates ``n`` bytes. dpkt reads a pcap record with ``read(caplen)`` and a
  pcapng block with ``read(block_length - 8)``; Python allocates the whole
  ``n`` up front, so a bit flip in a length field would cost gigabytes.

:func:`shorten` and :func:`clip` make the one-line renderings of a rejected value that the
readers' summaries keep as examples.
"""

from __future__ import annotations

__all__ = ["CorruptLength", "BoundedReads", "bounded_lines", "shorten", "clip", "LINE_TOO_LONG"]

LINE_TOO_LONG = object()
"""Placeholder :func:`bounded_lines` yields instead of the text of a line over the cap."""

_DISCARD_CHUNK = 1 << 16


class CorruptLength(ValueError):
    """A length field asks for more bytes than the bound (or a negative count)."""

    def __init__(self, n: int, bound: int):
        self.n = n
        self.bound = bound
        super().__init__(f"length field claims {n} bytes (bound {bound})")


class BoundedReads:
    """A binary file whose ``read(n)`` never allocates more than ``max_read_bytes``.

    Parameters
    ----------
    fh : binary file object
    max_read_bytes : int
        Largest single read, bytes. Readers of record-oriented formats read
        headers in small fixed sizes and records with a size taken from the
        file: a larger (or negative) size can only come from a corrupt
        length field.
    """

    def __init__(self, fh, max_read_bytes: int):
        self._fh = fh
        self.max_read_bytes = int(max_read_bytes)
        self.name = getattr(fh, "name", "<file>")

    def read(self, n=-1):
        if n is None or n < 0 or n > self.max_read_bytes:
            raise CorruptLength(-1 if n is None else int(n), self.max_read_bytes)
        return self._fh.read(n)

    def seek(self, offset, whence=0):
        return self._fh.seek(offset, whence)

    def tell(self):
        return self._fh.tell()

    def fileno(self):
        return self._fh.fileno()


def bounded_lines(fh, max_line_bytes: int):
    """Lines of a binary file object, at most ``max_line_bytes`` each in memory.

    Parameters
    ----------
    fh : binary file object with ``readline(limit)`` (``open(.., "rb")``, ``gzip.open``)
    max_line_bytes : int
        Longest line kept, bytes, without its line end.

    Yields
    ------
    (int, str or LINE_TOO_LONG, int)
        Line number (1-based), the line decoded as UTF-8 (bad bytes replaced)
        with its line end, or :data:`LINE_TOO_LONG`, and the line's length in
        bytes. Line ends are ``\\n``, ``\\r\\n`` or ``\\r``, as in text mode
        with universal newlines, so line numbers match ``open(.., "rt")``.

    Raises
    ------
    OSError, EOFError, zlib.error
        From the file (a truncated or corrupt gzip stream); lines already
        yielded stay valid.
    """
    lineno = 0
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            return
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            n = len(raw)
            while raw and not raw.endswith(b"\n"):  # drop the rest in chunks
                raw = fh.readline(_DISCARD_CHUNK)
                n += len(raw)
            lineno += 1
            yield lineno, LINE_TOO_LONG, n
            continue
        for piece in raw.splitlines(keepends=True) if b"\r" in raw else (raw,):
            lineno += 1
            yield lineno, piece.decode("utf-8", errors="replace"), len(piece)


def shorten(value, limit: int = 60) -> str:
    """``repr(value)`` cut to about ``limit`` characters (saying how long it was)."""
    return clip(repr(value), limit)


def clip(text: str, limit: int = 80) -> str:
    """``text`` without its line end, cut to about ``limit`` characters (saying how long it was)."""
    text = text.rstrip("\r\n")
    if len(text) <= limit:
        return text
    return f"{text[: limit - 20]}...({len(text)} chars)"
