"""Counter-based random numbers keyed by row position, so results do not depend on chunking.

:class:`RowRandom` stands in for the subset of :class:`numpy.random.Generator` the
row path uses (abduction of new rows, simulation of absent nodes, the noise of
discrete descendants, fresh draws). Every number it gives is a pure function of

``(seed, stream, call, position, element)``

where ``stream`` is the chain of labels given to :meth:`RowRandom.child`, ``call``
counts the draw calls made on this object, ``position`` is the row's global
0-based position in the whole data set and ``element`` is the index of the value
among the row's values in that call (sample, level, ...). The chunk a row falls in
never enters, so any split of the rows into chunks, in any order, on any worker,
draws the same numbers for each row.

The hash is the splitmix64 finaliser (Steele, Lea and Flood 2014, "Fast
splittable pseudorandom number generators") applied in turn to the key words; the
top 53 bits of the result give a uniform in (0, 1). Other distributions come by
inverse CDF from those uniforms.

Draw sites whose execution depends on the data (a node only propagated when some
row of the chunk changes, say) must draw from their own :meth:`RowRandom.child`,
so that skipping them in one chunk does not shift the numbers of later draws.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_ELEMENT = np.uint64(0xD1B54A32D192ED03)
_MASK = (1 << 64) - 1


_BLOCK = 1 << 16
"""Values mixed at a time (the temporaries stay in the processor's cache)."""


def _mix_inplace(x: np.ndarray) -> None:
    """The splitmix64 finaliser on a ``uint64`` array, in place (wrapping arithmetic)."""
    flat = x.reshape(-1)
    with np.errstate(over="ignore"):
        for start in range(0, flat.size, _BLOCK):
            y = flat[start : start + _BLOCK]
            y += _GOLDEN
            y ^= y >> np.uint64(30)
            y *= _M1
            y ^= y >> np.uint64(27)
            y *= _M2
            y ^= y >> np.uint64(31)


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, elementwise on ``uint64`` (a new array)."""
    out = np.array(x, dtype=np.uint64, copy=True)
    _mix_inplace(out)
    return out


def _mix_int(x: int) -> int:
    return int(_mix(np.asarray([x & _MASK], dtype=np.uint64))[0])


def label_key(label: object) -> int:
    """A stable 64-bit key of a label (string, int or tuple of them), the same in every process.

    Python's :func:`hash` is salted per process, so it is not used.
    """
    digest = hashlib.blake2b(repr(label).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _poisson_quantile(u: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """The smallest ``k`` with ``P(Poisson(lam) <= k) >= u``, elementwise (``lam > 0``).

    Starts from the Cornish-Fisher approximation ``lam + sqrt(lam) z + (z^2 - 1) / 6``
    and steps up or down, checking the CDF (``scipy.special.pdtr``), to the exact
    quantile; a few steps at most.
    """
    z = special.ndtri(u)
    k = np.maximum(np.floor(lam + np.sqrt(lam) * z + (z * z - 1.0) / 6.0), 0.0)
    low = special.pdtr(k, lam) < u
    while low.any():
        k[low] += 1.0
        low[low] = special.pdtr(k[low], lam[low]) < u[low]
    high = (k > 0) & (special.pdtr(k - 1.0, lam) >= u)
    while high.any():
        k[high] -= 1.0
        high[high] = (k[high] > 0) & (special.pdtr(k[high] - 1.0, lam[high]) >= u[high])
    return k


def _random_seed() -> int:
    return int(np.random.SeedSequence().generate_state(2, np.uint32).view(np.uint64)[0])


class RowRandom:
    """Random numbers keyed by (seed, stream, call, row position, element), never by chunk.

    Duck-types the part of :class:`numpy.random.Generator` used on rows: draws
    whose shape has a *row axis* of length ``len(positions)``.

    Parameters
    ----------
    seed : int or None
        Seed; ``None`` draws one from the operating system's entropy (results are
        then not reproducible, but still do not depend on the chunking within one
        call).
    positions : numpy.ndarray
        Global 0-based positions of the rows this object draws for, in order.

    Notes
    -----
    Each draw method call increments the object's call counter, so two calls
    give different numbers; :meth:`child` objects have their own counter.
    The draws for one row are identical whatever rows surround it, provided the
    same sequence of calls is made with the same shapes apart from the row axis.

    Examples
    --------
    >>> rr = RowRandom.for_rows(1, 10)
    >>> a = rr.random((3, 10))
    >>> b = RowRandom(1, np.arange(5, 10)).random((3, 5))
    >>> bool(np.all(a[:, 5:] == b))
    True
    """

    def __init__(self, seed: int | None, positions: np.ndarray, *, _stream: int = 0) -> None:
        if seed is None:
            seed = _random_seed()
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
            raise TypeError(f"seed must be an integer or None, got {seed!r}")
        positions = np.asarray(positions)
        if positions.ndim != 1 or (positions.size and positions.dtype.kind not in "iu"):
            raise ValueError("positions must be a 1-D array of integer row positions")
        if positions.size and positions.min() < 0:
            raise ValueError("row positions must be non-negative")
        self.seed = int(seed)
        self.positions = positions.astype(np.int64)
        self._stream = int(_stream) & _MASK
        self._calls = 0

    @classmethod
    def for_rows(cls, seed: int | None, n_rows: int, start: int = 0) -> RowRandom:
        """A source for ``n_rows`` consecutive rows starting at global position ``start``."""
        return cls(seed, np.arange(start, start + n_rows, dtype=np.int64))

    def __len__(self) -> int:
        return len(self.positions)

    def __repr__(self) -> str:
        return f"RowRandom(seed={self.seed}, rows={len(self)}, stream={self._stream:#x})"

    def take(self, rows: slice | np.ndarray | Sequence[int]) -> RowRandom:
        """A source for a subset of the rows (slice, boolean mask or indices), same stream.

        The new object keeps the row positions and the current call counter, so its
        next draw for a row equals the next draw this object would make for it.
        """
        out = RowRandom(self.seed, self.positions[rows], _stream=self._stream)
        out._calls = self._calls
        return out

    def child(self, *label: object) -> RowRandom:
        """An independent source with its own stream, keyed by ``label`` (strings, ints).

        The same label on the same parent always gives the same stream, whatever
        draws the parent has made.
        """
        key = _mix_int(self._stream ^ _mix_int(label_key(label)))
        return RowRandom(self.seed, self.positions, _stream=key)

    # -- the hash ------------------------------------------------------------------

    def _bits(self, shape: tuple[int, ...], row_axis: int | None) -> np.ndarray:
        shape = tuple(int(d) for d in shape)
        if row_axis is None:
            row_axis = 0 if len(shape) <= 1 else 1
        if not shape:
            raise ValueError("RowRandom draws need a shape with a row axis")
        if row_axis < 0:
            row_axis += len(shape)
        if not 0 <= row_axis < len(shape):
            raise ValueError(f"row_axis {row_axis} is out of range for shape {shape}")
        if shape[row_axis] != len(self.positions):
            raise ValueError(
                f"shape {shape} has {shape[row_axis]} rows on axis {row_axis}, but this "
                f"RowRandom draws for {len(self.positions)} rows"
            )
        call = self._calls
        self._calls += 1
        key = _mix_int(_mix_int(_mix_int(self.seed & _MASK) ^ self._stream) ^ call)
        others = shape[:row_axis] + shape[row_axis + 1 :]
        n_other = int(np.prod(others, dtype=np.int64)) if others else 1
        with np.errstate(over="ignore"):
            row_key = _mix(np.uint64(key) ^ (self.positions.astype(np.uint64) * _GOLDEN))
            element = np.arange(n_other, dtype=np.uint64) * _ELEMENT
            bits = element[:, None] ^ row_key[None, :]  # (elements, rows), C-contiguous
        _mix_inplace(bits)
        bits = bits.reshape(*others, len(self.positions))
        return np.moveaxis(bits, -1, row_axis)

    # -- draws ---------------------------------------------------------------------

    def random(self, size: Any = None, *, row_axis: int | None = None) -> np.ndarray:
        """Uniforms in the open interval (0, 1) with 53-bit resolution."""
        if size is None:
            size = (len(self.positions),)
        shape = (int(size),) if np.ndim(size) == 0 else tuple(size)
        bits = self._bits(shape, row_axis)
        bits >>= np.uint64(11)
        out = bits.astype(np.float64)
        out += 0.5
        out *= 2.0**-53
        return out

    def standard_normal(self, size: Any = None, *, row_axis: int | None = None) -> np.ndarray:
        """Standard normal draws (inverse CDF of :meth:`random`)."""
        return np.asarray(special.ndtri(self.random(size, row_axis=row_axis)))

    def gumbel(
        self, loc: float = 0.0, scale: float = 1.0, size: Any = None, *, row_axis: int | None = None
    ) -> np.ndarray:
        """Gumbel draws ``loc - scale * log(-log(u))``."""
        u = self.random(size, row_axis=row_axis)
        return loc - scale * np.log(-np.log(u))

    def binomial(
        self, n: int, p: Any, size: Any = None, *, row_axis: int | None = None
    ) -> np.ndarray:
        """Bernoulli draws (``n`` must be 1): ``1`` where the uniform is below ``p``."""
        if np.any(np.asarray(n) != 1):
            raise ValueError("RowRandom.binomial only draws Bernoulli variables (n=1)")
        p = np.asarray(p, dtype=float)
        shape = p.shape if size is None else tuple(np.atleast_1d(size))
        u = self.random(shape, row_axis=row_axis)
        return (u < np.broadcast_to(p, shape)).astype(np.int64)

    def poisson(
        self, lam: Any = 1.0, size: Any = None, *, row_axis: int | None = None
    ) -> np.ndarray:
        """Poisson draws by inverse CDF, as floats (``nan`` where ``lam`` is ``nan``)."""
        lam = np.asarray(lam, dtype=float)
        shape = lam.shape if size is None else tuple(np.atleast_1d(size))
        u = self.random(shape, row_axis=row_axis)
        lam = np.broadcast_to(lam, shape)
        out = np.zeros(shape)
        positive = lam > 0
        out[positive] = _poisson_quantile(u[positive], lam[positive])
        out[np.isnan(lam)] = np.nan
        return out

    def gamma(
        self, shape: Any, scale: Any = 1.0, size: Any = None, *, row_axis: int | None = None
    ) -> np.ndarray:
        """Gamma draws by inverse CDF (``scipy.special.gammaincinv``)."""
        a, theta = np.broadcast_arrays(np.asarray(shape, dtype=float), np.asarray(scale, float))
        dims = a.shape if size is None else tuple(np.atleast_1d(size))
        u = self.random(dims, row_axis=row_axis)
        return np.asarray(special.gammaincinv(a, u) * theta)

    def choice(
        self, a: Any, size: Any = None, replace: bool = True, *, row_axis: int | None = None
    ) -> np.ndarray:
        """Uniform choice with replacement from ``a`` (an array, or ``range(a)`` for an int)."""
        if not replace:
            raise ValueError("RowRandom.choice only draws with replacement")
        pool = np.arange(int(a)) if np.ndim(a) == 0 else np.asarray(a)
        if pool.size == 0:
            raise ValueError("cannot choose from an empty array")
        u = self.random(size, row_axis=row_axis)
        index = np.minimum((u * pool.size).astype(np.int64), pool.size - 1)
        return pool[index]


RandomSource = np.random.Generator | RowRandom
"""What the row path draws from: a :class:`RowRandom` (rows) or a numpy ``Generator``."""
