"""Loaders for UCI Adult and ProPublica COMPAS, read from the data folder.

Neither file is stored in the repository or downloaded: they are looked for in

1. the ``data_home`` argument,
2. the folder named by the ``COUNTERFAIR_DATA`` environment variable,

and a missing file is an error that names every folder searched and the public copy.

* :func:`load_adult` -- ``adult.data`` (32,561 rows) and ``adult.test`` (16,281 rows;
  its comment line skipped and the trailing dot of its labels removed), rows with a
  missing value (``?``) in any column dropped; a ``split`` column says which file a
  row came from; ``income`` is 1 for ``>50K``.
* :func:`load_compas` -- ``compas-scores-two-years.csv`` with ProPublica's filters
  (``-30 <= days_b_screening_arrest <= 30``, ``is_recid != -1``,
  ``c_charge_degree != 'O'``, ``score_text != 'N/A'``): 6,172 rows.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from counterfair.datasets.law_school import DATA_ENV_VAR, check_data_home

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_URL",
    "COMPAS_FILENAME",
    "COMPAS_URL",
    "find_data_file",
    "load_adult",
    "load_compas",
]

ADULT_COLUMNS: tuple[str, ...] = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
)
"""Columns of ``adult.data`` / ``adult.test`` (from ``adult.names``)."""

ADULT_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
"""Public copy of the Adult files."""

COMPAS_FILENAME = "compas-scores-two-years.csv"
"""File name of ProPublica's two-year recidivism data."""

COMPAS_URL = ("https://raw.githubusercontent.com/propublica/compas-analysis/master/"
              "compas-scores-two-years.csv")
"""Public copy of the COMPAS file."""

COMPAS_COLUMNS: tuple[str, ...] = (
    "sex", "age", "age_cat", "race", "juv_fel_count", "juv_misd_count", "juv_other_count",
    "priors_count", "c_charge_degree", "days_b_screening_arrest", "decile_score",
    "score_text", "is_recid", "two_year_recid",
)
"""Columns kept by :func:`load_compas`."""


def find_data_file(filename: str, data_home: str | os.PathLike[str] | None = None,
                   *, url: str = "") -> Path:
    """Path of ``filename`` in ``data_home`` or the ``COUNTERFAIR_DATA`` folder.

    Raises
    ------
    FileNotFoundError
        Naming every folder searched (and how it was chosen) and where to get the file;
        also when ``data_home`` is given but does not exist.
    """
    check_data_home(data_home)
    folders: list[tuple[Path, str]] = []
    if data_home is not None:
        folders.append((Path(data_home), "data_home / --data-dir"))
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        folders.append((Path(env), f"${DATA_ENV_VAR}"))
    for folder, _ in folders:
        candidate = folder / filename
        if candidate.is_file():
            return candidate
    searched = "; ".join(f"{folder} ({how})" for folder, how in folders) or (
        f"none: pass data_home / --data-dir or set ${DATA_ENV_VAR}")
    hint = f"; a public copy is at {url}" if url else ""
    raise FileNotFoundError(f"{filename} not found. Folders searched: {searched}{hint}")


def load_adult(data_home: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """UCI Adult, training and test files together, without rows with missing values.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ADULT_COLUMNS` (``income``: 1 for ``>50K``, else 0) and ``split``
        (``"train"`` / ``"test"``); 45,222 rows for the published files.
    """
    frames = []
    for filename, split, skip in (("adult.data", "train", 0), ("adult.test", "test", 1)):
        path = find_data_file(filename, data_home, url=ADULT_URL)
        frame = pd.read_csv(path, header=None, names=list(ADULT_COLUMNS), skiprows=skip,
                            skipinitialspace=True, na_values="?", keep_default_na=False)
        frame = frame.dropna(how="all")
        frame["split"] = split
        frames.append(frame)
    data = pd.concat(frames, ignore_index=True).dropna().reset_index(drop=True)
    labels = data["income"].astype(str).str.rstrip(".")
    unknown = sorted(set(labels) - {">50K", "<=50K"})
    if unknown:
        raise ValueError(f"column 'income' of the Adult files has unknown labels {unknown}")
    data["income"] = (labels == ">50K").astype(int)
    for column in ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss",
                   "hours-per-week"):
        data[column] = data[column].astype(int)
    return data


def load_compas(data_home: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """ProPublica's COMPAS two-year recidivism data with ProPublica's filters.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COMPAS_COLUMNS`; 6,172 rows for the published file.
    """
    path = find_data_file(COMPAS_FILENAME, data_home, url=COMPAS_URL)
    raw = pd.read_csv(path)
    missing = [c for c in COMPAS_COLUMNS if c not in raw.columns]
    if missing:
        raise ValueError(f"{path} lacks the column(s) {missing}")
    keep = (raw["days_b_screening_arrest"].between(-30, 30)
            & (raw["is_recid"] != -1)
            & (raw["c_charge_degree"] != "O")
            & (raw["score_text"] != "N/A")
            & raw["score_text"].notna())
    return raw.loc[keep, list(COMPAS_COLUMNS)].reset_index(drop=True)
