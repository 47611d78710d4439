"""The study data sets, read from a folder the user names: law school (Kusner et al. 2017),
UCI Adult, ProPublica COMPAS and the Boston HMDA mortgage data; and the law school study's
ready-made SCMs.

One module per data set (``law_school``, ``adult``, ``compas``, ``hmda``), all finding their files
through the one data-folder search of ``_files`` (:func:`find_data_file`)."""

from counterfair.datasets._files import (
    DATA_ENV_VAR,
    check_data_home,
    default_data_home,
    find_data_file,
)
from counterfair.datasets.adult import ADULT_COLUMNS, ADULT_URL, load_adult
from counterfair.datasets.compas import COMPAS_COLUMNS, COMPAS_FILENAME, COMPAS_URL, load_compas
from counterfair.datasets.hmda import HMDA_COLUMNS, HMDA_FILENAME, load_hmda
from counterfair.datasets.law_school import (
    LAW_SCHOOL_COLUMNS,
    LAW_SCHOOL_FILENAME,
    RACE_LEVELS,
    SEX_LEVELS,
    find_law_school_file,
    law_school_split,
    law_school_subsample,
    load_law_school,
)
from counterfair.datasets.law_school_models import law_school_level2, law_school_level3, raw_lsat

__all__ = [
    "ADULT_COLUMNS",
    "ADULT_URL",
    "COMPAS_COLUMNS",
    "COMPAS_FILENAME",
    "COMPAS_URL",
    "DATA_ENV_VAR",
    "HMDA_COLUMNS",
    "HMDA_FILENAME",
    "LAW_SCHOOL_COLUMNS",
    "LAW_SCHOOL_FILENAME",
    "RACE_LEVELS",
    "SEX_LEVELS",
    "check_data_home",
    "default_data_home",
    "find_data_file",
    "find_law_school_file",
    "law_school_level2",
    "law_school_level3",
    "law_school_split",
    "law_school_subsample",
    "load_adult",
    "load_compas",
    "load_hmda",
    "load_law_school",
    "raw_lsat",
]
