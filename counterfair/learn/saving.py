"""``save`` for the learners: the one place where the learn stage reaches the io stage.

:class:`Savable` gives :class:`~counterfair.learn.fair.FairLearner` and
:class:`~counterfair.learn.baselines.BaselinePredictor` their ``save`` method, a
delegate to :func:`counterfair.io.learner_folder.save_learner` (the stage above).
It is one of the named exceptions of the import contract (``pyproject.toml``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast


class Savable:
    """Mixin: ``learner.save(path)`` writes the fitted learner to a folder without pickle."""

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Save the fitted predictor to a folder without pickle (read by :func:`counterfair.load`).

        See :mod:`counterfair.io.learner_folder`. ``overwrite`` replaces a non-empty
        ``path`` (refused otherwise). Returns the folder written.
        """
        from counterfair.io.learner_folder import save_learner  # a delegate

        return save_learner(cast(Any, self), path, overwrite=overwrite)
