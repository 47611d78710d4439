"""Warnings of third-party packages that counterfair's users would otherwise see first.

Imported before anything else by :mod:`counterfair`. arviz announces its coming
refactor with a ``FutureWarning`` on import; it concerns arviz's own users, not
counterfair's, so it is hidden (pass ``-W default`` to see every warning).
"""

import warnings

warnings.filterwarnings(
    "ignore", message=r"\s*ArviZ is undergoing a major refactor", category=FutureWarning
)
# httpstan (PyStan's server) stores its state under string keys, which aiohttp >= 3.9
# warns about on every run; it is httpstan's to change, not the user's
warnings.filterwarnings(
    "ignore", message="It is recommended to use web.AppKey", category=UserWarning
)
