"""Builds counterfair's native quadrature library when the package is installed.

The metadata is in pyproject.toml; this file only declares the compiled part: the
shared library ``counterfair.stan._native`` from ``counterfair/stan/native.cpp`` (which
includes ``quadrature.hpp``), loaded at run time by ``counterfair/stan/native.py``
through ctypes. Built here, a wheel or an installed package predicts, audits and
abducts new rows on a machine without a C++ compiler. The sources' digest is compiled
in, so that an editable install whose sources changed since is noticed (and rebuilt at
run time, or reported).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
STAN = HERE / "counterfair" / "stan"

# the build's description, shared with counterfair/stan/native.py (standard library only:
# loaded by path, before the package's dependencies are installed)
_spec = importlib.util.spec_from_file_location("_counterfair_native_source",
                                               STAN / "native_source.py")
assert _spec is not None and _spec.loader is not None
source = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(source)


class BuildNative(build_ext):
    """build_ext with the run-time build's flags (GCC and Clang), or MSVC's equivalents."""

    def build_extensions(self) -> None:
        msvc = self.compiler.compiler_type == "msvc"
        for extension in self.extensions:
            if msvc:
                extension.extra_compile_args = ["/O2", "/std:c++17", "/fp:precise", "/EHsc"]
                extension.extra_link_args = []
            else:
                extension.extra_compile_args = list(source.COMPILE_FLAGS)
                extension.extra_link_args = ["-pthread"]
        super().build_extensions()

    def get_export_symbols(self, ext: Extension) -> list[str]:
        # a ctypes library, not a Python module: it defines no PyInit__native, and exports
        # its C functions (the list matters to MSVC only; GCC and Clang export every one)
        return list(source.EXPORTS)


native = Extension(
    source.MODULE,
    sources=["counterfair/stan/native.cpp"],
    include_dirs=["counterfair/stan"],
    depends=[f"counterfair/stan/{name}" for name in source.SOURCES],
    define_macros=[(source.MACRO, f'"{source.digest(STAN)}"')],
    language="c++",
)

setup(ext_modules=[native], cmdclass={"build_ext": BuildNative})
