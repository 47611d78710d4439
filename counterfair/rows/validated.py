"""Rows checked once at one door, encoded once, and cut into chunks that know their positions.

Every row-wise call (fitting, abduction of new rows, fair predictions, counterfactual
predictions, audits) turns its frame into a :class:`Rows` at its top with
:meth:`Rows.check`, the door: the frame is a non-empty DataFrame, every protected
column is present and complete, and the protected codes are computed under the
fit's :class:`~counterfair.model.encoding.Encoding` (learned from the rows when they
are training rows). Observed columns are parsed by their families the first time a
stage asks for them (:meth:`Rows.values`), once each, and kept. Below the door no
module checks, parses or encodes a column again: the stages take the :class:`Rows`.

:meth:`Rows.chunks` cuts the rows into chunks of
:func:`counterfair.options.chunk_bytes` of working memory; each chunk keeps the
global 0-based positions of its rows, by which every random draw is keyed
(:class:`counterfair.rng.RowRandom`), so results do not depend on the chunking.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.model.encoding import Encoding
from counterfair.model.families import family_of
from counterfair.model.specs import Observed, Protected
from counterfair.model.terms import group_codes
from counterfair.rows import chunking
from counterfair.rows.missing import missing_message, scm_columns

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

__all__ = ["Rows", "check_columns", "check_frame", "observed_values"]


def _label(value: object) -> object:
    """A row label or value as a plain Python object (no numpy scalar reprs in messages)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


def check_frame(data: object) -> pd.DataFrame:
    """``data`` if it is a non-empty DataFrame, else a :class:`~counterfair.errors.DataError`."""
    if not isinstance(data, pd.DataFrame):
        raise errors.DataError(errors.NOT_A_DATAFRAME.format(type=type(data).__name__))
    if len(data) == 0:
        raise errors.DataError(errors.EMPTY_DATA)
    return data


def check_columns(data: pd.DataFrame, columns: Sequence[str]) -> None:
    """Every column is present and has no missing values; the error names every column
    with missing values, its count and first row, and the number of complete rows
    (:func:`counterfair.rows.missing.missing_message`)."""
    for column in columns:
        if column not in data.columns:
            raise errors.DataError(
                errors.MISSING_COLUMN.format(column=column, columns=list(map(str, data.columns)))
            )
    message = missing_message(data, columns)
    if message:
        raise errors.DataError(message)


def _positions(positions: np.ndarray | None, n: int) -> np.ndarray:
    if positions is None:
        return np.arange(n, dtype=np.int64)
    where = np.asarray(positions)
    if where.shape != (n,) or (where.size and where.dtype.kind not in "iu"):
        raise ValueError(
            f"positions must hold one integer per row: shape {where.shape} for {n} rows"
        )
    return where.astype(np.int64)


