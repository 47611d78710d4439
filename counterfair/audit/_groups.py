"""Group layout shared by the group audits: attributes, intersections, codes, references."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from ._validation import (
    DUPLICATE_ATTRIBUTE,
    EMPTY_GROUP,
    REFERENCE_NOT_FOUND,
    UNKNOWN_ATTRIBUTE,
    as_1d,
    check_lengths,
    find_label,
    shown,
)

INTERSECTION_SEPARATOR = " x "
"""Joins attribute names (``"race x sex"``) and group labels (``"Black x Female"``)."""

Protected: TypeAlias = "pd.DataFrame | pd.Series | Mapping[str, ArrayLike] | ArrayLike"
"""Protected attributes: a DataFrame, a Series, a mapping name -> values or an array.

A 1-D array (or list) is one attribute named ``"protected"``; a 2-D array has one
attribute per column, named ``"protected_0"``, ``"protected_1"``, ...
"""

REFERENCE_RULE = (
    "the first group in order: the category order of a categorical column (so the "
    "reference level of an SCM when the column comes from it, or pass "
    "reference=reference_levels(fit)), else sorted order"
)
"""The default reference group of every group audit (the measures of ``GroupAudit``:
``metrics``, ``disparate_impact``, ``class_balance``), always overridable
with ``reference=``. It does not depend on group sizes, so it holds still across
samples and runs."""


def reference_levels(model: Any) -> dict[str, str]:
    """Reference level of every protected attribute of a fitted SCM (or an SCM).

    Parameters
    ----------
    model : Fit or SCM
        A :class:`~counterfair.Fit` (levels fixed at fit time; the first is the
        reference of reference coding) or an :class:`~counterfair.SCM` whose
        ``Protected`` specs declare ``reference=`` or ``levels=``.

    Returns
    -------
    dict of str to str
        ``{attribute: level}``, ready for ``reference=`` of the group audits.

    Raises
    ------
    ValueError
        If an SCM's protected attribute declares neither ``levels`` nor ``reference``.
    """
    encoding = getattr(model, "encoding", None)
    if encoding is not None:
        return {node: str(levels[0]) for node, levels in encoding.levels.items()}
    out: dict[str, str] = {}
    for node in model.protected:
        spec = model.specs[node]
        if spec.reference is not None:
            out[node] = str(spec.reference)
        elif spec.levels is not None:
            out[node] = str(spec.levels[0])
        else:
            raise ValueError(
                f"protected attribute {node!r} declares no levels or reference; pass a fitted "
                "SCM (its levels are fixed at fit time) or reference={...} explicitly"
            )
    return out
Intersections: TypeAlias = bool | Sequence[Sequence[str]]
"""``True`` (all attributes crossed), ``False`` or explicit attribute-name sequences."""


def _python_scalar(value: Any) -> Hashable:
    scalar: Hashable = value.item() if isinstance(value, np.generic) else value
    return scalar


def encode(values: NDArray[Any] | pd.Series, name: str) -> tuple[NDArray[np.intp], list[Hashable]]:
    """Integer codes and ordered labels of one categorical variable.

    Categorical dtypes keep their category order (an unused category is an error: a group
    with no members); other values are sorted when they can be, else kept in order of
    appearance.
    """
    series = values if isinstance(values, pd.Series) else pd.Series(values)
    if isinstance(series.dtype, pd.CategoricalDtype):
        codes = series.cat.codes.to_numpy().astype(np.intp)
        categories = [_python_scalar(c) for c in series.cat.categories]
        counts = np.bincount(codes, minlength=len(categories))
        for label, count in zip(categories, counts, strict=True):
            if count == 0:
                raise ValueError(EMPTY_GROUP.format(group=label, attribute=name))
        return codes, categories
    try:
        codes, uniques = pd.factorize(series, sort=True)
    except TypeError:
        codes, uniques = pd.factorize(series, sort=False)
    return np.asarray(codes, dtype=np.intp), [_python_scalar(u) for u in uniques]


def protected_frame(protected: Protected, n: int | None = None) -> pd.DataFrame:
    """Normalise ``protected`` to a DataFrame with string column names and a 0..n-1 index.

    Raises
    ------
    ValueError
        On missing values, empty input, duplicate names or a length differing from ``n``.
    """
    if isinstance(protected, pd.Series):
        name = "protected" if protected.name is None else str(protected.name)
        frame = protected.to_frame(name=name)
    elif isinstance(protected, pd.DataFrame):
        frame = protected.copy()
        frame.columns = [str(c) for c in frame.columns]
    elif not isinstance(protected, Mapping):
        array = np.asarray(protected, dtype=object)
        if array.ndim == 1:
            frame = pd.DataFrame({"protected": pd.Series(list(array))})
        elif array.ndim == 2:
            frame = pd.DataFrame(
                {f"protected_{j}": pd.Series(list(array[:, j])) for j in range(array.shape[1])}
            )
        else:
            raise ValueError(
                f"protected must be a DataFrame, Series, mapping or 1-D / 2-D array; "
                f"got an array of shape {array.shape}"
            )
    else:
        frame = pd.DataFrame({str(k): pd.Series(as_1d(v, f"protected[{k!r}]"))
                              for k, v in protected.items()})
    if frame.shape[1] == 0:
        raise ValueError("protected must contain at least one attribute (column)")
    duplicated = frame.columns[frame.columns.duplicated()]
    if len(duplicated):
        raise ValueError(DUPLICATE_ATTRIBUTE.format(attribute=duplicated[0]))
    if n is not None:
        check_lengths([("y_true", n), ("protected", len(frame))])
    for column in frame.columns:
        as_1d(frame[column], f"protected[{column!r}]")
    return frame.reset_index(drop=True)


@dataclass(frozen=True)
class GroupLayout:
    """Row-to-group assignment for every attribute (including intersections).

    Attributes
    ----------
    attributes
        Attribute names; intersections are named like ``"race x sex"``.
    codes
        Per attribute, the group code of each individual.
    labels
        Per attribute, the group labels in code order.
    strata
        Cell of the finest partition (all protected attributes crossed) per individual;
        used to stratify bootstrap resamples.
    """

    attributes: tuple[str, ...]
    codes: tuple[NDArray[np.intp], ...]
    labels: tuple[tuple[Hashable, ...], ...]
    strata: NDArray[np.intp]

    @property
    def n(self) -> int:
        """Number of individuals."""
        return int(self.strata.size)

    @property
    def index(self) -> pd.MultiIndex:
        """Row index ``(attribute, group)`` over all attributes, in layout order."""
        tuples = [(a, g) for a, labels in zip(self.attributes, self.labels, strict=True)
                  for g in labels]
        return pd.MultiIndex.from_tuples(tuples, names=["attribute", "group"])

    @property
    def attribute_of_row(self) -> NDArray[np.intp]:
        """Attribute position of each row of :attr:`index`."""
        return np.repeat(np.arange(len(self.attributes)), [len(g) for g in self.labels])

    def group_sums(
        self, weights: NDArray[np.float64], rows: NDArray[np.intp] | None = None
    ) -> NDArray[np.float64]:
        """Per-group column sums of ``weights`` (shape ``(n, k)``) over the selected rows.

        Returns an array of shape ``(n_groups_total, k)`` aligned with :attr:`index`.
        """
        picked = weights if rows is None else weights[rows]  # no copy of all rows
        blocks = []
        for codes, labels in zip(self.codes, self.labels, strict=True):
            code = codes if rows is None else codes[rows]
            blocks.append(np.column_stack([
                np.bincount(code, weights=picked[:, j], minlength=len(labels))
                for j in range(picked.shape[1])
            ]))
        return np.vstack(blocks)

    @property
    def n_strata(self) -> int:
        """Number of cells of the finest partition (all protected attributes crossed)."""
        return int(self.strata.max()) + 1 if self.strata.size else 0

    def stratum_sums(self, weights: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per-stratum column sums of ``weights`` (shape ``(n, k)``): ``(n_strata, k)``."""
        return stratum_sums(self.strata, weights, self.n_strata)

    def strata_membership(self) -> NDArray[np.float64]:
        """``(n_groups_total, n_strata)`` 0/1 matrix: the strata that make up each group.

        Every group of every attribute (intersections included) is a union of strata, so
        per-group sums are this matrix times per-stratum sums.
        """
        _, first = np.unique(self.strata, return_index=True)
        blocks = []
        for codes, labels in zip(self.codes, self.labels, strict=True):
            block = np.zeros((len(labels), first.size))
            block[codes[first], np.arange(first.size)] = 1.0
            blocks.append(block)
        return np.vstack(blocks)

    def reference_rows(self, reference: Mapping[str, Hashable] | None) -> NDArray[np.intp]:
        """Row (in :attr:`index`) of the reference group of each attribute.

        The default reference of an attribute is :data:`REFERENCE_RULE`: its first group in
        order (category order for categoricals, else sorted). Intersection references may
        be given as the joined label or as a tuple.
        """
        reference = dict(reference or {})
        for attribute in reference:
            if attribute not in self.attributes:
                raise ValueError(UNKNOWN_ATTRIBUTE.format(
                    name="reference", attribute=attribute, available=list(self.attributes)))
        rows = []
        start = 0
        for attribute, _codes, labels in zip(self.attributes, self.codes, self.labels,
                                            strict=True):
            if attribute in reference:
                wanted = reference[attribute]
                if isinstance(wanted, tuple) and INTERSECTION_SEPARATOR in attribute:
                    wanted = INTERSECTION_SEPARATOR.join(str(w) for w in wanted)
                position = find_label(labels, wanted)
                if position is None:
                    raise ValueError(REFERENCE_NOT_FOUND.format(
                        group=wanted, attribute=attribute, available=shown(list(labels))))
            else:
                position = 0  # REFERENCE_RULE: the first group in order
            rows.append(start + position)
            start += len(labels)
        return np.asarray(rows, dtype=np.intp)

    def reference_labels(self, rows: NDArray[np.intp]) -> dict[str, Hashable]:
        """Map each attribute to the label of its reference row."""
        index = self.index
        return {str(index[r][0]): index[r][1] for r in rows}


