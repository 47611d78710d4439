"""Fairness-monitor style groups and the perturbation check (after IBM Watson OpenScale).

* :class:`GroupSpec` -- a monitored and a reference group of one feature, each given as
  a set of values and/or inclusive numeric ranges (``age 18-25`` vs ``26-100``); a
  reference of ``None`` means "all other values".
* :func:`monitor_disparate_impact` -- disparate impact of monitored vs reference with
  several favourable labels.
* :func:`perturbation_check` -- without any causal model: every payload record of the
  monitored group gets a reference value of the feature and vice versa, the model
  rescores the perturbed records, and disparate impact is computed on payload plus
  perturbed data; the records whose decision flips are returned.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._validation import (
    NOT_A_COLUMN,
    VALUE_NOT_FOUND,
    as_1d,
    check_finite,
    check_lengths,
    shown,
)
from .bootstrap import Seed
from .impact import DisparateImpact, _disparate_impact

Range = tuple[float, float]
MONITORED = "monitored"
REFERENCE = "reference"


@dataclass(frozen=True, kw_only=True)
class GroupSpec:
    """Monitored and reference groups of one feature.

    Attributes
    ----------
    feature
        Column the groups are defined on.
    monitored_values, monitored_ranges
        The monitored group: these values, and numbers in these inclusive ranges.
    reference_values, reference_ranges
        The reference group; when both are empty, every row outside the monitored
        group is reference ("all other values are reference").
    """

    feature: str
    monitored_values: tuple[Hashable, ...] = ()
    monitored_ranges: tuple[Range, ...] = ()
    reference_values: tuple[Hashable, ...] = ()
    reference_ranges: tuple[Range, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.monitored_values and not self.monitored_ranges:
            raise ValueError(f"the monitored group of {self.feature!r} needs values or ranges")
        for low, high in (*self.monitored_ranges, *self.reference_ranges):
            if not low <= high:
                raise ValueError(f"range ({low!r}, {high!r}) of {self.feature!r} has "
                                 "its lower end above its upper end")

    @property
    def reference_is_rest(self) -> bool:
        """Whether the reference group is "all other values"."""
        return not self.reference_values and not self.reference_ranges

    def _in(self, values: pd.Series, chosen: Sequence[Hashable],
            ranges: Sequence[Range]) -> NDArray[np.bool_]:
        mask = values.isin(list(chosen)).to_numpy(dtype=bool, copy=True)
        if ranges:
            numeric = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
            for low, high in ranges:
                mask |= (numeric >= low) & (numeric <= high)
        return mask

    def membership(self, values: ArrayLike) -> pd.Series:
        """``"monitored"``, ``"reference"`` or missing (in neither group) per row.

        Raises
        ------
        ValueError
            If a row falls in both groups or either group is empty.
        """
        series = pd.Series(as_1d(values, self.feature))
        mon = self._in(series, self.monitored_values, self.monitored_ranges)
        if self.reference_is_rest:
            ref = ~mon
        else:
            ref = self._in(series, self.reference_values, self.reference_ranges)
        both = mon & ref
        if both.any():
            raise ValueError(f"{int(both.sum())} row(s) of {self.feature!r} fall in both the "
                             f"monitored and the reference group, e.g. {series[both].iloc[0]!r}")
        for name, mask in ((MONITORED, mon), (REFERENCE, ref)):
            if not mask.any():
                raise ValueError(VALUE_NOT_FOUND.format(
                    name=f"{name} group of", value=self.feature, where="the data",
                    available=shown(sorted({str(v) for v in series.unique()}))))
        out = pd.Series(pd.NA, index=series.index, dtype=object, name=self.feature)
        out[mon] = MONITORED
        out[ref] = REFERENCE
        return out


def favourable_indicator(decisions: ArrayLike, favourable: Sequence[Hashable]) -> NDArray[np.int64]:
    """1 where the decision is one of the favourable labels (several allowed), else 0."""
    labels = pd.Series(as_1d(decisions, "decisions"), dtype=object)
    if not favourable:
        raise ValueError("favourable must name at least one favourable label")
    seen = set(labels.unique())
    missing = [f for f in favourable if f not in seen]
    if len(missing) == len(favourable):
        raise ValueError(VALUE_NOT_FOUND.format(name="favourable label", value=missing[0],
                                                where="decisions",
                                                available=shown(sorted(map(str, seen)))))
    return labels.isin(list(favourable)).to_numpy(dtype=np.int64)


def monitor_disparate_impact(
    decisions: ArrayLike,
    values: ArrayLike,
    spec: GroupSpec,
    *,
    favourable: Sequence[Hashable],
    threshold_percent: float = 80.0,
    n_bootstrap: int = 0,
    seed: Seed = 0,
) -> DisparateImpact:
    """Disparate impact of ``spec``'s monitored group against its reference group.

    Rows in neither group are left out.  ``decisions`` may be any labels; those in
    ``favourable`` count as favourable.  Flagged when the ratio is ``<= threshold``.
    """
    groups = spec.membership(values)
    fav = favourable_indicator(decisions, favourable)
    check_lengths([("values", len(groups)), ("decisions", fav.size)])
    keep = groups.notna().to_numpy()
    return _disparate_impact(fav[keep], groups[keep].to_numpy(dtype=object),
                            protected_group=MONITORED, reference=REFERENCE,
                            threshold_percent=threshold_percent, n_bootstrap=n_bootstrap,
                            seed=seed)


@dataclass(frozen=True, kw_only=True)
class PerturbationReport:
    """Result of :func:`perturbation_check`.

    Attributes
    ----------
    payload_impact
        Disparate impact on the payload alone.
    combined_impact
        Disparate impact on payload plus perturbed records (OpenScale's figure).
    flipped
        The payload records whose decision changed when their group was swapped, with
        columns ``original_value``, ``perturbed_value``, ``original_decision``,
        ``perturbed_decision`` added.
    n_perturbed
        Number of perturbed records (payload rows in either group).
    """

    payload_impact: DisparateImpact
    combined_impact: DisparateImpact
    flipped: pd.DataFrame
    n_perturbed: int


def _draw(rng: np.random.Generator, size: int, values: Sequence[Hashable],
          ranges: Sequence[Range], integer: bool, observed: NDArray[np.generic]) -> list[object]:
    """Draw ``size`` values uniformly from a group's values and ranges."""
    pool: list[object] = list(values)
    options = len(pool) + len(ranges)
    if options == 0:
        pool = list(observed)
        options = len(pool)
    out: list[object] = []
    picks = rng.integers(0, options, size=size)
    for pick in picks:
        if pick < len(pool):
            out.append(pool[pick])
        else:
            low, high = ranges[pick - len(pool)]
            out.append(int(rng.integers(int(np.ceil(low)), int(np.floor(high)) + 1))
                       if integer else float(rng.uniform(low, high)))
    return out


def perturbation_check(
    predict: Callable[[pd.DataFrame], ArrayLike],
    payload: pd.DataFrame,
    spec: GroupSpec,
    *,
    favourable: Sequence[Hashable],
    threshold_percent: float = 80.0,
    seed: Seed = 0,
) -> PerturbationReport:
    """Swap monitored and reference values of ``spec.feature`` and rescore.

    Parameters
    ----------
    predict
        Model scoring a DataFrame of records into decision labels.
    payload
        Scored records (model input).
    spec
        The groups; a monitored record gets a value drawn uniformly from the reference
        values/ranges (from the observed reference values when the reference is "all
        other values") and a reference record one from the monitored values/ranges.
    favourable
        Favourable decision labels.
    threshold_percent
        Flag disparate impact at or below this percentage.
    seed
        Seed of the drawn replacement values.

    Returns
    -------
    PerturbationReport
    """
    if spec.feature not in payload.columns:
        raise ValueError(NOT_A_COLUMN.format(name="feature", column=spec.feature,
                                             where="payload",
                                             available=shown(list(payload.columns))))
    if not payload.index.is_unique:
        raise ValueError("payload must have a unique index (records are matched by it); "
                         "call payload.reset_index(drop=True) first")
    threshold_percent = check_finite(threshold_percent, "threshold_percent")
    groups = spec.membership(payload[spec.feature])
    decisions = pd.Series(as_1d(predict(payload), "predict(payload)"), index=payload.index)
    check_lengths([("payload", len(payload)), ("predict(payload)", len(decisions))])
    rng = np.random.default_rng(seed)
    integer = pd.api.types.is_integer_dtype(payload[spec.feature])
    mon = (groups == MONITORED).to_numpy(dtype=bool)
    ref = (groups == REFERENCE).to_numpy(dtype=bool)
    perturbed = payload[mon | ref].copy()
    new_values = pd.Series(index=perturbed.index, dtype=object)
    observed_ref = payload.loc[ref, spec.feature].unique()
    new_values[payload.index[mon]] = _draw(rng, int(mon.sum()), spec.reference_values,
                                           spec.reference_ranges, integer, observed_ref)
    new_values[payload.index[ref]] = _draw(rng, int(ref.sum()), spec.monitored_values,
                                           spec.monitored_ranges, integer,
                                           payload.loc[mon, spec.feature].unique())
    perturbed[spec.feature] = new_values.to_numpy()
    if pd.api.types.is_numeric_dtype(payload[spec.feature]):
        perturbed[spec.feature] = pd.to_numeric(perturbed[spec.feature]).astype(
            payload[spec.feature].dtype)
    new_decisions = pd.Series(as_1d(predict(perturbed), "predict(perturbed)"),
                              index=perturbed.index)
    both_values = pd.concat([payload[spec.feature], perturbed[spec.feature]], ignore_index=True)
    both_decisions = pd.concat([decisions, new_decisions], ignore_index=True)
    payload_di = monitor_disparate_impact(decisions, payload[spec.feature], spec,
                                          favourable=favourable,
                                          threshold_percent=threshold_percent)
    combined_di = monitor_disparate_impact(both_decisions, both_values, spec,
                                           favourable=favourable,
                                           threshold_percent=threshold_percent)
    changed = (decisions[perturbed.index] != new_decisions).to_numpy(dtype=bool)
    flipped = payload.loc[perturbed.index[changed]].copy()
    flipped["original_value"] = payload.loc[flipped.index, spec.feature]
    flipped["perturbed_value"] = perturbed.loc[flipped.index, spec.feature]
    flipped["original_decision"] = decisions[flipped.index]
    flipped["perturbed_decision"] = new_decisions[flipped.index]
    return PerturbationReport(payload_impact=payload_di, combined_impact=combined_di,
                              flipped=flipped, n_perturbed=len(perturbed))
