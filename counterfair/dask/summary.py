"""Mergeable summaries of a counterfactual audit's changes, for partitions of rows.

Each partition's per-row-and-sample changes (the ``changes`` frame of
:class:`counterfair.audit.causal.CounterfactualReport`) become an
:class:`AuditSummary` of sums and counts per group; summaries of two partitions
merge exactly (:meth:`AuditSummary.merge`, associative), on the workers and
then on the client, and :meth:`AuditSummary.result` gives the report's
``by_group`` and ``overall`` frames. Every column is exact up to summation
order: the mean |change| is a sum over a count, its posterior interval the
quantiles of the per-sample means (sums and counts per sample), the shares are
counts of rows, and the Wasserstein distance comes from the in-memory audit's
:class:`~counterfair.audit.streaming.HistogramSketch`, whose counts do not depend on how
the rows were partitioned, so a Dask audit equals the in-memory one (within one bin
width of the exact distance, as there).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from counterfair.audit.streaming import AuditStream, ChangeStats, HistogramSketch

GroupKey = tuple[Any, ...]

def _merge_sketches(
    a: HistogramSketch | None, b: HistogramSketch | None
) -> HistogramSketch | None:
    """Both groups' sketch (a new object; neither argument changes)."""
    if a is None or b is None:
        return a if b is None else b
    merged = copy.deepcopy(a)
    merged.merge(b)
    return merged


def _pad_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    size = max(a.shape[0], b.shape[0])
    out = np.zeros(size)
    out[: a.shape[0]] += a
    out[: b.shape[0]] += b
    return out


@dataclass
class GroupSummary:
    """Sums and counts of one group's changes (see the module docstring)."""

    rank: tuple[float, ...]
    first: int
    rows: int = 0
    n: int = 0
    sum_abs: float = 0.0
    max_abs: float = -np.inf
    sample_sum: np.ndarray = field(default_factory=lambda: np.zeros(0))
    sample_n: np.ndarray = field(default_factory=lambda: np.zeros(0))
    above: int = 0
    flip_sum: float = 0.0
    flip_above: int = 0
    path_sum: float = 0.0
    path_n: int = 0
    path_above: int = 0
    sketch: HistogramSketch | None = None

    @classmethod
    def of(
        cls,
        group: pd.DataFrame,
        row_key: pd.Series,
        *,
        rank: tuple[float, ...],
        first: int,
        tolerance: float,
    ) -> GroupSummary:
        """The summary of one group's rows of a changes frame."""
        abs_change = group["change"].abs()
        per_row = abs_change.groupby(row_key.to_numpy(), sort=False).mean()
        flip = group["flip_change"].groupby(row_key.to_numpy(), sort=False).first().abs()
        samples = group["sample"].to_numpy().astype(int)
        out = cls(
            rank=rank,
            first=first,
            rows=int(per_row.shape[0]),
            n=int(abs_change.shape[0]),
            sum_abs=float(abs_change.sum()),
            max_abs=float(abs_change.max()),
            sample_sum=np.bincount(samples, weights=abs_change.to_numpy()),
            sample_n=np.bincount(samples).astype(float),
            above=int((per_row > tolerance).sum()),
            flip_sum=float(flip.sum()),
            flip_above=int((flip > tolerance).sum()),
        )
        out.sketch = HistogramSketch()  # the in-memory audit's sketch: same counts, same bound
        out.sketch.update(group["factual"].to_numpy(), group["counterfactual"].to_numpy())
        if "path_specific_change" in group.columns:
            path_abs = group["path_specific_change"].abs()
            out.path_sum = float(path_abs.sum())
            out.path_n = int(path_abs.shape[0])
            path_row = path_abs.groupby(row_key.to_numpy(), sort=False).mean()
            out.path_above = int((path_row > tolerance).sum())
        return out

    @classmethod
    def from_stats(
        cls, stats: ChangeStats, *, rank: tuple[float, ...], first: int
    ) -> GroupSummary:
        """The summary of a streamed audit's statistics of one group (or pooled groups)."""
        s = stats.n_samples
        return cls(
            rank=rank,
            first=first,
            rows=stats.rows,
            n=stats.rows * s,
            sum_abs=float(stats.sample_sums.sum()),
            max_abs=stats.max_abs,
            sample_sum=np.asarray(stats.sample_sums, dtype=float).copy(),
            sample_n=np.full(s, float(stats.rows)),
            above=stats.above,
            flip_sum=stats.flip_sum,
            flip_above=stats.flip_above,
            path_sum=stats.path_sum,
            path_n=stats.rows * s if stats.with_paths else 0,
            path_above=stats.path_above,
            sketch=copy.deepcopy(stats.sketch),
        )

    def merge(self, other: GroupSummary) -> GroupSummary:
        """The summary of both groups' rows (disjoint rows)."""
        return GroupSummary(
            rank=min(self.rank, other.rank),
            first=min(self.first, other.first),
            rows=self.rows + other.rows,
            n=self.n + other.n,
            sum_abs=self.sum_abs + other.sum_abs,
            max_abs=max(self.max_abs, other.max_abs),
            sample_sum=_pad_add(self.sample_sum, other.sample_sum),
            sample_n=_pad_add(self.sample_n, other.sample_n),
            above=self.above + other.above,
            flip_sum=self.flip_sum + other.flip_sum,
            flip_above=self.flip_above + other.flip_above,
            path_sum=self.path_sum + other.path_sum,
            path_n=self.path_n + other.path_n,
            path_above=self.path_above + other.path_above,
            sketch=_merge_sketches(self.sketch, other.sketch),
        )

    def columns(self, interval: float, *, paths: bool) -> dict[str, float]:
        """The report's summary columns for this group."""
        seen = self.sample_n > 0
        by_sample = self.sample_sum[seen] / self.sample_n[seen]
        low, high = np.quantile(by_sample, [(1 - interval) / 2, (1 + interval) / 2])
        assert self.sketch is not None
        distance, bound = self.sketch.wasserstein(), self.sketch.error_bound
        out = {
            "rows": int(self.rows),
            "mean_abs_change": self.sum_abs / self.n,
            "ci_lower": float(low),
            "ci_upper": float(high),
            "max_abs_change": float(self.max_abs),
            "share_above_tolerance": self.above / self.rows,
            "wasserstein": distance,
            "flip_mean_abs_change": self.flip_sum / self.rows,
            "flip_share_above_tolerance": self.flip_above / self.rows,
        }
        out["wasserstein_bound"] = bound
        if paths:
            out["path_specific_mean_abs_change"] = self.path_sum / self.path_n
            out["path_specific_share_above_tolerance"] = self.path_above / self.rows
        return out


