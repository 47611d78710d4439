"""Dask rows find their handlers in a fresh process: the dispatcher loads the plug-in.

``import counterfair`` imports no dask. The first public call that receives a Dask
collection, alone or among several inputs (the group audits take ``y_true``,
``y_pred`` and ``protected``), imports :mod:`counterfair.dask`, which registers its
handlers.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("dask.dataframe")

CODE = """
import sys
import dask.dataframe as dd
import pandas as pd
from counterfair.rows import dispatch
series = dd.from_pandas(pd.Series([1.0, 0.0, 1.0]), npartitions=1)
assert "counterfair.dask" not in sys.modules
assert dispatch.handler_for("{operation}", {rows}) is not None
assert "counterfair.dask" in sys.modules
"""


@pytest.mark.parametrize(
    ("operation", "rows"),
    [
        ("FairLearner.predict", "series.to_frame()"),
        ("GroupAudit.metrics", "(series, series, series)"),
        ("GroupAudit.metrics", "(pd.Series([1.0]), series, series)"),
    ],
)
def test_the_plugin_loads_on_the_first_dask_input(operation: str, rows: str) -> None:
    code = CODE.format(operation=operation, rows=rows)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
