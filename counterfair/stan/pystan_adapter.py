"""PyStan 3 adapter of :class:`~counterfair.stan.interface.StanBackend`.

PyStan needs nothing but ``pip install`` on Linux and macOS. Two of its habits are
handled here so that users never meet them:

* it calls :func:`asyncio.run`, which fails inside a running event loop (Jupyter);
  every call is then made from a worker thread, which has no loop of its own;
* httpstan names a compiled model after the program text *and the interpreter path*,
  so the console script and ``python -m pytest`` compiled the same program twice;
  while a model is built, the path is replaced by the environment's own ``python``
  (``sys.prefix``), so every interpreter path of one environment shares a binary while
  two environments still get their own (the binary links to its environment's httpstan);
* httpstan gives ``stanc`` one second to translate a program, which a loaded machine
  sometimes exceeds (the request then fails with an unreadable JSON error); while a
  model is built, ``stanc`` runs the same way with :data:`STANC_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import arviz as az

from counterfair.model.nodes import plain
from counterfair.stan.interface import PYSTAN_ARGS, SamplerRun, translate_sampler_args

T = TypeVar("T")


def outside_event_loop(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``function``, from a worker thread when this thread runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function(*args, **kwargs)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="counterfair-pystan") as pool:
        return pool.submit(function, *args, **kwargs).result()


def environment_interpreter() -> str:
    """The interpreter path that stands for this Python environment (``sys.prefix``)."""
    for relative in (("bin", "python"), ("python.exe",), ("Scripts", "python.exe")):
        candidate = os.path.join(sys.prefix, *relative)
        if os.path.exists(candidate):
            return candidate
    return sys.executable


@contextlib.contextmanager
def environment_interpreter_path() -> Iterator[None]:
    """Let httpstan hash the environment's interpreter, not the path this one was started by."""
    original = sys.executable
    sys.executable = environment_interpreter()
    try:
        yield
    finally:
        sys.executable = original


STANC_SECONDS = 120.0
"""How long ``stanc`` may take to translate a program to C++ during a PyStan build."""


def _stanc(program_code: str, stan_model_name: str) -> tuple[str, str]:
    """httpstan's ``compile`` (C++ text and ``stanc``'s warnings) with :data:`STANC_SECONDS`."""
    import importlib.resources

    with (
        importlib.resources.as_file(importlib.resources.files("httpstan") / "stanc") as stanc,
        tempfile.TemporaryDirectory(prefix="counterfair_stanc_") as folder,
    ):
        path = os.path.join(folder, f"{stan_model_name}.stan")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(program_code)
        arguments = [str(stanc), "--name", stan_model_name, "--warn-pedantic", "--print-cpp", path]
        completed = subprocess.run(arguments, capture_output=True, timeout=STANC_SECONDS)
    warnings = completed.stderr.decode().strip()
    if completed.returncode != 0:
        raise ValueError(warnings)  # httpstan turns this into its own syntax-error reply
    return completed.stdout.decode().strip(), warnings


@contextlib.contextmanager
def patient_stanc() -> Iterator[None]:
    """Let httpstan's build run ``stanc`` for up to :data:`STANC_SECONDS`, not one second."""
    import httpstan.compile

    original = httpstan.compile.compile
    httpstan.compile.compile = _stanc
    try:
        yield
    finally:
        httpstan.compile.compile = original


@contextlib.contextmanager
def _file_descriptors_silenced() -> Iterator[None]:
    """Point file descriptors 1 and 2 at the null device for the block.

    The C++ compiler httpstan starts writes its warnings straight to the
    process's descriptors, past ``sys.stdout`` / ``sys.stderr``. Where the
    descriptors cannot be duplicated (an unusual embedding), nothing changes.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


STAN_NOTES_START = ("Messages received during sampling", "Messages from")
"""How PyStan opens its blocks of Stan's informational notes (gradient timings, adaptation
windows, stanc's pedantic remarks): with progress shown, those blocks are dropped."""

PROGRESS_MARKERS = ("Building", "Sampling")
"""PyStan's progress lines: they end a dropped block of notes."""


