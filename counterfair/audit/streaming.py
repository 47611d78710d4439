"""Mergeable statistics of a counterfactual audit, updated chunk by chunk.

:func:`counterfair.audit.counterfactual_fairness` cuts the audited rows into
chunks (:func:`counterfair.options.chunk_bytes`) and feeds each chunk's
per-row-and-sample changes to one :class:`ChangeStats` per (attribute, factual
level, counterfactual level). The statistics are sums, counts and maxima, so two
of them merge (``merge``) into the statistics of the union of their rows, in any
order, and the summary (``result``) is the one computed from the whole
per-row-and-sample frame:

- exact (up to the order of floating-point sums, ~1e-15): the number of rows,
  the mean |change| and its posterior interval (from the S-vector of per-sample
  sums of |change|, so the interval is the one over samples of the mean over
  rows), the largest |change|, the share of rows above the tolerance, the flip
  test's mean |change| and share, the path-specific mean |change| and share;
- approximate: the Wasserstein distance between the factual and counterfactual
  predictions, from a :class:`HistogramSketch` whose error is at most its bin
  width (see there).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from counterfair.rows.chunking import sample_mean

SUMMARY_COLUMNS = (
    "attribute",
    "from_level",
    "to_level",
    "rows",
    "mean_abs_change",
    "ci_lower",
    "ci_upper",
    "max_abs_change",
    "share_above_tolerance",
    "wasserstein",
    "flip_mean_abs_change",
    "flip_share_above_tolerance",
)
ROW_COLUMNS = (
    "attribute",
    "from_level",
    "to_level",
    "row",
    "mean_change",
    "ci_lower",
    "ci_upper",
    "prob_above_tolerance",
    "flip_change",
)
"""Columns of ``CounterfactualReport.rows``: one row per audited row and intervention."""
PATH_COLUMNS = ("path_specific_mean_abs_change", "path_specific_share_above_tolerance")
"""Summary columns added when the audit is given ``unfair_paths``."""
SKETCH_BINS = 4096
"""Bins of the Wasserstein sketch: its bin width is at most 2 x range / this."""

FINEST_EXPONENT = -60
"""The sketch's bin width is never below ``2**FINEST_EXPONENT``."""


