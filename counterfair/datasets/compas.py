"""Loader for ProPublica's COMPAS two-year recidivism data, read from the data folder.

The file is not stored in the repository, nor downloaded: ``compas-scores-two-years.csv`` is
looked for by the data-folder search shared by every data set
(:func:`counterfair.datasets.find_data_file`): in the ``data_home`` argument (the folder, or
the file itself), the folder named by the ``COUNTERFAIR_DATA`` environment variable, then the
per-user cache folder; a missing file is an error that names every folder searched and the
public copy.

:func:`load_compas` applies ProPublica's filters (``-30 <= days_b_screening_arrest <= 30``,
``is_recid != -1``, ``c_charge_degree != 'O'``, ``score_text != 'N/A'``): 6,172 rows.
"""

from __future__ import annotations

import os

import pandas as pd

from counterfair.datasets._files import find_data_file

__all__ = [
    "COMPAS_COLUMNS",
    "COMPAS_FILENAME",
    "COMPAS_URL",
    "load_compas",
]

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


def load_compas(data_home: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """ProPublica's COMPAS two-year recidivism data with ProPublica's filters.

    Parameters
    ----------
    data_home : str or os.PathLike or None, optional
        Folder holding :data:`COMPAS_FILENAME` (or the file itself), searched first (see
        :func:`~counterfair.datasets.find_data_file`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`COMPAS_COLUMNS`; 6,172 rows for the published file.

    Raises
    ------
    FileNotFoundError
        If ``data_home`` does not exist, or the file is in none of the searched folders.
    ValueError
        If a column of :data:`COMPAS_COLUMNS` is missing.
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
