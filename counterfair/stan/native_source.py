"""What the native quadrature library is built from, and with which flags.

Read by ``setup.py`` (which builds the library when the package is installed, as the
extension :data:`MODULE`) and by :mod:`counterfair.stan.native` (which checks that the
installed library was built from the sources beside it, and builds one into its cache
when not). ``setup.py`` loads this file by path, before the package and its
dependencies are installed: it uses the standard library only.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

MODULE = "counterfair.stan._native"
"""The installed library's module name: a shared library named as a Python extension so
that wheels and editable installs place it beside the package (it defines no
``PyInit__native``: it is loaded by :mod:`ctypes`, never imported)."""

SOURCES = ("native.cpp", "quadrature.hpp")
"""The files the library is compiled from, in ``counterfair/stan`` (``native.cpp``
includes ``quadrature.hpp``)."""

EXPORTS = ("cf_native_digest", "cf_log_marginal_rows", "cf_draw_rows")
"""The library's C functions (``extern "C"`` in ``native.cpp``)."""

MACRO = "COUNTERFAIR_NATIVE_DIGEST"
"""The macro holding :func:`digest` of the sources the library was compiled from; the
library returns it from ``cf_native_digest()``."""

COMPILE_FLAGS = ("-O3", "-std=c++17", "-pthread")
"""Compiler flags of both builds (CmdStan's optimisation level; no fast-math, so values
match the fit programs', and the installed and the run-time builds agree to the bit)."""

LINK_FLAGS = ("-shared", "-fPIC", "-pthread")
"""Flags of the run-time build's one compile-and-link step, beside :data:`COMPILE_FLAGS`."""


def digest(folder: Path) -> str:
    """sha256 (hex) of :data:`SOURCES` in ``folder``: each file's name, size and bytes."""
    sha = hashlib.sha256()
    for name in SOURCES:
        data = (Path(folder) / name).read_bytes()
        sha.update(f"{name}\0{len(data)}\0".encode())
        sha.update(data)
    return sha.hexdigest()