@dataclass
class HistogramSketch:
    """Counts of two samples (``a`` and ``b``) on one grid of aligned bins of width ``2**k``.

    Bin ``i`` holds the values in ``[i * 2**k, (i + 1) * 2**k)``. The exponent ``k``
    is the smallest (at least :data:`FINEST_EXPONENT`) for which every value seen
    falls in ``bins`` consecutive bins; when new values need more, adjacent bins
    are merged pairwise (``k`` grows by one), which is exact because the grid is
    aligned on 0. As that smallest ``k`` depends only on the values seen, the
    sketch of a set of values does not depend on how they were chunked or in
    which order the chunks were merged.

    Error bound: replacing every value by its bin's centre moves it by at most
    half a bin width ``h``, so the 1-Wasserstein distance of each sample to its
    binned version is at most ``h / 2`` and, by the triangle inequality,
    ``|W_hist - W_exact| <= h`` (:attr:`error_bound`), where ``W_hist`` is the
    distance between the binned samples (:meth:`wasserstein`, exact for them).
    With ``bins`` bins, ``h <= 2 * (max - min) / bins``, or
    ``2**FINEST_EXPONENT`` for a constant sample.
    """

    bins: int = SKETCH_BINS
    exponent: int | None = None
    start: int = 0
    a: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    b: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def width(self) -> float:
        """The bin width ``2**k`` (NaN before any value)."""
        return math.nan if self.exponent is None else math.ldexp(1.0, self.exponent)

    @property
    def error_bound(self) -> float:
        """Bound on ``|wasserstein() - exact distance|``: the bin width."""
        return self.width

    def _fits(self, low: float, high: float, exponent: int) -> bool:
        return math.floor(math.ldexp(high, -exponent)) - math.floor(
            math.ldexp(low, -exponent)
        ) < self.bins

    def _exponent_for(self, low: float, high: float) -> int:
        """The smallest exponent at which ``[low, high]`` spans at most ``bins`` bins."""
        if high == low:
            return FINEST_EXPONENT
        k = max(FINEST_EXPONENT, math.floor(math.log2((high - low) / self.bins)))
        while not self._fits(low, high, k):
            k += 1
        while k > FINEST_EXPONENT and self._fits(low, high, k - 1):
            k -= 1
        return k

    def _coarsen(self, exponent: int) -> None:
        """Merge bins until the exponent is ``exponent`` (at least the current one)."""
        assert self.exponent is not None
        shift = exponent - self.exponent
        if shift <= 0:
            return
        old = self.start + np.arange(len(self.a), dtype=np.int64)
        new = old >> shift
        start = int(new[0]) if len(new) else 0
        size = int(new[-1]) - start + 1 if len(new) else 0
        self.a = np.bincount(new - start, weights=self.a, minlength=size).astype(np.int64)
        self.b = np.bincount(new - start, weights=self.b, minlength=size).astype(np.int64)
        self.start = start
        self.exponent = exponent

    def _range(self) -> tuple[float, float]:
        """The lowest and highest bin edges in use (the values lie between them)."""
        assert self.exponent is not None
        used = np.flatnonzero((self.a + self.b) > 0)
        h = self.width
        return (self.start + used[0]) * h, (self.start + used[-1]) * h

    def _add_counts(self, index: np.ndarray, counts_a: np.ndarray, counts_b: np.ndarray) -> None:
        """Add counts at absolute bin indices (the current exponent)."""
        if len(self.a):
            index = np.concatenate([self.start + np.arange(len(self.a)), index])
            counts_a = np.concatenate([self.a, counts_a])
            counts_b = np.concatenate([self.b, counts_b])
        start = int(index.min())
        size = int(index.max()) - start + 1
        self.a = np.bincount(index - start, weights=counts_a, minlength=size).astype(np.int64)
        self.b = np.bincount(index - start, weights=counts_b, minlength=size).astype(np.int64)
        self.start = start

    def _grow_to(self, low: float, high: float) -> None:
        """Choose or coarsen the exponent so that the held values and ``[low, high]`` fit."""
        if self.exponent is not None and len(self.a):
            held_low, held_high = self._range()
            low, high = min(low, held_low), max(high, held_high)
        k = self._exponent_for(low, high)
        if self.exponent is None:
            self.exponent = k
        elif k > self.exponent:
            self._coarsen(k)

    def update(self, a: np.ndarray, b: np.ndarray) -> None:
        """Add the values ``a`` of the first sample and ``b`` of the second (finite floats)."""
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise ValueError("the Wasserstein sketch takes finite values only")
        if a.size + b.size == 0:
            return
        both = np.concatenate([a, b])
        self._grow_to(float(both.min()), float(both.max()))
        h = self.width
        index = np.floor(both / h).astype(np.int64)
        ones = np.ones(len(both), dtype=np.int64)
        is_a = np.arange(len(both)) < len(a)
        self._add_counts(index, np.where(is_a, ones, 0), np.where(is_a, 0, ones))

    def merge(self, other: HistogramSketch) -> None:
        """Add the counts of ``other`` (same ``bins``)."""
        if other.bins != self.bins:
            raise ValueError(f"cannot merge sketches of {self.bins} and {other.bins} bins")
        if other.exponent is None or not len(other.a):
            return
        copy = HistogramSketch(
            bins=other.bins, exponent=other.exponent, start=other.start,
            a=other.a.copy(), b=other.b.copy(),
        )
        low, high = copy._range()
        self._grow_to(low, high)
        assert self.exponent is not None
        if self.exponent > copy.exponent:  # type: ignore[operator]
            copy._coarsen(self.exponent)
        elif copy.exponent > self.exponent:  # type: ignore[operator]
            assert copy.exponent is not None
            self._coarsen(copy.exponent)
        index = copy.start + np.arange(len(copy.a), dtype=np.int64)
        self._add_counts(index, copy.a, copy.b)

    def wasserstein(self) -> float:
        """1-Wasserstein distance between the two binned samples (NaN if one is empty)."""
        total_a, total_b = int(self.a.sum()), int(self.b.sum())
        if total_a == 0 or total_b == 0:
            return math.nan
        gap = np.cumsum(self.a) / total_a - np.cumsum(self.b) / total_b
        return float(np.abs(gap[:-1]).sum() * self.width)


