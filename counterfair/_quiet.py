"""Warnings of third-party packages that counterfair's users would otherwise see first.

Imported before anything else by :mod:`counterfair`. arviz announces its coming
refactor with a ``FutureWarning`` on import; it concerns arviz's own users, not
counterfair's, so it is hidden (pass ``-W default`` to see every warning).
"""

import warnings

warnings.filterwarnings(
    "ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning
)