class _ProgressOnly(io.TextIOBase):
    """Stands in for ``sys.stderr`` while PyStan builds and samples with progress shown.

    PyStan writes its "Building" and "Sampling" progress and blocks of Stan's
    informational notes to standard error; the progress passes through (with the
    real stream's ``fileno``, so a terminal still gets the in-place updates) and
    each block of notes, from :data:`STAN_NOTES_START` to the next progress
    line, is dropped.
    """

    def __init__(self, target: Any) -> None:
        self.target = target
        self.passing = True

    def write(self, text: str) -> int:
        if any(marker in text for marker in STAN_NOTES_START):
            self.passing = False
        elif any(marker in text for marker in PROGRESS_MARKERS):
            self.passing = True
        if self.passing:
            self.target.write(text)
        return len(text)

    def flush(self) -> None:
        self.target.flush()

    def fileno(self) -> int:
        return int(self.target.fileno())

    def isatty(self) -> bool:
        return bool(self.target.isatty())


@contextlib.contextmanager
def _progress_only() -> Iterator[None]:
    """PyStan's progress lines on standard error, without Stan's informational notes."""
    with contextlib.redirect_stderr(_ProgressOnly(sys.stderr)):
        yield


@contextlib.contextmanager
def _silenced(quiet: bool) -> Iterator[None]:
    """Swallow what PyStan prints (build and sampling progress, Stan's informational
    messages, the C++ compiler's warnings) when ``quiet``; errors still raise, and
    diagnostics come from the fit."""
    if not quiet:
        yield
        return
    # real files, not StringIO: httpstan's build leaves its own capture file unclosed (a
    # ResourceWarning) when sys.stderr has no file descriptor
    with (
        tempfile.TemporaryFile(mode="w+") as out,
        tempfile.TemporaryFile(mode="w+") as err,
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        _file_descriptors_silenced(),
    ):
        yield


def _build(code: str, data: Mapping[str, Any], seed: int | None) -> Any:
    import stan

    with environment_interpreter_path(), patient_stanc():
        return stan.build(code, data=dict(data), random_seed=seed)


def _is_cached(code: str) -> bool:
    import httpstan.cache
    import httpstan.models

    with environment_interpreter_path():
        name = httpstan.models.calculate_model_name(code)
    try:
        httpstan.cache.load_services_extension_module_compiler_output(name)
    except (KeyError, OSError):
        return False
    return True


class PyStanBackend:
    """Adapter for PyStan 3 (httpstan compiles and caches each program by its text)."""

    name = "pystan"

    def compile(self, code: str) -> float:
        """Build ``code`` (no data) unless httpstan has it cached; return the seconds spent."""
        if outside_event_loop(_is_cached, code):
            return 0.0
        start = time.perf_counter()
        try:
            with _silenced(True):
                outside_event_loop(_build, code, {}, None)
        except RuntimeError:
            # stan.build compiles, then asks the model for its parameter names, which a
            # program with data cannot answer without data; the binary is cached by then
            if not outside_event_loop(_is_cached, code):
                raise
        return time.perf_counter() - start

    def sample(
        self,
        code: str,
        data: Mapping[str, Any],
        *,
        chains: int,
        warmup: int,
        draws: int,
        seed: int | None,
        progress: bool,
        coords: Mapping[str, Sequence[Any]] | None = None,
        dims: Mapping[str, list[str]] | None = None,
        **sampler_args: Any,
    ) -> SamplerRun:
        """Build (cached by httpstan) and sample with NUTS; chains run in parallel."""
        args = translate_sampler_args(sampler_args, PYSTAN_ARGS)

        def run() -> SamplerRun:
            start = time.perf_counter()
            cached = _is_cached(code)
            # quiet: nothing at all; progress: "Building" and "Sampling", not Stan's notes
            with _progress_only() if progress else _silenced(True):
                model = _build(code, data, seed)
                compiled = 0.0 if cached else time.perf_counter() - start
                fit = model.sample(
                    num_chains=chains, num_warmup=warmup, num_samples=draws, **args
                )
            idata = az.from_pystan(
                posterior=fit,
                posterior_model=model,
                coords=dict(coords or {}),
                dims=dict(dims or {}),
            )
            return SamplerRun(
                idata=idata,
                seconds=time.perf_counter() - start,
                backend=self.name,
                compile_seconds=compiled,
            )

        return outside_event_loop(run)

    def log_density(
        self,
        code: str,
        data: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        jacobian: bool = True,
    ) -> float:
        """Log density at constrained ``params`` (Jacobian of the constraints if asked)."""

        def run() -> float:
            with _silenced(True):
                model = _build(code, data, None)
            values = {k: plain(v) for k, v in params.items()}
            unconstrained = model.unconstrain_pars(values)
            return float(model.log_prob(unconstrained, adjust_transform=jacobian))

        return outside_event_loop(run)


