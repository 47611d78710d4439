"""Command-line arguments shared by the studies: the data folder and the output folder.

The ``counterfair`` command and each study's own ``main`` (run as a script) read
``--data-dir`` and ``--out`` the same way; both import them from here, so the studies
never import the command line.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

from counterfair.datasets import check_data_home

logger = logging.getLogger(__name__)


def check_data_dir(data_dir: str | None) -> None:
    """A ``--data-dir`` that does not exist is an error, never silently ignored."""
    try:
        check_data_home(data_dir)
    except FileNotFoundError as exc:
        raise SystemExit(f"counterfair: --data-dir: {exc}") from exc


def output_folder(out: str | None, *, quick: bool, study: str) -> Path:
    """``--out`` if given; else a fresh temporary folder for quick runs, the results folder else."""
    if out is not None:
        return Path(out)
    if quick:
        folder = Path(tempfile.mkdtemp(prefix=f"counterfair-{study}-quick-"))
        logger.info("--quick without --out: writing to the fresh folder %s", folder)
        return folder
    return Path("results") / study.replace("-", "_")
