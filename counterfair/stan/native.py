"""The integrated-latent quadrature as a native library, for Python callers.

The fit programs of :mod:`counterfair.stan.integrated` compute each row's log marginal,
and draw each training row's latent exactly, in C++ (``quadrature.hpp``, compiled into
the program). Leave-one-out (:mod:`counterfair.inference.loo`), the fit's node check
(:mod:`counterfair.inference.quadrature_nodes`) and exact abduction of new rows
(:mod:`counterfair.inference.exact_abduction`) need the same computations outside a
Stan program, for many parameter sets: this module loads ``native.cpp`` (which includes
the same ``quadrature.hpp``) as a shared library and calls it through :mod:`ctypes`. One
implementation serves the fit, LOO, the node check and exact abduction.

Which library (:func:`library`):

1. **The installed one**, built when the package was installed (``setup.py``: the
   extension :data:`~counterfair.stan.native_source.MODULE`, in wheels too), found by the
   import system, when it was built from the sources beside this module: it holds their
   digest (:func:`~counterfair.stan.native_source.digest`). Loading a saved fit or
   learner, then predicting, auditing or abducting new rows, needs no compiler.
2. Else (an editable install whose ``native.cpp`` or ``quadrature.hpp`` changed since it
   was built, or a source tree never built) **one built at run time** with the system's
   C++ compiler (``$CXX``, else ``g++``: the one a CmdStan build needs) and the same
   flags (:data:`~counterfair.stan.native_source.COMPILE_FLAGS`), so the values agree to
   the bit. It is built once per machine and source: ``<cache>/native_<hash>.so``, where
   ``<cache>`` is ``$COUNTERFAIR_CACHE/native``, else ``$XDG_CACHE_HOME/counterfair/native``,
   else ``~/.cache/counterfair/native``; the hash covers both C++ files, the compiler and
   its flags. The build takes a few seconds (plain C++17: no Stan, no Eigen); concurrent
   processes each write a temporary file and rename it into place.
3. Else a :class:`~counterfair.errors.NativeBuildError` says which library is missing or
   stale, and to reinstall the package.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from counterfair import atomic, errors
from counterfair.stan import native_source
from counterfair.stan.families.base import (
    BERNOULLI_CODE,
    CATEGORICAL_CODE,
    CATEGORICAL_MORE,
    NEGATIVE_BINOMIAL_CODE,
    ORDINAL_CODE,
    POISSON_CODE,
    ROW_CODES,
)

SOURCE = Path(__file__).with_name("native.cpp")
CORE = Path(__file__).with_name("quadrature.hpp")

FLAGS = (*native_source.COMPILE_FLAGS, *native_source.LINK_FLAGS)
"""Compiler flags of the run-time build (CmdStan's optimisation level; no fast-math, so
values match the programs' and the installed library's)."""

REINSTALL = (
    "Reinstall counterfair, which builds it (pip install --force-reinstall counterfair; "
    "pip install -e . in a source checkout), or install a C++ compiler (or set CXX)"
)

ERROR_SIZE = 512


def cache_dir() -> Path:
    """Folder of the built library."""
    explicit = os.environ.get("COUNTERFAIR_CACHE")
    if explicit:
        return Path(explicit) / "native"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "counterfair" / "native"


def compiler() -> str:
    """The C++ compiler: ``$CXX``, else ``g++``, else ``c++``, else ``clang++``.

    Raises
    ------
    NativeBuildError
        When none is found.
    """
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return str(shutil.which(name))
    raise errors.NativeBuildError(
        "no C++ compiler found (set CXX, or install g++): counterfair's quadrature library "
        "needs one, as CmdStan does"
    )


def _version(cxx: str) -> str:
    try:
        run = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return run.stdout.splitlines()[0] if run.stdout else ""


def source_digest() -> str:
    """The digest of the sources beside this module (what a current library holds)."""
    return native_source.digest(SOURCE.parent)


def installed_library() -> Path | None:
    """The library built when the package was installed (None when there is none).

    Found by the import system (:func:`importlib.util.find_spec`), wherever the install
    put it: beside this module for wheels, and for editable installs, which build it in
    place.
    """
    spec = importlib.util.find_spec(native_source.MODULE)
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    return Path(spec.origin)


def library_digest(path: Path) -> str | None:
    """The source digest compiled into the library at ``path`` (None when it holds none,
    or cannot be loaded)."""
    try:
        function = ctypes.CDLL(str(path)).cf_native_digest
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_char_p
    function.argtypes = []
    value = function()
    return value.decode() if value else None


def choose(installed: Path | None) -> Path:
    """The library to load, given the installed one (None: none is installed).

    The installed library when it was built from the current sources; else one built into
    the cache (:func:`build`).

    Raises
    ------
    NativeBuildError
        When the installed library is missing or stale and no compiler builds one; it
        says which, and to reinstall.
    """
    if installed is not None and library_digest(installed) == source_digest():
        return installed
    if installed is None:
        why = "counterfair was installed without its quadrature library"
    else:
        why = (
            f"counterfair's installed quadrature library ({installed}) was built from other "
            "sources than the native.cpp and quadrature.hpp beside it (an editable install "
            "whose C++ changed since it was built)"
        )
    try:
        compiler()
    except errors.NativeBuildError:
        raise errors.NativeBuildError(
            f"{why}, and no C++ compiler is found to build one at run time (neither $CXX "
            f"nor g++, c++ or clang++ on PATH). {REINSTALL}"
        ) from None
    try:
        return build()
    except errors.NativeBuildError as error:
        raise errors.NativeBuildError(f"{why}; {error}\n{REINSTALL}") from error


def library() -> Path:
    """The library to load: :func:`choose` given :func:`installed_library`."""
    return choose(installed_library())


def library_path() -> Path:
    """Where the library for the current sources and compiler is (or will be) cached."""
    cxx = compiler()
    digest = hashlib.sha256()
    for part in (SOURCE.read_bytes(), CORE.read_bytes(), cxx.encode(), _version(cxx).encode()):
        digest.update(part)
    digest.update(" ".join(FLAGS).encode())
    return cache_dir() / f"native_{digest.hexdigest()[:16]}.so"


def build() -> Path:
    """The library's path, compiled first when it is not cached.

    Raises
    ------
    NativeBuildError
        When the compiler fails (its message is kept).
    """
    path = library_path()
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)

    def build(tmp: Path) -> None:
        command = [
            compiler(), *FLAGS, f'-D{native_source.MACRO}="{source_digest()}"',
            f"-I{SOURCE.parent}", "-o", str(tmp), str(SOURCE),
        ]
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode != 0:
            raise errors.NativeBuildError(
                f"building counterfair's quadrature library failed ({' '.join(command)}):\n"
                + run.stderr[-4000:]
            )

    return atomic.write(path, build, suffix=".so", mode=atomic.default_mode(directory=True))


_SIZE = ctypes.c_size_t
_INT_P = np.ctypeslib.ndpointer(dtype=np.intc, flags="C_CONTIGUOUS")
_DOUBLE_P = np.ctypeslib.ndpointer(dtype=np.float64, flags="C_CONTIGUOUS")
_KEY_P = np.ctypeslib.ndpointer(dtype=np.uint64, flags="C_CONTIGUOUS")
_ROWS: list[Any] = [  # S, N, C, n_cuts, y, eta, load, per row, family, phi, cuts, start, len
    _SIZE, _SIZE, _SIZE, _SIZE, _INT_P, _DOUBLE_P, _DOUBLE_P, ctypes.c_int,
    _INT_P, _DOUBLE_P, _DOUBLE_P, _INT_P, _INT_P,
]


@cache
def _library() -> ctypes.CDLL:
    return load(library())


@cache
def load(path: Path) -> ctypes.CDLL:
    """The library at ``path``, its functions typed."""
    lib = ctypes.CDLL(str(path))
    lib.cf_log_marginal_rows.restype = ctypes.c_int
    lib.cf_log_marginal_rows.argtypes = [
        *_ROWS,
        _SIZE, _DOUBLE_P, _DOUBLE_P, ctypes.c_int, ctypes.c_int,  # J, x, log w, steps, threads
        _DOUBLE_P, ctypes.c_char_p, _SIZE,  # out, error, its size
    ]
    lib.cf_draw_rows.restype = ctypes.c_int
    lib.cf_draw_rows.argtypes = [
        *_ROWS,
        ctypes.c_int, _SIZE, _KEY_P, ctypes.c_int,  # steps, D, keys, threads
        _DOUBLE_P, ctypes.c_char_p, _SIZE,  # out, error, its size
    ]
    return lib


def _rows_arguments(
    y: np.ndarray,
    eta: np.ndarray,
    load: np.ndarray,
    family: np.ndarray,
    phi: np.ndarray,
    cuts: np.ndarray,
    cut_len: np.ndarray,
) -> tuple[tuple[int, int, int], list[Any]]:
    """``(S, N, C)`` and the rows' arguments in the library's layout, shapes checked."""
    eta = np.asarray(eta, dtype=np.float64)
    if eta.ndim != 3:
        raise ValueError(f"eta must have shape (S, N, C), got {eta.shape}")
    S, N, C = eta.shape
    y_arr = np.asarray(y)
    load_arr = np.asarray(load, dtype=np.float64)
    per_row = load_arr.ndim == 3
    shapes = {
        "y": (y_arr.shape, (N, C)),
        "load": (load_arr.shape, (S, N, C) if per_row else (S, C)),
        "family": (np.shape(family), (C,)),
        "phi": (np.shape(phi), (S, C)),
        "cut_len": (np.shape(cut_len), (C,)),
    }
    for name, (got, want) in shapes.items():
        if tuple(got) != want:
            raise ValueError(f"{name} must have shape {want}, got {tuple(got)}")
    lengths = np.asarray(cut_len, dtype=np.intc)
    cuts_arr = np.asarray(cuts, dtype=np.float64)
    if cuts_arr.ndim != 2 or cuts_arr.shape != (S, int(lengths.sum())):
        raise ValueError(
            f"cuts must have shape ({S}, {int(lengths.sum())}), got {cuts_arr.shape}"
        )
    _check_values(y_arr, np.asarray(family), lengths)
    starts = (np.concatenate([[0], np.cumsum(lengths)[:-1]]) + 1).astype(np.intc)
    arguments = [
        S, N, C, cuts_arr.shape[1],
        np.ascontiguousarray(y_arr.T, dtype=np.intc),
        np.ascontiguousarray(eta.transpose(0, 2, 1)),
        np.ascontiguousarray(load_arr.transpose(0, 2, 1) if per_row else load_arr),
        int(per_row),
        np.ascontiguousarray(family, dtype=np.intc),
        np.ascontiguousarray(phi, dtype=np.float64),
        np.ascontiguousarray(cuts_arr if cuts_arr.size else np.zeros((S, 1))),
        np.ascontiguousarray(starts),
        lengths,
    ]
    return (S, N, C), arguments


FAMILY_CODES = ROW_CODES
"""Poisson, negative binomial, Bernoulli, ordinal, categorical (first column, others):
the codes of :mod:`counterfair.stan.families.base`."""


def _check_values(y: np.ndarray, family: np.ndarray, cut_len: np.ndarray) -> None:
    """Each column's values are what its family takes (the C++ reads them unchecked)."""
    if not np.issubdtype(y.dtype, np.integer) and not np.all(y == np.round(y)):
        raise ValueError("y must hold whole numbers (Stan's coding of each column)")
    y = np.asarray(y, dtype=np.int64)
    width = np.zeros(len(family), dtype=np.int64)  # a categorical child's columns
    for c, code in enumerate(family):
        if code not in FAMILY_CODES:
            raise ValueError(f"column {c}: unknown family code {code}; known: {FAMILY_CODES}")
        if code == CATEGORICAL_MORE and (
            c == 0 or family[c - 1] not in (CATEGORICAL_CODE, CATEGORICAL_MORE)
        ):
            raise ValueError(
                f"column {c}: family code {CATEGORICAL_MORE} must follow a categorical "
                f"column ({CATEGORICAL_CODE})"
            )
        if code == CATEGORICAL_CODE:
            end = c + 1
            while end < len(family) and family[end] == CATEGORICAL_MORE:
                end += 1
            width[c:end] = end - c
    allowed = {
        POISSON_CODE: (0, None), NEGATIVE_BINOMIAL_CODE: (0, None), BERNOULLI_CODE: (0, 1),
    }
    for c, code in enumerate(family):
        low, high = allowed.get(int(code), (1, None))
        if code == ORDINAL_CODE:
            high = int(cut_len[c]) + 1
        elif code in (CATEGORICAL_CODE, CATEGORICAL_MORE):
            high = int(width[c]) + 1
        column = y[:, c]
        bad = (column < low) | (column > high if high is not None else False)
        if np.any(bad):
            row = int(np.flatnonzero(bad)[0])
            span = f"{low} .. {high}" if high is not None else f"at least {low}"
            raise ValueError(
                f"column {c} (family code {code}): row {row} has {column[row]}, outside {span}"
            )