@dataclass
class ChangeStats:
    """Mergeable statistics of the changes of one group (or of several, pooled).

    Feed it per-row-and-sample frames with columns ``row``, ``sample``,
    ``factual``, ``counterfactual``, ``change``, ``flip_change`` and optionally
    ``path_specific_change``, holding every sample of each of their rows,
    sample-major (as :func:`counterfair.counterfactual.prediction.counterfactual_predictions`
    orders them). The rows of different updates must be different rows.
    """

    n_samples: int
    tolerance: float
    interval: float
    with_paths: bool = False
    rows: int = 0
    sample_sums: np.ndarray = field(init=False)
    max_abs: float = -math.inf
    above: int = 0
    flip_sum: float = 0.0
    flip_above: int = 0
    path_sum: float = 0.0
    path_above: int = 0
    sketch: HistogramSketch = field(default_factory=HistogramSketch)

    def __post_init__(self) -> None:
        self.sample_sums = np.zeros(self.n_samples)

    def update(self, chunk: pd.DataFrame) -> None:
        """Add a chunk's per-row-and-sample changes (every sample of its rows)."""
        s = self.n_samples
        if len(chunk) % s:
            raise ValueError(f"a chunk of {len(chunk)} rows x samples is not {s} samples per row")
        n = len(chunk) // s

        def grid(column: str) -> np.ndarray:
            return chunk[column].to_numpy(dtype=np.float64).reshape(s, n)

        self.add(
            change=grid("change"),
            flip=chunk["flip_change"].to_numpy(dtype=np.float64)[:n],
            factual=grid("factual"),
            counterfactual=grid("counterfactual"),
            path=grid("path_specific_change") if self.with_paths else None,
        )

    def add(
        self,
        *,
        change: np.ndarray,
        flip: np.ndarray,
        factual: np.ndarray,
        counterfactual: np.ndarray,
        path: np.ndarray | None = None,
    ) -> None:
        """Add the changes of some rows: ``(S, n)`` arrays (``flip`` one per row, ``(n,)``)."""
        if change.shape[0] != self.n_samples:
            raise ValueError(
                f"changes of {change.shape[0]} samples per row, expected {self.n_samples}"
            )
        n = change.shape[1]
        if n == 0:
            return
        absolute = np.abs(change)
        self.rows += n
        self.sample_sums += absolute.sum(axis=1)
        self.max_abs = max(self.max_abs, float(absolute.max()))
        self.above += int((sample_mean(absolute) > self.tolerance).sum())
        flip = np.abs(flip)
        self.flip_sum += float(flip.sum())
        self.flip_above += int((flip > self.tolerance).sum())
        if self.with_paths:
            if path is None:
                raise ValueError("path-specific statistics need the path-specific changes")
            path = np.abs(path)
            self.path_sum += float(path.sum())
            self.path_above += int((sample_mean(path) > self.tolerance).sum())
        self.sketch.update(factual.reshape(-1), counterfactual.reshape(-1))

    def merge(self, other: ChangeStats) -> ChangeStats:
        """Add the statistics of ``other`` (other rows, same samples and settings); ``self``."""
        if (other.n_samples, other.tolerance, other.interval, other.with_paths) != (
            self.n_samples, self.tolerance, self.interval, self.with_paths
        ):
            raise ValueError("cannot merge statistics of different samples or settings")
        self.rows += other.rows
        self.sample_sums = self.sample_sums + other.sample_sums
        self.max_abs = max(self.max_abs, other.max_abs)
        self.above += other.above
        self.flip_sum += other.flip_sum
        self.flip_above += other.flip_above
        self.path_sum += other.path_sum
        self.path_above += other.path_above
        self.sketch.merge(other.sketch)
        return self

    def result(self) -> dict[str, float]:
        """The summary columns of :data:`SUMMARY_COLUMNS`
        (and ``PATH_COLUMNS`` with paths) but the group keys."""
        n, s = self.rows, self.n_samples
        mean_by_sample = self.sample_sums / n
        low, high = np.quantile(
            mean_by_sample, [(1 - self.interval) / 2, (1 + self.interval) / 2]
        )
        out: dict[str, float] = {
            "rows": n,
            "mean_abs_change": float(self.sample_sums.sum() / (n * s)),
            "ci_lower": float(low),
            "ci_upper": float(high),
            "max_abs_change": self.max_abs,
            "share_above_tolerance": self.above / n,
            "wasserstein": self.sketch.wasserstein(),
            "flip_mean_abs_change": self.flip_sum / n,
            "flip_share_above_tolerance": self.flip_above / n,
        }
        if self.with_paths:
            out["path_specific_mean_abs_change"] = self.path_sum / (n * s)
            out["path_specific_share_above_tolerance"] = self.path_above / n
        return out