def stratum_sums(strata: NDArray[np.intp], weights: NDArray[np.float64],
                 n_strata: int) -> NDArray[np.float64]:
    """Column sums of ``weights`` ``(n, k)`` per stratum code: ``(n_strata, k)``."""
    return np.column_stack([np.bincount(strata, weights=weights[:, j], minlength=n_strata)
                            for j in range(weights.shape[1])])


def build_layout(frame: pd.DataFrame, intersections: Intersections = True) -> GroupLayout:
    """Encode the protected attributes and the requested intersections.

    Parameters
    ----------
    frame
        Protected attributes as returned by :func:`protected_frame`.
    intersections
        ``True``: add the intersection of all attributes when there are at least two;
        ``False``: none; or a sequence of attribute-name sequences, one per intersection.
    """
    names = [str(c) for c in frame.columns]
    encoded = {name: encode(frame[name], name) for name in names}
    attributes: list[str] = list(names)
    codes = [encoded[name][0] for name in names]
    labels = [tuple(encoded[name][1]) for name in names]

    if intersections is True:
        combos: list[list[str]] = [names] if len(names) >= 2 else []
    elif intersections is False:
        combos = []
    else:
        combos = [list(c) for c in intersections]
    for combo in combos:
        for name in combo:
            if name not in encoded:
                raise ValueError(UNKNOWN_ATTRIBUTE.format(
                    name="intersections", attribute=name, available=names))
        code, label = _cross([encoded[name] for name in combo])
        attributes.append(INTERSECTION_SEPARATOR.join(combo))
        codes.append(code)
        labels.append(tuple(label))
    strata, _ = _cross([encoded[name] for name in names])
    return GroupLayout(tuple(attributes), tuple(codes), tuple(labels), strata)


