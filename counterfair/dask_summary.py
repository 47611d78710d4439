"""Mergeable summaries of a counterfactual audit's changes, for partitions of rows.

Each partition's per-row-and-sample changes (the ``changes`` frame of
:class:`counterfair.audit.counterfactual.CounterfactualReport`) become an
:class:`AuditSummary` of sums and counts per group; summaries of two partitions
merge exactly (:meth:`AuditSummary.merge`, associative), on the workers and
then on the client, and :meth:`AuditSummary.result` gives the report's
``by_group`` and ``overall`` frames. Every column is exact up to summation
order: the mean |change| is a sum over a count, its posterior interval the
quantiles of the per-sample means (sums and counts per sample), the shares are
counts of rows, and the Wasserstein distance is computed from the exact value
counts of the factual and counterfactual outputs (compact for labels and for
outputs with few distinct values; a large summary for continuous outputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import wasserstein_distance

GroupKey = tuple[Any, ...]


def _add_counts(a: dict[float, int], b: Mapping[float, int]) -> dict[float, int]:
    out = dict(a)
    for value, count in b.items():
        out[value] = out.get(value, 0) + count
    return out


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
    factual: dict[float, int] = field(default_factory=dict)
    counterfactual: dict[float, int] = field(default_factory=dict)

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
            factual=group["factual"].value_counts(sort=False).to_dict(),
            counterfactual=group["counterfactual"].value_counts(sort=False).to_dict(),
        )
        if "path_specific_change" in group.columns:
            path_abs = group["path_specific_change"].abs()
            out.path_sum = float(path_abs.sum())
            out.path_n = int(path_abs.shape[0])
            path_row = path_abs.groupby(row_key.to_numpy(), sort=False).mean()
            out.path_above = int((path_row > tolerance).sum())
        return out

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
            factual=_add_counts(self.factual, other.factual),
            counterfactual=_add_counts(self.counterfactual, other.counterfactual),
        )

    def columns(self, interval: float, *, paths: bool) -> dict[str, float]:
        """The report's summary columns for this group."""
        seen = self.sample_n > 0
        by_sample = self.sample_sum[seen] / self.sample_n[seen]
        low, high = np.quantile(by_sample, [(1 - interval) / 2, (1 + interval) / 2])
        f_values, f_weights = zip(*self.factual.items(), strict=True)
        c_values, c_weights = zip(*self.counterfactual.items(), strict=True)
        out = {
            "rows": int(self.rows),
            "mean_abs_change": self.sum_abs / self.n,
            "ci_lower": float(low),
            "ci_upper": float(high),
            "max_abs_change": float(self.max_abs),
            "share_above_tolerance": self.above / self.rows,
            "wasserstein": float(
                wasserstein_distance(f_values, c_values, f_weights, c_weights)
            ),
            "flip_mean_abs_change": self.flip_sum / self.rows,
            "flip_share_above_tolerance": self.flip_above / self.rows,
        }
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
        """``(by_group, overall)`` frames, ordered as the in-memory audit orders them."""
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
        return (
            pd.DataFrame(group_rows, columns=list(columns)),
            pd.DataFrame(overall_rows, columns=list(columns)),
        )