def row_summary(
    rows: np.ndarray, change: np.ndarray, flip: np.ndarray, *, tolerance: float, interval: float
) -> pd.DataFrame:
    """Per row: posterior mean change, its interval and P(|change| > tolerance).

    ``change`` is ``(S, n)``, ``rows`` and ``flip`` one value per row. Columns
    ``row``, ``mean_change``, ``ci_lower``, ``ci_upper`` (quantiles of the row's
    samples at ``(1 -+ interval) / 2``), ``prob_above_tolerance`` and
    ``flip_change``, in the rows' order.
    """
    low, high = np.quantile(change, [(1 - interval) / 2, (1 + interval) / 2], axis=0)
    return pd.DataFrame(
        {
            "row": rows,
            "mean_change": sample_mean(change),
            "ci_lower": low,
            "ci_upper": high,
            "prob_above_tolerance": sample_mean(np.abs(change) > tolerance),
            "flip_change": np.asarray(flip, dtype=np.float64),
        }
    )


@dataclass(frozen=True)
class TargetChanges:
    """One intervention's changes on a chunk's rows, as arrays (``(S, n)``, sample-major).

    Attributes
    ----------
    attribute, to_level : str
        The audited attribute (or the intervention written out) and the level set.
    from_level : numpy.ndarray
        Each row's factual level (``"factual"`` for an intervention of one's own), ``(n,)``.
    rows, positions : numpy.ndarray
        The rows' index labels and global positions, ``(n,)``.
    factual, counterfactual, change : numpy.ndarray
        Predictions in both worlds and their change, ``(S, n)``.
    flip : numpy.ndarray
        The flip test's change per row, ``(n,)``.
    path : numpy.ndarray, optional
        The path-specific change, ``(S, n)``.
    """

    attribute: str
    to_level: str
    from_level: np.ndarray
    rows: np.ndarray
    positions: np.ndarray
    factual: np.ndarray
    counterfactual: np.ndarray
    change: np.ndarray
    flip: np.ndarray
    path: np.ndarray | None = None

    @classmethod
    def from_frame(cls, result: pd.DataFrame, n_samples: int) -> TargetChanges:
        """From a per-row-and-sample frame with the columns of :data:`CHANGE_COLUMNS`
        and ``position`` (and ``path_specific_change``)."""
        s = n_samples
        n = len(result) // s

        def grid(column: str) -> np.ndarray:
            return result[column].to_numpy(dtype=np.float64).reshape(s, n)

        return cls(
            attribute=str(result["attribute"].iloc[0]),
            to_level=str(result["to_level"].iloc[0]),
            from_level=result["from_level"].to_numpy()[:n].astype(str),
            rows=result["row"].to_numpy()[:n],
            positions=result["position"].to_numpy()[:n],
            factual=grid("factual"),
            counterfactual=grid("counterfactual"),
            change=grid("change"),
            flip=result["flip_change"].to_numpy(dtype=np.float64)[:n],
            path=(
                grid("path_specific_change") if "path_specific_change" in result.columns
                else None
            ),
        )

    def frame(self) -> pd.DataFrame:
        """The long frame: :data:`CHANGE_COLUMNS`, ``position`` (and ``path_specific_change``)."""
        s, n = self.change.shape
        out = pd.DataFrame(
            {
                "attribute": np.full(s * n, self.attribute, dtype=object),
                "from_level": np.tile(np.asarray(self.from_level, dtype=object), s),
                "to_level": np.full(s * n, self.to_level, dtype=object),
                "row": np.tile(self.rows, s),
                "sample": np.repeat(np.arange(s), n),
                "factual": self.factual.reshape(-1),
                "counterfactual": self.counterfactual.reshape(-1),
                "change": self.change.reshape(-1),
                "flip_change": np.tile(self.flip, s),
                "position": np.tile(self.positions, s),
            }
        )
        if self.path is not None:
            out["path_specific_change"] = self.path.reshape(-1)
        return out


CHANGE_COLUMNS = (
    "attribute",
    "from_level",
    "to_level",
    "row",
    "sample",
    "factual",
    "counterfactual",
    "change",
    "flip_change",
)
"""Columns of ``CounterfactualReport.changes`` (and ``path_specific_change`` with paths)."""


