"""The ``counterfair`` command line (:func:`main`)."""

from counterfair.cli.commands import main

__all__ = ["main"]
