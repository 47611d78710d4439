"""What the studies' scripts share: the data folder, the output folder, and how they run.

The studies live here, outside the package (the wheel does not carry them); each is run
from the repository, as a script (``python experiments/<study>.py``) or a module
(``python -m experiments.<study>``), through :func:`run_script`, which gives it what the
``counterfair`` command gives its commands.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from counterfair.datasets import check_data_home

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")


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


def run_script(
    main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None
) -> int:
    """Run a study's ``main(argv)`` as the ``counterfair`` command runs its commands.

    counterfair's messages go to standard error at the level of ``COUNTERFAIR_LOG``;
    every warning is shown once, as a ``[counterfair]`` line; a refusal the study stops
    with (``SystemExit("message")``: a missing data folder, an output folder that is not
    empty) prints its one line and returns 2. Unexpected errors propagate.
    """
    from counterfair.cli.run import one_line
    from counterfair.logs import console, warnings_as_lines

    try:
        console()
    except ValueError as error:
        print(f"counterfair: {error}", file=sys.stderr)
        return 2
    with warnings_as_lines():
        try:
            return int(main(argv))
        except SystemExit as stop:
            if isinstance(stop.code, str):
                print(one_line(stop.code), file=sys.stderr)
                return 2
            raise
