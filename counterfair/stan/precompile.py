"""Compile Stan programs ahead of time, so that a first fit does not pay for it."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor, as_completed

from counterfair.stan.backend import get_backend


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
        Programs compiled at once (threads for CmdStan, processes for PyStan).
    report : callable, optional
        Called with one line per finished program (e.g. ``print``).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    adapter = get_backend(backend)
    # CmdStan compiles in a make subprocess, so threads overlap; PyStan builds inside the
    # calling process (httpstan), so its programs are built in separate processes.
    spawn = multiprocessing.get_context("spawn")
    pool: Executor = (
        ThreadPoolExecutor(max_workers=jobs)
        if adapter.name == "cmdstanpy" or jobs == 1
        else ProcessPoolExecutor(max_workers=jobs, mp_context=spawn, initializer=_silence_worker)
    )
    spent: dict[str, float] = {}
    with pool:
        started = time.perf_counter()
        # longest program first (by text, a fair proxy for compile time): the big ones
        # overlap with the small ones instead of running alone at the end
        ordered = sorted(programs.items(), key=lambda item: len(item[1]), reverse=True)
        futures = {pool.submit(_compile, adapter.name, code): name for name, code in ordered}
        for future in as_completed(futures):
            name = futures[future]
            spent[name] = future.result()
            if report is not None:
                verb = f"compiled in {spent[name]:.1f} s" if spent[name] else "cached"
                report(f"{adapter.name}: {name}: {verb} ({time.perf_counter() - started:.0f} s)")
    return spent


def _silence_worker() -> None:
    """Send a compile worker's output to /dev/null: the C++ compiler's warnings are long.

    A program that fails to compile here fails again, with the compiler's message, when a
    fit needs it.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)


def _compile(backend: str, code: str) -> float:
    """Compile one program with one back end (a top-level function: it may run elsewhere)."""
    return get_backend(backend).compile(code)