def _threads(threads: int | None) -> int:
    return int(threads) if threads is not None else (os.cpu_count() or 1)


def _check(status: int, error: Any) -> None:
    if status != 0:
        raise ValueError(f"counterfair's quadrature library: {error.value.decode()}")


def log_marginal_rows(
    *,
    y: np.ndarray,
    eta: np.ndarray,
    load: np.ndarray,
    family: np.ndarray,
    phi: np.ndarray,
    cuts: np.ndarray,
    cut_len: np.ndarray,
    nodes: int,
    newton: int,
    threads: int | None = None,
) -> np.ndarray:
    """Each row's log marginal ``log int prod_c p_c(y_c | eta_c + load_c z) N(z | 0, 1) dz``.

    The computation of the fit programs' ``cf_integrated_rows`` (every constant included),
    for ``S`` parameter sets at once.

    Parameters
    ----------
    y : array of int, shape (N, C)
        Each column's observed value in Stan's coding (counts; 0/1; levels from 1).
    eta : array, shape (S, N, C)
        Each column's linear predictor without the latent.
    load : array, shape (S, C) or (S, N, C)
        The latent's coefficient per column (per row too, when it differs by row).
    family : array of int, shape (C,)
        Codes of :attr:`~counterfair.stan.families.base.StanFamily.quadrature_code`.
    phi : array, shape (S, C)
        Negative binomial dispersions (any positive value for other columns).
    cuts : array, shape (S, K)
        Every ordinal column's cutpoints, one after another.
    cut_len : array of int, shape (C,)
        Cutpoints per column (0 but for ordinal columns), in the order of ``cuts``.
    nodes, newton : int
        Gauss-Hermite nodes and Newton steps per row.
    threads : int, optional
        Threads (default: the machine's cores); the values do not depend on it.

    Raises
    ------
    ValueError
        For arrays whose shapes do not agree, naming them.
    """
    (S, N, _), arguments = _rows_arguments(y, eta, load, family, phi, cuts, cut_len)
    if nodes < 1 or newton < 0:
        raise ValueError(f"nodes must be positive and newton non-negative, got {nodes}, {newton}")
    x, w = np.polynomial.hermite.hermgauss(nodes)
    out = np.empty((S, N))
    if out.size == 0:
        return out
    error = ctypes.create_string_buffer(ERROR_SIZE)
    status = _library().cf_log_marginal_rows(
        *arguments,
        nodes, np.ascontiguousarray(x), np.ascontiguousarray(np.log(w)), int(newton),
        _threads(threads), out, error, ERROR_SIZE,
    )
    _check(status, error)
    return out


