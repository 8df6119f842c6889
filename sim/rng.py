"""Independent, reproducible random streams.

Every stochastic part of a model draws from its own
:class:`numpy.random.Generator`, spawned from one :class:`numpy.random.SeedSequence`
per (seed, replication, component, purpose). The component name is turned into
an integer with BLAKE2b, which is stable across processes and Python versions
(unlike the salted built-in ``hash``). No global random state is used.

:class:`DrawStream` hands out a distribution's draws in order, drawing them in
blocks. Two drivers that consume the same stream in the same order get the
same numbers whatever their batch sizes, which is what lets the fast path and
the reference driver agree exactly.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import ConfigError

__all__ = ["stable_key", "StreamFactory", "DrawStream"]


def stable_key(name: str) -> int:
    """Map a name to a 32-bit integer, identically in every process.

    Parameters
    ----------
    name : str
        Component or purpose name.

    Returns
    -------
    int
        First four bytes of the BLAKE2b digest of the UTF-8 name.
    """
    digest = hashlib.blake2b(name.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "little")


class StreamFactory:
    """Spawn one generator per component of one replication.

    Parameters
    ----------
    seed : int
        Root entropy of the experiment.
    replication : int
        Replication index; each replication gets disjoint streams.
    """

    def __init__(self, seed: int, replication: int = 0) -> None:
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ConfigError("seed", seed, "a non-negative integer")
        self.seed = int(seed)
        self.replication = int(replication)

    def generator(self, component: str, purpose: str = "") -> np.random.Generator:
        """Return the generator of ``component`` for ``purpose``.

        The same (seed, replication, component, purpose) always gives the same
        stream; different ones give statistically independent streams.
        """
        key = (self.replication, stable_key(component), stable_key(purpose))
        seq = np.random.SeedSequence(entropy=self.seed, spawn_key=key)
        return np.random.Generator(np.random.PCG64(seq))

    def draws(self, dist: Any, component: str, purpose: str, block: int = 4096) -> DrawStream:
        """A :class:`DrawStream` of ``dist`` on this component's stream (its
        generator made at the first draw: many streams of a large model, a
        constant jitter or a link's loss draws at probability 0, never draw)."""
        return DrawStream(dist, functools.partial(self.generator, component, purpose), block=block)


class DrawStream:
    """Draws of one distribution, consumed in order, generated in blocks.

    Parameters
    ----------
    dist : sim.distributions.Distribution
        What to draw.
    rng : numpy.random.Generator or callable
        The stream to draw from, or a function returning it (called once, at
        the first use of :attr:`rng`; the same stream either way).
    block : int
        Number of draws generated at once.
    """

    def __init__(
        self, dist: Any, rng: np.random.Generator | Callable[[], np.random.Generator], block: int = 4096
    ) -> None:
        self.dist = dist
        self._rng: np.random.Generator | None = None
        self._make: Callable[[], np.random.Generator] | None = None
        if isinstance(rng, np.random.Generator):
            self._rng = rng
        else:
            self._make = rng
        self.block = int(block)
        self._buf = np.empty(0)
        self._pos = 0

    @property
    def rng(self) -> np.random.Generator:
        """The generator drawn from (made now if it was given as a function)."""
        rng = self._rng
        if rng is None:
            make = self._make
            if make is None:
                raise RuntimeError("a draw stream without a generator")
            rng = self._rng = make()
            self._make = None
        return rng

    def __deepcopy__(self, memo: dict[int, Any]) -> DrawStream:
        """A stream at the same position with its own generator (same state);
        the distribution and the current block (never written in place) are shared.
        Cheap: the station snapshots of :mod:`pubsim.sim.optimistic` copy streams often."""
        new = DrawStream.__new__(DrawStream)
        new.dist, new.block, new._make, new._rng = self.dist, self.block, self._make, None
        if self._rng is not None:  # else the copy makes the same fresh generator when it first draws
            bit = type(self._rng.bit_generator)(0)
            bit.state = self._rng.bit_generator.state
            new._rng = np.random.Generator(bit)
        new._buf, new._pos = self._buf, self._pos
        memo[id(self)] = new
        return new

    def peek(self, n: int) -> np.ndarray:
        """The next ``n`` draws without consuming them (a view, not to be
        written); :meth:`skip` consumes them. Blocks are generated in the same
        order and sizes as :meth:`take` would generate them, so the stream's
        draws are the same whichever is used."""
        if self.dist.is_constant:
            return np.full(n, self.dist.mean, dtype=float)
        short = n - (len(self._buf) - self._pos)
        if short > 0:
            blocks = [self.dist.sample(self.rng, self.block) for _ in range(-(-short // self.block))]
            self._buf = np.concatenate([self._buf[self._pos :], *blocks])
            self._pos = 0
        return self._buf[self._pos : self._pos + n]

    def skip(self, n: int) -> None:
        """Consume ``n`` draws already seen with :meth:`peek`."""
        if not self.dist.is_constant:
            self._pos += n

    def take(self, n: int) -> np.ndarray:
        """Return the next ``n`` draws (a new array)."""
        if self.dist.is_constant:
            return np.full(n, self.dist.mean, dtype=float)
        out = np.empty(n)
        filled = 0
        while filled < n:
            if self._pos == len(self._buf):
                self._buf = self.dist.sample(self.rng, self.block)
                self._pos = 0
            k = min(n - filled, len(self._buf) - self._pos)
            out[filled : filled + k] = self._buf[self._pos : self._pos + k]
            self._pos += k
            filled += k
        return out
