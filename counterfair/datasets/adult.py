"""Loader for UCI Adult, read from the data folder.

The files are not stored in the repository, nor downloaded: ``adult.data`` and ``adult.test``
are looked for by the data-folder search shared by every data set
(:func:`counterfair.datasets.find_data_file`): in the ``data_home`` argument (a folder, since
there are two files), the folder named by the ``COUNTERFAIR_DATA`` environment variable, then
the per-user cache folder; a missing file is an error that names every folder searched and the
public copy.

:func:`load_adult` reads ``adult.data`` (32,561 rows) and ``adult.test`` (16,281 rows; its
comment line skipped and the trailing dot of its labels removed), drops rows with a missing
value (``?``) in any column, adds a ``split`` column saying which file a row came from, and
codes ``income`` as 1 for ``>50K``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from counterfair.datasets._files import find_data_file

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_URL",
    "load_adult",
]

ADULT_COLUMNS: tuple[str, ...] = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "income",
)
"""Columns of ``adult.data`` / ``adult.test`` (from ``adult.names``)."""

ADULT_URL = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/"
"""Public copy of the Adult files."""


def load_adult(data_home: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """UCI Adult, training and test files together, without rows with missing values.

    Parameters
    ----------
    data_home : str or os.PathLike or None, optional
        Folder holding ``adult.data`` and ``adult.test``, searched first (see
        :func:`~counterfair.datasets.find_data_file`).

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ADULT_COLUMNS` (``income``: 1 for ``>50K``, else 0) and ``split``
        (``"train"`` / ``"test"``); 45,222 rows for the published files.

    Raises
    ------
    FileNotFoundError
        If ``data_home`` does not exist or is a file (Adult has two files), or a file is in
        none of the searched folders.
    ValueError
        If ``income`` has a label other than ``>50K`` / ``<=50K``.
    """
    if data_home is not None and Path(data_home).expanduser().is_file():
        raise FileNotFoundError(
            f"data_home {data_home} is a file; give the folder holding adult.data and "
            "adult.test"
        )
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
