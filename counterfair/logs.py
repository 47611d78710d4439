"""Messages and progress: ``logging`` for what counterfair says, tqdm for how far it is.

counterfair never prints. Its modules log to loggers under ``"counterfair"``; a library
user sees warnings (Python's last-resort handler) and nothing else unless they configure
logging. The command line and the study scripts call :func:`console`, which sends
counterfair's records to standard error, one line each (``[counterfair] ...``), at the
level named by ``verbose=`` or the ``COUNTERFAIR_LOG`` environment variable (``DEBUG``,
``INFO`` -- the default -- ``WARNING`` or ``ERROR``).

Progress bars (:func:`progress`, and the samplers' own bars through
:func:`progress_enabled`) appear only where a person watches: a terminal or a Jupyter
notebook, never a log file, a pipe or CI (``CI`` set), and not when the level is above
``INFO``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from types import FrameType
from typing import TypeVar

LOGGER_NAME = "counterfair"
"""The root of counterfair's loggers (modules log to ``counterfair.<module>``)."""
LOG_ENV = "COUNTERFAIR_LOG"
"""Environment variable naming the level of :func:`console` (default ``INFO``)."""
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

T = TypeVar("T")

_HANDLER_NAME = "counterfair-console"


def level_of(verbose: bool | int | str | None = None) -> int:
    """The logging level ``verbose`` stands for.

    ``None`` reads ``COUNTERFAIR_LOG`` (default ``INFO``); ``True`` is ``DEBUG``,
    ``False`` is ``WARNING``; an int is a logging level; a string one of :data:`LEVELS`.
    """
    if verbose is None:
        verbose = os.environ.get(LOG_ENV, "").strip() or "INFO"
    if isinstance(verbose, bool):
        return logging.DEBUG if verbose else logging.WARNING
    if isinstance(verbose, int):
        return verbose
    name = verbose.strip().upper()
    if name not in LEVELS:
        source = f"{LOG_ENV}={verbose!r}" if verbose == os.environ.get(LOG_ENV) else repr(verbose)
        raise ValueError(f"{source} is not a log level; use one of {list(LEVELS)}")
    return int(getattr(logging, name))


class _StandardError(logging.StreamHandler):
    """A handler that writes to whatever ``sys.stderr`` is at the time of each record."""

    @property
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, value: object) -> None:  # StreamHandler.__init__ assigns it
        pass


def console(verbose: bool | int | str | None = None) -> logging.Logger:
    """Send counterfair's log records to standard error, one line each; return its logger.

    Calling it again changes the level; it never adds a second handler.
    """
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level_of(verbose))
    if not any(h.get_name() == _HANDLER_NAME for h in logger.handlers):
        handler = _StandardError()
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(logging.Formatter("[counterfair] %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    return logger


def _in_notebook() -> bool:
    shell = sys.modules.get("IPython")
    if shell is None:
        return False
    ipython = getattr(shell, "get_ipython", lambda: None)()
    return ipython is not None and type(ipython).__name__ == "ZMQInteractiveShell"


def progress_enabled(requested: bool | None = None) -> bool:
    """Whether to draw a progress bar: ``requested`` when given, else as the module notes say."""
    if requested is not None:
        return requested
    if os.environ.get("CI"):
        return False
    if logging.getLogger(LOGGER_NAME).getEffectiveLevel() > logging.INFO:
        return False
    return _in_notebook() or sys.stderr.isatty()


def progress(
    items: Iterable[T], *, desc: str, total: int | None = None, enabled: bool | None = None
) -> Iterator[T]:
    """Iterate ``items`` under one tqdm bar when :func:`progress_enabled`, plainly otherwise."""
    if not progress_enabled(enabled):
        yield from items
        return
    from tqdm.auto import tqdm

    yield from tqdm(items, desc=desc, total=total, leave=False)


# ---------------------------------------------------------------------- the user's language
_DIALECT: ContextVar[str] = ContextVar("counterfair_dialect", default="python")


def in_words(python: str, scm_file: str) -> str:
    """A fix written in the user's language: ``python`` (the default), or ``scm_file``
    when the command line runs (:func:`speaking_scm_file`), whose users write SCM files."""
    return scm_file if _DIALECT.get() == "scm_file" else python


@contextlib.contextmanager
def speaking_scm_file() -> Iterator[None]:
    """Within the block, fixes are written as SCM-file keys (:func:`in_words`)."""
    token = _DIALECT.set("scm_file")
    try:
        yield
    finally:
        _DIALECT.reset(token)


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Within the block, each of counterfair's warnings is one ``[counterfair]`` log line,
    and a warning said once is not said again (the command line: every warning once per
    command). Other packages' warnings are shown as Python shows them."""
    seen: set[tuple[str, str]] = set()
    logger = logging.getLogger(LOGGER_NAME)
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # repeats of counterfair's are dropped below
        shown = warnings.showwarning

        def show(message: Warning | str, category: type[Warning], filename: str,
                 lineno: int, file: object = None, line: str | None = None) -> None:
            text = str(message)
            module = getattr(category, "__module__", "")
            ours = module.startswith(LOGGER_NAME) or filename.startswith(_PACKAGE_DIR)
            if not ours:
                shown(message, category, filename, lineno, file, line)  # type: ignore[arg-type]
                return
            if (category.__name__, text) in seen:
                return
            seen.add((category.__name__, text))
            logger.warning("%s", " ".join(text.split()))

        warnings.showwarning = show
        yield


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` of ``warnings.warn`` that points at the caller's own code.

    Counts the frames above the caller of this function that lie inside the counterfair
    package, so that a warning names the user's line (``scm.fit(...)``) however many
    stages the call went through (Python 3.12's ``skip_file_prefixes``, for 3.11).
    """
    frame: FrameType | None = sys._getframe(1)  # the function that calls warnings.warn
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level