class AuditStream:
    """The counterfactual audit's accumulators, fed chunk by chunk: one :class:`ChangeStats`
    per group, per-row summaries and, with ``keep_samples``, the per-row-and-sample frames."""

    def __init__(
        self,
        *,
        n_samples: int,
        tolerance: float,
        interval: float,
        paths: tuple[tuple[str, ...], ...] | None,
        keep_samples: bool,
        n_targets: int,
    ) -> None:
        self.n_samples = n_samples
        self.tolerance = tolerance
        self.interval = interval
        self.paths = paths
        self.keep_samples = keep_samples
        self.stats: dict[tuple[int, str], ChangeStats] = {}
        self.first: dict[tuple[int, str], int] = {}
        self.attribute: dict[int, str] = {}
        self.to_level: dict[int, str] = {}
        self.rows: list[list[pd.DataFrame]] = [[] for _ in range(n_targets)]
        self.samples: list[list[pd.DataFrame]] = [[] for _ in range(n_targets)]

    def update(self, target: int, changes: TargetChanges) -> None:
        """Add one target's changes on one chunk (every sample of its rows)."""
        s = self.n_samples
        self.attribute[target] = changes.attribute
        self.to_level[target] = changes.to_level
        from_row = np.asarray(changes.from_level).astype(str)
        for source in pd.unique(from_row):
            in_group = from_row == source
            key = (target, str(source))
            if key not in self.stats:
                self.stats[key] = ChangeStats(
                    n_samples=s, tolerance=self.tolerance, interval=self.interval,
                    with_paths=self.paths is not None,
                )
                self.first[key] = int(changes.positions[in_group][0])
            every = bool(in_group.all())
            self.stats[key].add(
                change=changes.change if every else changes.change[:, in_group],
                flip=changes.flip if every else changes.flip[in_group],
                factual=changes.factual if every else changes.factual[:, in_group],
                counterfactual=(
                    changes.counterfactual if every else changes.counterfactual[:, in_group]
                ),
                path=(
                    None if changes.path is None
                    else changes.path if every else changes.path[:, in_group]
                ),
            )
        summary = row_summary(
            changes.rows, changes.change, changes.flip, tolerance=self.tolerance,
            interval=self.interval,
        )
        summary.insert(0, "to_level", self.to_level[target])
        summary.insert(0, "from_level", from_row)
        summary.insert(0, "attribute", self.attribute[target])
        self.rows[target].append(summary)
        if self.keep_samples:
            self.samples[target].append(changes.frame())

    def result(
        self, multiclass: bool
    ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame | None]:
        """``by_group``, ``overall``, ``rows`` and ``changes`` (``None`` without samples)."""
        columns = list(SUMMARY_COLUMNS) + (list(PATH_COLUMNS) if self.paths is not None else [])
        keys = sorted(self.stats, key=lambda k: (k[0], self.first[k]))
        group_rows = []
        pooled: dict[str, ChangeStats] = {}
        for key in keys:
            target, source = key
            attribute = self.attribute[target]
            stats = self.stats[key]
            group_rows.append(
                {
                    "attribute": attribute,
                    "from_level": source,
                    "to_level": self.to_level[target],
                    **stats.result(),
                }
            )
            if attribute not in pooled:
                pooled[attribute] = ChangeStats(
                    n_samples=self.n_samples, tolerance=self.tolerance,
                    interval=self.interval, with_paths=self.paths is not None,
                )
            pooled[attribute].merge(stats)
        overall_rows = [
            {"attribute": a, "from_level": "all", "to_level": "all", **stats.result()}
            for a, stats in pooled.items()
        ]
        by_group = pd.DataFrame(group_rows, columns=columns)
        overall = pd.DataFrame(overall_rows, columns=columns)
        if multiclass:
            # class indices have no order: a distance between their distributions means nothing
            by_group["wasserstein"] = np.nan
            overall["wasserstein"] = np.nan
        parts = [frame for frames in self.rows for frame in frames]
        rows = (
            pd.concat(parts, ignore_index=True) if parts
            else pd.DataFrame(columns=list(ROW_COLUMNS))
        )
        changes = None
        if self.keep_samples:
            pieces = []
            for frames in self.samples:
                if not frames:
                    continue
                joined = pd.concat(frames, ignore_index=True)
                order = np.lexsort(
                    (joined["position"].to_numpy(), joined["sample"].to_numpy())
                )
                pieces.append(joined.iloc[order].drop(columns="position"))
            changes = pd.concat(pieces, ignore_index=True)
        return by_group, overall, rows, changes


DECOMPOSITION_SUMS: tuple[str, ...] = (
    "factual|x0",
    "factual|x1",
    "x0|x0",
    "x1|x0",
    "x1|x1",
    "nested|x0",
    "x0|all",
    "x1|all",
    "nested|all",
)
"""The per-sample sums of a decomposition: ``world|rows``, the output in a world (the
factual one, ``do(X = x0)``, ``do(X = x1)``, the nested ``y_{x1, W_{x0}}``) summed over
the rows of group ``x0``, of group ``x1`` or over every row."""