def _cross(
    parts: Sequence[tuple[NDArray[np.intp], list[Hashable]]],
) -> tuple[NDArray[np.intp], list[str]]:
    """Cross several encoded variables; only combinations that occur become groups."""
    combined = np.zeros(parts[0][0].size, dtype=np.int64)
    for codes, labels in parts:
        combined = combined * len(labels) + codes
    observed, inverse = np.unique(combined, return_inverse=True)
    names = []
    for value in observed:
        digits = []
        rest = int(value)
        for _, labels in reversed(parts):
            rest, digit = divmod(rest, len(labels))
            digits.append(str(labels[digit]))
        names.append(INTERSECTION_SEPARATOR.join(reversed(digits)))
    return inverse.reshape(-1).astype(np.intp), names


UNSEEN_CELL = (
    "{where}: protected attribute {attribute!r} has the value {value!r}, which is not among "
    "the groups of the audit ({available})"
)
"""A row of a piece whose group is not in the layout built from all pieces' cells."""


@dataclass(frozen=True)
class CellCoder:
    """Strata of rows that arrive in pieces (chunks, Dask partitions).

    Built from the distinct cells of all rows (one row per combination of protected
    values that occurs), its :attr:`layout` is the layout the whole frame would get:
    the labels of each attribute, the intersections, the references and the stratum
    numbering depend only on which cells occur. :meth:`strata` then numbers the rows of
    any piece in that layout, so per-stratum sums of the pieces add up to those of the
    whole frame.
    """

    layout: GroupLayout
    names: tuple[str, ...]
    combined: NDArray[np.int64]

    @classmethod
    def of(cls, cells: pd.DataFrame, intersections: Intersections = True) -> CellCoder:
        """The coder of the layout of ``cells`` (distinct protected rows, any order)."""
        frame = protected_frame(cells)
        layout = build_layout(frame, intersections)
        names = tuple(str(c) for c in frame.columns)
        coder = cls(layout, names, np.zeros(0, dtype=np.int64))
        combined = np.unique(coder._combined(frame, "the cells"))
        return cls(layout, names, combined)

    def _combined(self, frame: pd.DataFrame, where: str) -> NDArray[np.int64]:
        combined = np.zeros(len(frame), dtype=np.int64)
        for name, labels in zip(self.names, self.layout.labels, strict=False):
            values = frame[name]
            codes = pd.Index(list(labels)).get_indexer(np.asarray(values, dtype=object))
            codes = codes.astype(np.int64)
            unseen = codes < 0
            if unseen.any():
                value = values.to_numpy()[np.flatnonzero(unseen)[0]]
                raise ValueError(UNSEEN_CELL.format(where=where, attribute=name, value=value,
                                                    available=shown(list(labels))))
            combined = combined * len(labels) + codes
        return combined

    def strata(self, frame: pd.DataFrame, where: str = "the rows") -> NDArray[np.intp]:
        """Stratum of each row of ``frame`` (its protected columns) in :attr:`layout`.

        Raises
        ------
        ValueError
            Naming ``where``, the attribute and the value of a row whose cell is not in
            the layout.
        """
        missing = [name for name in self.names if name not in frame.columns]
        if missing:
            raise ValueError(f"{where}: protected attribute {missing[0]!r} is not a column")
        combined = self._combined(frame, where)
        position = np.searchsorted(self.combined, combined)
        found = position < self.combined.size
        found[found] = self.combined[position[found]] == combined[found]
        if not found.all():
            row = frame.iloc[int(np.flatnonzero(~found)[0])]
            cell = INTERSECTION_SEPARATOR.join(str(row[name]) for name in self.names)
            raise ValueError(f"{where}: the cell {cell!r} of the protected attributes is not "
                             "among the cells of the audit")
        return position.astype(np.intp)
