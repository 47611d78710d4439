"""The native quadrature library: built at install, found, checked against its sources.

The installed library (``setup.py``'s extension ``counterfair.stan._native``) is found by
the import system and holds the digest of the sources beside it; a run-time build of the
same sources with the same flags gives the same numbers to the bit; a library built from
other sources (an editable install whose C++ changed since) is noticed, and replaced by a
run-time build, or reported when no compiler is found.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _seeds import shifted

from counterfair import errors
from counterfair.stan import native, native_source

NOT_BUILT = (
    "counterfair's native library is not built here: run pip install -e . in the checkout "
    "(it builds counterfair/stan/_native*.so in place)"
)


def _installed() -> Path:
    path = native.installed_library()
    if path is None:
        pytest.fail(NOT_BUILT)
    return path


def _needs_compiler() -> None:
    try:
        native.compiler()
    except errors.NativeBuildError:
        pytest.skip("no C++ compiler: the run-time build cannot be compared")


def test_the_installed_library_is_found_by_the_import_system_and_is_current() -> None:
    path = _installed()
    assert path.parent == Path(native.__file__).parent  # built in place, or in the wheel
    assert native.library_digest(path) == native.source_digest()
    assert native.library() == path
    assert len(native.source_digest()) == 64


def test_the_digest_covers_both_sources(tmp_path: Path) -> None:
    for name in native_source.SOURCES:
        shutil.copy(native.SOURCE.parent / name, tmp_path / name)
    assert native_source.digest(tmp_path) == native.source_digest()
    for name in native_source.SOURCES:
        (tmp_path / name).write_bytes((native.SOURCE.parent / name).read_bytes() + b"\n")
        assert native_source.digest(tmp_path) != native.source_digest(), name
        shutil.copy(native.SOURCE.parent / name, tmp_path / name)


def _rows(seed: int) -> dict[str, Any]:
    """Rows of every family code: Poisson, negative binomial, Bernoulli, ordinal (3
    cutpoints), categorical (3 levels: two columns)."""
    rng = np.random.default_rng(seed)
    S, N = 5, 40
    y = np.column_stack([
        rng.poisson(2.0, N), rng.poisson(3.0, N), rng.integers(0, 2, N),
        rng.integers(1, 5, N), rng.integers(1, 4, N), np.zeros(N, dtype=int),
    ])
    y[:, 5] = y[:, 4]
    cuts = np.sort(rng.normal(size=(S, 3)), axis=1)
    return {
        "y": y, "eta": rng.normal(scale=0.7, size=(S, N, 6)),
        "load": rng.normal(size=(S, 6)), "family": np.array([1, 2, 3, 4, 5, 6]),
        "phi": rng.gamma(3.0, size=(S, 6)), "cuts": cuts,
        "cut_len": np.array([0, 0, 0, 3, 0, 0]),
    }


def _with(monkeypatch: pytest.MonkeyPatch, path: Path, compute: Callable[[], Any]) -> Any:
    """``compute()`` with the module calling the library at ``path``."""
    library = native.load(path)
    monkeypatch.setattr(native, "_library", lambda: library)
    return compute()


def test_the_installed_and_run_time_builds_agree_to_the_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_compiler()
    installed = _installed()
    monkeypatch.setenv("COUNTERFAIR_CACHE", str(tmp_path))
    built = native.build()
    assert built != installed and built.parent == tmp_path / "native"
    assert native.library_digest(built) == native.source_digest()
    rows = _rows(shifted(17))
    keys = np.random.default_rng(shifted(18)).integers(
        0, 2**63, size=(4, 5, 40), dtype=np.uint64
    )

    def compute() -> tuple[np.ndarray, np.ndarray]:
        return (native.log_marginal_rows(**rows, nodes=9, newton=6, threads=2),
                native.draw_rows(**rows, keys=keys, newton=50, threads=2))

    marginal_a, draws_a = _with(monkeypatch, installed, compute)
    marginal_b, draws_b = _with(monkeypatch, built, compute)
    assert np.isfinite(marginal_a).all() and np.isfinite(draws_a).all()
    assert marginal_a.tobytes() == marginal_b.tobytes()
    assert draws_a.tobytes() == draws_b.tobytes()


def _stale(tmp_path: Path) -> Path:
    """The library built from the current sources with another digest: what an editable
    install holds after its C++ changed."""
    path = tmp_path / "stale" / "_native.so"
    path.parent.mkdir()
    command = [native.compiler(), *native.FLAGS, f'-D{native_source.MACRO}="{"0" * 64}"',
               f"-I{native.SOURCE.parent}", "-o", str(path), str(native.SOURCE)]
    subprocess.run(command, check=True, capture_output=True)
    return path


def test_a_stale_installed_library_is_noticed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _needs_compiler()
    stale = _stale(tmp_path)
    assert native.library_digest(stale) == "0" * 64
    assert native.choose(_installed()) == _installed()
    # with a compiler: built into the cache from the current sources instead
    monkeypatch.setenv("COUNTERFAIR_CACHE", str(tmp_path / "cache"))
    chosen = native.choose(stale)
    assert chosen.parent == tmp_path / "cache" / "native"
    assert native.library_digest(chosen) == native.source_digest()
    # without one: said, with what to do
    monkeypatch.setenv("COUNTERFAIR_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "no-compiler"))
    with pytest.raises(errors.NativeBuildError, match=r"was built from other sources.*"
                       r"no C\+\+ compiler is found.*pip install -e \."):
        native.choose(stale)
    with pytest.raises(errors.NativeBuildError, match="installed without its quadrature"):
        native.choose(None)
    assert not (tmp_path / "empty").exists()  # nothing half-built
