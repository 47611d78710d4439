"""The study data sets, read from a folder the user names: law school (Kusner et al. 2017),
UCI Adult and ProPublica COMPAS; and the law school study's ready-made SCMs."""

from counterfair.datasets.law_school import (
    DATA_ENV_VAR,
    LAW_SCHOOL_COLUMNS,
    LAW_SCHOOL_FILENAME,
    RACE_LEVELS,
    SEX_LEVELS,
    check_data_home,
    default_data_home,
    find_law_school_file,
    law_school_split,
    law_school_subsample,
    load_law_school,
)
from counterfair.datasets.tabular import load_adult, load_compas

__all__ = [
    "DATA_ENV_VAR",
    "LAW_SCHOOL_COLUMNS",
    "LAW_SCHOOL_FILENAME",
    "RACE_LEVELS",
    "SEX_LEVELS",
    "check_data_home",
    "default_data_home",
    "find_law_school_file",
    "law_school_split",
    "law_school_subsample",
    "load_adult",
    "load_compas",
    "load_law_school",
]
