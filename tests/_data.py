"""The data folder of the suite, in one place.

``COUNTERFAIR_DATA`` names it (``tests/conftest.py`` makes a relative value absolute
before any test module is imported); without it, the ``shared/data`` folder beside the
repository, where CI keeps the law school, COMPAS and Adult files. The files are never in
the repository. :func:`needs_data` skips a test whose files are missing, naming them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA_DIR = Path(
    os.environ.get("COUNTERFAIR_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)
"""The folder the suite reads the real data sets from."""


def needs_data(*files: str) -> pytest.MarkDecorator:
    """Skip unless every one of ``files`` is in :data:`DATA_DIR`."""
    missing = [name for name in files if not (DATA_DIR / name).exists()]
    return pytest.mark.skipif(bool(missing), reason=f"{missing} not found in {DATA_DIR}")
