"""Loader, split and subsample of the LSAC law school data used by Kusner et al. (2017).

The data (``law_data.csv``, 21,791 rows) is never stored in the repository. It is looked for
by the data-folder search shared by every data set
(:func:`counterfair.datasets.find_data_file`): in the ``data_home`` argument, the folder named
by the ``COUNTERFAIR_DATA`` environment variable, then the per-user cache folder
(:func:`counterfair.datasets.default_data_home`); if absent everywhere, it is downloaded from
:data:`LAW_SCHOOL_URL` into the cache folder and checked against :data:`LAW_SCHOOL_SHA256`.

References
----------
Kusner, M. J., Loftus, J., Russell, C. and Silva, R. (2017). Counterfactual fairness.
*Advances in Neural Information Processing Systems 30*.

Wightman, L. F. (1998). *LSAC National Longitudinal Bar Passage Study*. Law School
Admission Council.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import train_test_split

from counterfair.datasets._files import find_data_file
from counterfair.rows.subsample import stratified_positions

__all__ = [
    "LAW_SCHOOL_COLUMNS",
    "LAW_SCHOOL_FILENAME",
    "LAW_SCHOOL_SHA256",
    "LAW_SCHOOL_URL",
    "RACE_LEVELS",
    "SEX_LEVELS",
    "find_law_school_file",
    "law_school_split",
    "law_school_subsample",
    "load_law_school",
]

LAW_SCHOOL_FILENAME = "law_data.csv"
"""File name of the law school data."""

LAW_SCHOOL_SHA256 = "778f7e055d7be170197b73c98d6ce7f18b4f38d5ca1093c6af10bb9fcd75181d"
"""sha256 of the published ``law_data.csv``; a download is rejected unless it matches."""

LAW_SCHOOL_URL = "https://www.dropbox.com/s/ca74he84aw6ed3z/law_data.csv?dl=1"
"""Public copy of ``law_data.csv`` used by Kusner et al. (2017)."""

RACE_LEVELS: tuple[str, ...] = (
    "White",
    "Black",
    "Asian",
    "Hispanic",
    "Mexican",
    "Other",
    "Puertorican",
    "Amerindian",
)
"""Categories of ``race``; the first one (``"White"``) is the reference level."""

SEX_LEVELS: tuple[str, ...] = ("Female", "Male")
"""Categories of ``sex``, in the order of the raw coding (1 = female, 2 = male)."""

LAW_SCHOOL_COLUMNS: tuple[str, ...] = (
    "race",
    "sex",
    "LSAT",
    "UGPA",
    "region_first",
    "ZFYA",
    "sander_index",
    "first_pf",
)
"""Columns of the frame returned by :func:`load_law_school`, in order."""

_SEX_CODES: dict[int, str] = {1: "Female", 2: "Male"}
_FLOAT_COLUMNS = ("UGPA", "ZFYA", "sander_index")
_EXCLUDED_REGION = "PO"
_STRATIFY_COLUMN = "first_pf"


def find_law_school_file(
    data_home: str | os.PathLike[str] | None = None, *, download: bool = True
) -> Path:
    """Locate ``law_data.csv``, downloading it into the cache if it is nowhere to be found.

    Parameters
    ----------
    data_home : str or os.PathLike or None, optional
        Folder holding ``law_data.csv`` (a path to the CSV file itself is also accepted).
        Searched first.
    download : bool, default True
        If the file is in none of the searched folders, download :data:`LAW_SCHOOL_URL` into
        :func:`~counterfair.datasets.default_data_home` and verify its sha256. If False,
        never touch the network.

    Returns
    -------
    pathlib.Path
        Path of the file, from the first of these that holds it: ``data_home``, the folder in
        the ``COUNTERFAIR_DATA`` environment variable,
        :func:`~counterfair.datasets.default_data_home` (see
        :func:`~counterfair.datasets.find_data_file`, which this calls).

    Raises
    ------
    FileNotFoundError
        If ``data_home`` is given but does not exist; or if the file is in none of the folders
        and ``download`` is False or the download fails (no network, HTTP error, timeout,
        sha256 mismatch, unwritable cache...). The message lists every folder searched, the
        file name and the URL.

    Notes
    -----
    Files found locally are not checksummed; only downloads are.
    """
    return find_data_file(
        LAW_SCHOOL_FILENAME,
        data_home,
        url=LAW_SCHOOL_URL,
        sha256=LAW_SCHOOL_SHA256,
        download=download,
    )


def _check_levels(values: pd.Series, allowed: list[object], column: str) -> None:
    bad = values[~values.isin(allowed)]
    if len(bad) > 0:
        shown = sorted({str(v) for v in bad.unique()})
        raise ValueError(
            f"column {column!r} has values outside the known levels {allowed}: {shown} "
            f"({len(bad)} rows)"
        )


def load_law_school(
    data_home: str | os.PathLike[str] | None = None, *, download: bool = True
) -> pd.DataFrame:
    """Load the LSAC law school data, preprocessed as by Kusner et al. (2017).

    Parameters
    ----------
    data_home : str or os.PathLike or None, optional
        Folder holding ``law_data.csv``; see :func:`find_law_school_file` for the search order.
    download : bool, default True
        Whether to download the file if it cannot be found locally.

    Returns
    -------
    pandas.DataFrame
        One row per student (21,790 for the published file) with a fresh ``RangeIndex`` and
        the columns of :data:`LAW_SCHOOL_COLUMNS`:

        - ``race``: unordered ``Categorical`` with categories :data:`RACE_LEVELS`;
        - ``sex``: unordered ``Categorical`` with categories :data:`SEX_LEVELS`
          (raw 1 -> ``"Female"``, 2 -> ``"Male"``);
        - ``LSAT``: int64, the raw score rounded to the nearest integer with ``np.rint``
          (halves to even, like R's ``round``), as needed for a Poisson model;
        - ``UGPA``, ``ZFYA``, ``sander_index``: float64;
        - ``region_first``: string, as read;
        - ``first_pf``: int64, 1 if the student passed the first year.

        The row whose ``region_first`` is ``"PO"`` is dropped, as is the unnamed index column.

    Raises
    ------
    FileNotFoundError
        If the file cannot be found or downloaded (see :func:`find_law_school_file`).
    ValueError
        If an expected column is missing or has missing values, or if ``race``, ``sex`` or
        ``first_pf`` has a value outside its known levels; the message names the column.
    """
    path = find_law_school_file(data_home, download=download)
    raw = pd.read_csv(path)

    missing = [c for c in LAW_SCHOOL_COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(
            f"{path} lacks the expected column(s) {missing}; "
            f"expected columns: {list(LAW_SCHOOL_COLUMNS)}"
        )
    raw = raw.loc[raw["region_first"] != _EXCLUDED_REGION, list(LAW_SCHOOL_COLUMNS)]
    raw = raw.reset_index(drop=True)
    for column in LAW_SCHOOL_COLUMNS:
        n_missing = int(raw[column].isna().sum())
        if n_missing:
            raise ValueError(f"column {column!r} of {path} has {n_missing} missing values")

    _check_levels(raw["race"], list(RACE_LEVELS), "race")
    _check_levels(raw["sex"], list(_SEX_CODES), "sex")
    _check_levels(raw["first_pf"], [0, 1], "first_pf")

    out = pd.DataFrame(
        {
            "race": pd.Categorical(raw["race"], categories=list(RACE_LEVELS), ordered=False),
            "sex": pd.Categorical(
                raw["sex"].map(_SEX_CODES), categories=list(SEX_LEVELS), ordered=False
            ),
            "LSAT": np.rint(raw["LSAT"].to_numpy(dtype=np.float64)).astype(np.int64),
            "UGPA": raw["UGPA"].astype(np.float64),
            "region_first": raw["region_first"],
            "ZFYA": raw["ZFYA"].astype(np.float64),
            "sander_index": raw["sander_index"].astype(np.float64),
            "first_pf": raw["first_pf"].astype(np.int64),
        }
    )
    return out


def _check_stratify_column(df: pd.DataFrame) -> None:
    if _STRATIFY_COLUMN not in df.columns:
        raise ValueError(f"df has no column {_STRATIFY_COLUMN!r} to stratify on")


def law_school_split(
    df: pd.DataFrame, *, test_size: float = 0.2, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split the data into train and test sets, stratified on ``first_pf``.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`load_law_school` (any frame with a ``first_pf`` column).
    test_size : float, default 0.2
        Fraction of rows in the test set, strictly between 0 and 1.
    seed : int, default 0
        Random seed (``random_state`` of :func:`sklearn.model_selection.train_test_split`).

    Returns
    -------
    train, test : tuple of pandas.DataFrame
        Disjoint row subsets covering ``df``, each with a fresh ``RangeIndex``. The test set has
        ``ceil(test_size * len(df))`` rows and both keep the proportion of ``first_pf`` classes.

    Raises
    ------
    ValueError
        If ``test_size`` is not in (0, 1), ``df`` has no ``first_pf`` column, or the split is
        impossible (for instance a class with a single row).
    """
    if isinstance(test_size, bool) or not 0.0 < float(test_size) < 1.0:
        raise ValueError(f"test_size must be a fraction strictly between 0 and 1, got {test_size}")
    _check_stratify_column(df)
    train, test = train_test_split(
        df,
        test_size=float(test_size),
        random_state=seed,
        shuffle=True,
        stratify=df[_STRATIFY_COLUMN],
    )
    return train.reset_index(drop=True), test.reset_index(drop=True)


def law_school_subsample(df: pd.DataFrame, n: int, *, seed: int = 0) -> pd.DataFrame:
    """Draw ``n`` rows without replacement, stratified on ``first_pf``, for quick runs.

    Each ``first_pf`` class gets a share of ``n`` proportional to its size (largest-remainder
    rounding), drawn uniformly at random within the class; rows keep their original order.

    Parameters
    ----------
    df : pandas.DataFrame
        Output of :func:`load_law_school` (any frame with a ``first_pf`` column).
    n : int
        Number of rows wanted, at least 1.
    seed : int, default 0
        Seed of the :func:`numpy.random.default_rng` generator.

    Returns
    -------
    pandas.DataFrame
        ``n`` rows of ``df`` with a fresh ``RangeIndex``; if ``n >= len(df)``, a copy of the
        whole of ``df`` (index reset).

    Raises
    ------
    ValueError
        If ``n < 1`` or ``df`` has no ``first_pf`` column.
    """
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    _check_stratify_column(df)
    n = int(n)
    if n >= len(df):
        return df.reset_index(drop=True)

    codes, _ = pd.factorize(df[_STRATIFY_COLUMN], sort=True, use_na_sentinel=False)
    positions = stratified_positions(np.asarray(codes), n, seed=seed)
    return df.iloc[positions].reset_index(drop=True)
