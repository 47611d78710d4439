"""Seeds of the test suite, shifted as a whole to rerun it under other random draws.

Every seed a test passes (to a simulator, a sampler, an abduction or a numpy
generator) goes through :func:`shifted`. By default the shift is 0 and the suite runs
with the seeds written in it; ``COUNTERFAIR_TEST_SEED_SHIFT=101 python -m pytest``
reruns it with every seed moved by 101, which shows whether a tolerance holds for
other data and other draws or only for the ones it was written against.
"""

from __future__ import annotations

import os

SEED_SHIFT_ENV = "COUNTERFAIR_TEST_SEED_SHIFT"


def seed_shift() -> int:
    """The shift read from ``COUNTERFAIR_TEST_SEED_SHIFT`` (0 when unset)."""
    raw = os.environ.get(SEED_SHIFT_ENV, "0").strip() or "0"
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_SHIFT_ENV} must be an integer, got {raw!r}") from None


def shifted(seed: int) -> int:
    """``seed`` moved by the suite's seed shift."""
    return seed + seed_shift()