@dataclass(frozen=True, eq=False)
class Rows:
    """Checked rows, their global positions, protected codes and parsed observed values.

    Attributes
    ----------
    frame : pandas.DataFrame
        The rows (a non-empty DataFrame, checked once).
    positions : numpy.ndarray
        Global 0-based positions of the rows in the whole data set, int64,
        shape ``(N,)``.
    encoding : Encoding or None
        The protected attributes' encoding the codes are under (``None`` for rows
        checked without an SCM, by :meth:`from_frame`).
    codes : dict of str to numpy.ndarray
        Codes of every protected attribute (values of a continuous one), ``(N,)``.
    holes : dict of str to numpy.ndarray
        For rows checked with ``missing="model"``: a boolean mask ``(N,)`` per observed
        node with missing values (True where missing). Empty otherwise.
    """

    frame: pd.DataFrame
    positions: np.ndarray
    encoding: Encoding | None = None
    codes: Mapping[str, np.ndarray] = field(default_factory=dict)
    _scm: SCM | None = field(default=None, repr=False)
    _values: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    holes: Mapping[str, np.ndarray] = field(default_factory=dict)

    # ------------------------------------------------------------------ the door
    @classmethod
    def check(
        cls,
        data: object,
        scm: SCM,
        encoding: Encoding | None = None,
        *,
        positions: np.ndarray | None = None,
        missing: str = "error",
    ) -> Rows:
        """The one door: check ``data`` for ``scm`` and encode its protected attributes.

        Rows already checked for this SCM and encoding come back as they are (with
        ``positions=None``): no column is checked twice.

        Parameters
        ----------
        data : pandas.DataFrame or Rows
            The rows.
        scm : SCM
            The model whose protected columns the rows must hold.
        encoding : Encoding, optional
            The fit's encoding; ``None`` learns it from these rows (training rows).
        positions : numpy.ndarray, optional
            Global positions of the rows (default ``0..N-1``, or the Rows' own).
        missing : {"error", "model"}
            ``"error"`` refuses missing values in every column the SCM reads (naming
            them all); ``"model"`` (a fit with ``missing="model"``) lets observed nodes
            have them, recorded in :attr:`holes` (protected and grouping columns must
            still be complete). Rows that carry holes are refused by every stage that
            does not ask for them.

        Raises
        ------
        DataError
            If ``data`` is not a non-empty DataFrame, a protected column is missing or
            has missing values, or holds a level the encoding does not know.
        ValueError
            If ``positions`` does not give one integer position per row.
        """
        if missing not in ("error", "model"):
            raise ValueError(f"missing must be 'error' or 'model' here, got {missing!r}")
        if isinstance(data, Rows):
            if positions is not None:
                raise ValueError("positions= is given twice: the Rows carry their positions")
            if data.holes and missing != "model":
                raise errors.DataError(
                    missing_message(data.frame, list(data.holes), hint=False)
                    + ". The fit modelled them (missing='model'); this step does not take "
                    "rows with missing values yet: give it complete rows"
                )
            done = data._scm is scm and data.encoding is not None
            if done and (encoding is None or data.encoding is encoding):
                return data
            positions = data.positions
            data = data.frame
        frame = check_frame(data)
        where = _positions(positions, len(frame))
        # every column the SCM reads is checked for missing values at once (a refusal
        # names them all); observed columns are parsed later, on demand
        columns = [*scm.protected, *scm_columns(scm, frame)]
        holes: dict[str, np.ndarray] = {}
        if missing == "model":
            for column in columns:
                if column in scm.observed and column not in scm.protected:
                    mask = frame[column].isna().to_numpy()
                    if mask.any():
                        holes[column] = mask
            columns = [c for c in columns if c not in holes]
        check_columns(frame, columns)
        if encoding is None:
            specs = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
            encoding = Encoding.from_data(specs, frame)
        terms = [t.term for eq in scm.equations.values() for t in eq.bending]
        codes = {**encoding.codes(frame), **group_codes(terms, frame)}
        return cls(frame, where, encoding, codes, scm, holes=holes)

    @classmethod
    def from_frame(cls, data: object, positions: np.ndarray | None = None) -> Rows:
        """Rows of a predictor that has no SCM: only the frame is checked.

        Rows are returned as they are (with ``positions=None``).

        Raises
        ------
        DataError
            If ``data`` is not a non-empty DataFrame.
        ValueError
            If ``positions`` does not give one integer position per row.
        """
        if isinstance(data, Rows) and positions is None:
            return data
        frame = check_frame(data.frame if isinstance(data, Rows) else data)
        return cls(frame, _positions(positions, len(frame)))

    # ------------------------------------------------------------------ values
    def values(
        self, nodes: Collection[str] | None = None, *, holes: bool = False
    ) -> dict[str, np.ndarray]:
        """Float values of observed columns, parsed by their families once and kept.

        ``nodes``: observed nodes (default: every observed node of the SCM). Level-valued
        families (ordinal, categorical) give level codes from 0. ``holes``: the fit of
        ``missing="model"`` reads a node with missing values (:attr:`holes`) as 0.0 where
        it is missing; every other reader is refused such a node.

        Raises
        ------
        DataError
            If a column is missing, has missing values, or holds a value its family
            does not allow (the message names the column, the value and the row).
        """
        scm = self._checked_scm()
        wanted = scm.observed if nodes is None else tuple(n for n in scm.observed if n in nodes)
        if not holes and any(n in self.holes for n in wanted):
            raise errors.DataError(
                missing_message(self.frame, [n for n in wanted if n in self.holes], hint=False)
                + ". The fit modelled them (missing='model'); this step does not take "
                "rows with missing values yet: give it complete rows"
            )
        todo = [n for n in wanted if n not in self._values]
        check_columns(self.frame, [n for n in todo if n not in self.holes])
        for node in todo:
            spec = scm.specs[node]
            assert isinstance(spec, Observed)
            mask = self.holes.get(node)
            if mask is None:
                self._values[node] = family_of(spec).column_values(spec, self.frame[node], node)
                continue
            # a modelled hole holds 0.0 (a valid value of every family, level codes from
            # 0): the fit program never reads it (missing="model", Rows.holes)
            column = np.zeros(len(self.frame))
            column[~mask] = family_of(spec).column_values(
                spec, self.frame[node][~mask], node
            )
            self._values[node] = column
        return {node: self._values[node] for node in wanted}

    def present(self) -> tuple[str, ...]:
        """The SCM's observed nodes that are columns of these rows."""
        columns = set(self.frame.columns)
        return tuple(n for n in self._checked_scm().observed if n in columns)

    def _checked_scm(self) -> SCM:
        if self._scm is None:
            raise TypeError("these Rows were not checked for an SCM (use Rows.check)")
        return self._scm

    # ------------------------------------------------------------------ cutting
    def __len__(self) -> int:
        return len(self.frame)

    def take(self, index: np.ndarray | slice) -> Rows:
        """The rows at ``index`` (positions in these rows), with everything they carry."""
        frame = self.frame.iloc[index]
        return Rows(
            frame,
            self.positions[index],
            self.encoding,
            {k: v[index] for k, v in self.codes.items()},
            self._scm,
            {k: v[index] for k, v in self._values.items()},
            {k: v[index] for k, v in self.holes.items() if v[index].any()},
        )

    def copy(self) -> Rows:
        """The same rows with a copy of the frame (a fit keeps rows the user cannot change)."""
        return Rows(
            self.frame.copy(), self.positions, self.encoding, self.codes, self._scm,
            dict(self._values), dict(self.holes),
        )

    def chunk(self, rows: slice) -> Rows:
        """The rows of a slice, with their global positions."""
        return self.take(rows)

    def chunks(self, bytes_per_row: float) -> Iterator[tuple[slice, Rows]]:
        """``(slice, chunk)`` pairs covering the rows in order, sized by ``chunk_bytes``."""
        for part in chunking.row_chunks(
            len(self), bytes_per_row=bytes_per_row, positions=self.positions
        ):
            yield part.rows, self.chunk(part.rows)


def observed_values(
    scm: SCM, data: pd.DataFrame | Rows, nodes: Collection[str] | None = None
) -> dict[str, np.ndarray]:
    """Float values of a frame's observed columns (all observed nodes by default).

    For a frame at hand (tests, tools): the frame is checked and the columns parsed
    as at the door, without the protected columns. Stages take :meth:`Rows.values`.
    """
    if isinstance(data, Rows) and data._scm is scm:
        return data.values(nodes)
    frame = check_frame(data.frame if isinstance(data, Rows) else data)
    return Rows(frame, _positions(None, len(frame)), _scm=scm).values(nodes)