def draw_rows(
    *,
    y: np.ndarray,
    eta: np.ndarray,
    load: np.ndarray,
    family: np.ndarray,
    phi: np.ndarray,
    cuts: np.ndarray,
    cut_len: np.ndarray,
    keys: np.ndarray,
    newton: int,
    threads: int | None = None,
) -> np.ndarray:
    """Exact draws of each row's ``z`` from its posterior, shape ``(D, S, N)``.

    The draw of the fit programs' ``cf_integrated_rng`` (rejection under the tangent hull
    of the log-concave density), with draw ``(d, s, i)`` taken from splitmix64's stream
    of ``keys[d, s, i]`` instead of Stan's generator: the same keys give the same draws
    whatever the threads or the rows drawn with them. NaN where a row's density is not
    finite. Arguments as :func:`log_marginal_rows`, and ``keys`` (uint64, ``(D, S, N)``).
    """
    (S, N, _), arguments = _rows_arguments(y, eta, load, family, phi, cuts, cut_len)
    keys_arr = np.ascontiguousarray(keys, dtype=np.uint64)
    if keys_arr.ndim != 3 or keys_arr.shape[1:] != (S, N):
        raise ValueError(f"keys must have shape (D, {S}, {N}), got {keys_arr.shape}")
    out = np.empty(keys_arr.shape)
    if out.size == 0:
        return out
    error = ctypes.create_string_buffer(ERROR_SIZE)
    status = _library().cf_draw_rows(
        *arguments, int(newton), keys_arr.shape[0], keys_arr, _threads(threads), out, error,
        ERROR_SIZE,
    )
    _check(status, error)
    return out
