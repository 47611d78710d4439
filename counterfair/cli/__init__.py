"""The ``counterfair`` command line (:func:`main`).

The commands live in :mod:`counterfair.cli.commands`, imported when :func:`main` is first
called: ``python -m counterfair.cli.commands`` then runs that module once, without
runpy's warning that the package had imported it already.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit code (:func:`counterfair.cli.commands.main`)."""
    from counterfair.cli.commands import main as run

    return run(argv)


__all__ = ["main"]