@dataclass
class DecompositionSums:
    """Mergeable statistics of a causal decomposition (:func:`counterfair.audit.decompose`).

    One S-vector (a value per joint sample) per entry of :data:`DECOMPOSITION_SUMS`, the
    row counts of the two groups and of all rows, and the codes of the attribute seen.
    Every term of the decomposition is a ratio of these, so the statistics of two sets
    of rows merge (``merge``) into those of their union.

    ``update`` adds a chunk's rows *in order*, one row after the other onto the running
    sums (a C-ordered reduction along the rows), so rows fed chunk by chunk give the
    sums of one pass over all rows, bit for bit, whatever the chunk size. ``merge``
    adds two partial sums, equal to one pass up to the order of floating-point sums
    (~1e-15 relative).
    """

    n_samples: int
    sums: dict[str, np.ndarray] = field(default_factory=dict)
    n_x0: int = 0
    n_x1: int = 0
    n_rows: int = 0
    codes: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        for key in DECOMPOSITION_SUMS:
            self.sums.setdefault(key, np.zeros(self.n_samples))

    def _add(self, key: str, values: np.ndarray, mask: np.ndarray | None) -> None:
        block = values if mask is None else values[:, mask]
        stacked = np.concatenate([self.sums[key][None, :], np.ascontiguousarray(block.T)])
        self.sums[key] = stacked.sum(axis=0)

    def update(
        self, y: dict[str, np.ndarray], in_x0: np.ndarray, in_x1: np.ndarray, codes: np.ndarray
    ) -> None:
        """Add a chunk: ``y`` maps the worlds ``"factual"``, ``"x0"``, ``"x1"`` and
        ``"x1,W_x0"`` to ``(S, n)`` outputs; the masks mark the chunk's groups."""
        worlds = {"factual": "factual", "x0": "x0", "x1": "x1", "nested": "x1,W_x0"}
        for key in DECOMPOSITION_SUMS:
            world, rows = key.split("|")
            mask = {"x0": in_x0, "x1": in_x1, "all": None}[rows]
            self._add(key, y[worlds[world]], mask)
        self.n_x0 += int(in_x0.sum())
        self.n_x1 += int(in_x1.sum())
        self.n_rows += int(in_x0.size)
        self.codes |= {int(c) for c in np.unique(codes)}

    def merge(self, other: DecompositionSums) -> DecompositionSums:
        """The statistics of the union of both sets of rows."""
        return DecompositionSums(
            n_samples=self.n_samples,
            sums={k: self.sums[k] + other.sums[k] for k in DECOMPOSITION_SUMS},
            n_x0=self.n_x0 + other.n_x0,
            n_x1=self.n_x1 + other.n_x1,
            n_rows=self.n_rows + other.n_rows,
            codes=self.codes | other.codes,
        )

    def terms(self, *, no_confounder: bool) -> dict[str, np.ndarray]:
        """Every term per sample (the module docstring of
        :mod:`counterfair.audit.decomposition` has the definitions)."""
        s, n0, n1, n = self.sums, self.n_x0, self.n_x1, self.n_rows
        observed_x0, observed_x1 = s["factual|x0"] / n0, s["factual|x1"] / n1
        nested_x0, nested_all = s["nested|x0"] / n0, s["nested|all"] / n
        x0_given_x0, x1_given_x1 = s["x0|x0"] / n0, s["x1|x1"] / n1
        zero = np.zeros_like(observed_x0)
        if no_confounder:  # X independent of the exogenous variables: y_x | x' ~ y | x
            x1_given_x0, x1_all, x0_all = observed_x1, observed_x1, observed_x0
            se, expse_x0, expse_x1 = zero, zero, zero
        else:
            x1_given_x0, x1_all, x0_all = s["x1|x0"] / n0, s["x1|all"] / n, s["x0|all"] / n
            se = x1_given_x0 - x1_given_x1
            expse_x0, expse_x1 = observed_x0 - x0_all, observed_x1 - x1_all
        return {
            "TV": observed_x1 - observed_x0,
            "Ctf-DE": nested_x0 - x0_given_x0,
            "Ctf-IE": nested_x0 - x1_given_x0,
            "Ctf-SE": se,
            "NDE": nested_all - x0_all,
            "NIE": nested_all - x1_all,
            "Exp-SE_x0": expse_x0,
            "Exp-SE_x1": expse_x1,
        }