@dataclass
class AuditSummary:
    """Group summaries of a partition (or of several, merged)."""

    groups: dict[GroupKey, GroupSummary] = field(default_factory=dict)
    overall: dict[GroupKey, GroupSummary] = field(default_factory=dict)

    @classmethod
    def of_stream(
        cls,
        stream: AuditStream,
        *,
        attribute_rank: Mapping[str, int],
        level_rank: Mapping[tuple[str, str], int],
    ) -> AuditSummary:
        """The summary of one partition's streamed audit
        (:func:`counterfair.audit.causal.audit_stream`): its per-group statistics,
        keyed by (attribute, factual level, counterfactual level) instead of the
        partition's own target numbers, and pooled per attribute. ``stream.first``
        holds global row positions (the partition's fit keys rows by them)."""
        out = cls()
        pooled: dict[str, ChangeStats] = {}
        for (target, source), stats in stream.stats.items():
            attribute, to_level = stream.attribute[target], stream.to_level[target]
            rank = (attribute_rank.get(attribute, -1), level_rank.get((attribute, to_level), -1))
            out.groups[(attribute, source, to_level)] = GroupSummary.from_stats(
                stats, rank=rank, first=stream.first[(target, source)]
            )
            if attribute not in pooled:
                pooled[attribute] = ChangeStats(
                    n_samples=stats.n_samples, tolerance=stats.tolerance,
                    interval=stats.interval, with_paths=stats.with_paths,
                )
            pooled[attribute].merge(stats)
        for attribute, stats in pooled.items():
            out.overall[(attribute,)] = GroupSummary.from_stats(
                stats, rank=(attribute_rank.get(attribute, -1),), first=0
            )
        return out

    @classmethod
    def of(
        cls,
        changes: pd.DataFrame,
        positions: Mapping[Any, int],
        *,
        attribute_rank: Mapping[str, int],
        level_rank: Mapping[tuple[str, str], int],
        tolerance: float,
    ) -> AuditSummary:
        """The summary of one partition's changes.

        ``positions`` maps the partition's row labels to global row positions
        (which order the groups as the in-memory audit does); ``attribute_rank``
        and ``level_rank`` give the order of attributes and of their levels.
        """
        out = cls()
        if changes.empty:
            return out
        pos = changes["row"].map(positions)
        for key, group in changes.groupby(["attribute", "from_level", "to_level"], sort=False):
            attribute, _, to_level = key
            rank = (attribute_rank[attribute], level_rank.get((attribute, to_level), -1))
            out.groups[tuple(key)] = GroupSummary.of(
                group,
                group["row"],
                rank=rank,
                first=int(pos.loc[group.index].min()),
                tolerance=tolerance,
            )
        for attribute, group in changes.groupby("attribute", sort=False):
            key_rows = pd.Series(list(zip(group["row"], group["to_level"], strict=True)))
            out.overall[(attribute,)] = GroupSummary.of(
                group,
                key_rows,
                rank=(attribute_rank[attribute],),
                first=0,
                tolerance=tolerance,
            )
        return out

    def merge(self, other: AuditSummary) -> AuditSummary:
        """The summary of both partitions' rows."""
        merged = AuditSummary(dict(self.groups), dict(self.overall))
        for target, source in ((merged.groups, other.groups), (merged.overall, other.overall)):
            for key, value in source.items():
                target[key] = target[key].merge(value) if key in target else value
        return merged

    def result(
        self, columns: Sequence[str], interval: float, *, paths: bool
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """``(by_group, overall)`` frames, ordered as the in-memory audit orders them.

        Each frame's ``attrs["wasserstein_bound"]`` is the largest bound on the
        error of its ``wasserstein`` column (0.0 when every distribution was
        kept exactly; see :class:`ValueCounts`).
        """
        group_rows = [
            {
                "attribute": key[0],
                "from_level": key[1],
                "to_level": key[2],
                **value.columns(interval, paths=paths),
            }
            for key, value in sorted(
                self.groups.items(), key=lambda kv: (kv[1].rank, kv[1].first)
            )
        ]
        overall_rows = [
            {
                "attribute": key[0],
                "from_level": "all",
                "to_level": "all",
                **value.columns(interval, paths=paths),
            }
            for key, value in sorted(self.overall.items(), key=lambda kv: kv[1].rank)
        ]
        frames = []
        for rows in (group_rows, overall_rows):
            frame = pd.DataFrame(rows, columns=list(columns))
            frame.attrs["wasserstein_bound"] = max(
                (row["wasserstein_bound"] for row in rows), default=0.0
            )
            frames.append(frame)
        return frames[0], frames[1]
