"""Compile Stan programs ahead of time, so that a first fit does not pay for it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from counterfair.stan.backend import get_backend


def shipped_programs() -> dict[str, str]:
    """The Stan programs of the ready-made models in :mod:`counterfair.models`, by name."""
    from counterfair import models

    level2, level3 = models.law_school_level2(), models.law_school_level3()
    return {
        "law_school_level2": level2.stan_code(),
        "law_school_level2_abduction": level2.abduction_code(),
        "law_school_level3": level3.stan_code(),
    }


def compile_programs(
    programs: Mapping[str, str],
    *,
    backend: str = "auto",
    jobs: int = 2,
    report: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """Compile every program with ``backend`` unless cached; seconds spent per program.

    Parameters
    ----------
    programs : mapping of str to str
        Stan programs by a name used in the report.
    backend : {"auto", "pystan", "cmdstanpy"}
        The back end whose cache receives the binaries.
    jobs : int
        Programs compiled at once (CmdStan only; PyStan builds one at a time).
    report : callable, optional
        Called with one line per finished program (e.g. ``print``).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    adapter = get_backend(backend)
    workers = jobs if adapter.name == "cmdstanpy" else 1

    def one(name: str) -> tuple[str, float]:
        start = time.perf_counter()
        spent = adapter.compile(programs[name])
        if report is not None:
            verb = f"compiled in {time.perf_counter() - start:.1f} s" if spent else "cached"
            report(f"{adapter.name}: {name}: {verb}")
        return name, spent

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(pool.map(one, programs))
