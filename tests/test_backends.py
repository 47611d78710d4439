"""The Stan back ends: choice, caching, reproducibility, agreement, event loops.

Every ``stan`` test here runs once per back end found (see ``conftest.py``); the
agreement test needs both and is skipped on a machine without CmdStan.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import time
from pathlib import Path

import httpstan.cache
import numpy as np
import pandas as pd
import pytest
from _models import law_level3_scm, law_train, quietly, stacked
from _seeds import shifted

from counterfair.stan import backend as stan_backend
from counterfair.stan.backend import BACKEND_ENV, get_backend, resolve_backend_name

# what differs between the back ends: every back end found
pytestmark = pytest.mark.every_backend

BOTH = {"pystan", "cmdstanpy"} <= set(stan_backend.available_backends())


def _small_level3_data() -> pd.DataFrame:
    return law_train().drop(columns=["K", "ZFYA"]).iloc[:100]


# ---------------------------------------------------------------------- choice
def test_auto_is_pystan_without_cmdstan(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from counterfair.stan import install

    monkeypatch.delenv(BACKEND_ENV, raising=False)
    monkeypatch.setenv("CMDSTAN", str(tmp_path))  # cmdstanpy finds no CmdStan there
    monkeypatch.setenv(install.INSTALL_ENV, "never")
    monkeypatch.setattr(install, "_attempt", None)
    assert resolve_backend_name("auto") == "pystan"
    assert get_backend("auto").name == "pystan"


def test_auto_prefers_cmdstan_when_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    monkeypatch.setattr(stan_backend, "cmdstan_available", lambda: True)
    assert resolve_backend_name("auto") == "cmdstanpy"


def test_environment_variable_chooses_the_auto_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stan_backend, "cmdstan_available", lambda: True)
    monkeypatch.setenv(BACKEND_ENV, "pystan")
    assert resolve_backend_name("auto") == "pystan"
    assert resolve_backend_name("cmdstanpy") == "cmdstanpy"  # an explicit name wins
    monkeypatch.setenv(BACKEND_ENV, "stanx")
    with pytest.raises(ValueError, match=f"{BACKEND_ENV}='stanx'"):
        resolve_backend_name("auto")


def test_cmdstanpy_without_cmdstan_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stan_backend, "cmdstan_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"needs cmdstanpy.*install_cmdstan"):
        get_backend("cmdstanpy")


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(ValueError, match="'stanx'"):
        get_backend("stanx")


def test_unknown_sampler_argument_is_rejected() -> None:
    with pytest.raises(TypeError, match="'adapt_engaged'"):
        stan_backend.translate_sampler_args({"adapt_engaged": 1}, stan_backend.PYSTAN_ARGS)


# ---------------------------------------------------------------------- reproducibility
def _fresh_httpstan_fit_cache(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Make httpstan keep (and look up) seeded fits in ``folder`` instead of its cache.

    httpstan returns a stored fit when the same program, data, arguments and seed
    are sampled again; without this a second PyStan fit would be read back from
    disk and the test would not exercise the sampler at all.
    """

    def fit_path(fit_name: str) -> Path:
        fit_directory, fit_id = fit_name.rsplit("/", maxsplit=1)
        return folder / fit_directory / f"{fit_id}.jsonlines.gz"

    monkeypatch.setattr(httpstan.cache, "fit_path", fit_path)


@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_same_seed_gives_identical_draws(
    stan_backend: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    scm, data = law_level3_scm(), _small_level3_data()
    args = {"chains": 1, "warmup": 100, "draws": 100, "progress": False}
    fits = []
    for run, seed in enumerate((7, 7, 8)):
        folder = tmp_path / f"run{run}"
        _fresh_httpstan_fit_cache(monkeypatch, folder)
        fits.append(scm.fit(data, seed=seed, **args))
        assert fits[-1].backend == stan_backend
        if stan_backend == "pystan":  # the fit was sampled, not read back from a cache
            assert len(list(folder.rglob("*.jsonlines.gz"))) == 1
    first, second, other = fits
    names = scm.parameter_names()
    for name in names:
        np.testing.assert_array_equal(stacked(first, name), stacked(second, name))
    assert not all(np.array_equal(stacked(first, n), stacked(other, n)) for n in names)


@pytest.mark.skipif(not BOTH, reason="needs both PyStan and a CmdStan installation")
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_backends_give_the_same_draws_at_the_same_seed() -> None:
    """Same Stan, same seed, same initial values: the same chains (CmdStan writes 6 digits)."""
    scm, data = law_level3_scm(), _small_level3_data()
    args = {"chains": 2, "warmup": 150, "draws": 150, "seed": 3, "progress": False}
    cmdstan = quietly(scm.fit, data, backend="cmdstanpy", **args)
    pystan = quietly(scm.fit, data, backend="pystan", **args)
    assert (cmdstan.backend, pystan.backend) == ("cmdstanpy", "pystan")
    for name in scm.parameter_names():
        a, b = stacked(cmdstan, name), stacked(pystan, name)
        assert a.shape == b.shape == (300, *a.shape[1:])
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert set(cmdstan.idata.sample_stats.data_vars) == set(pystan.idata.sample_stats.data_vars)
    for name in scm.parameter_names():
        assert cmdstan.idata.posterior[name].dims == pystan.idata.posterior[name].dims


# ---------------------------------------------------------------------- event loops
@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_fit_inside_a_running_event_loop(stan_backend: str) -> None:
    """Jupyter runs cells inside an event loop; PyStan's asyncio.run fails there unless moved."""
    scm, data = law_level3_scm(), _small_level3_data()

    async def cell() -> str:
        fit = scm.fit(data, chains=1, warmup=50, draws=50, seed=shifted(2), progress=False)
        return fit.backend

    assert asyncio.run(cell()) == stan_backend


# ---------------------------------------------------------------------- compilation cache
@pytest.mark.stan
def test_compiled_programs_are_cached_by_text(stan_backend: str) -> None:
    backend = get_backend(stan_backend)
    code = law_level3_scm().stan_code()
    backend.compile(code)  # compiles at most once per machine
    assert backend.compile(code) == 0.0
    if stan_backend == "cmdstanpy":
        from counterfair.stan.cmdstan_adapter import cache_dir, program_stem

        assert (cache_dir() / program_stem(code)).exists()
        assert program_stem(code) != program_stem(code + "\n// another program\n")


def test_pystan_binary_is_shared_by_every_interpreter_path_of_an_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """httpstan hashes sys.executable: `counterfair` and `python -m pytest` compiled twice."""
    import httpstan.models

    from counterfair.stan.pystan_adapter import environment_interpreter_path

    names = set()
    for path in (sys.executable, os.path.join(sys.prefix, "bin", "python3"), "/elsewhere/python"):
        monkeypatch.setattr(sys, "executable", path)
        with environment_interpreter_path():
            names.add(httpstan.models.calculate_model_name("parameters { real x; }"))
        assert sys.executable == path  # restored
    assert len(names) == 1
    monkeypatch.setattr(sys, "prefix", "/another/environment")
    with environment_interpreter_path():
        assert httpstan.models.calculate_model_name("parameters { real x; }") not in names


def _long_program(statements: int) -> str:
    """A valid program whose ``stanc`` time grows faster than its length."""
    body = "\n".join(f"  real x{i} = {i} * 0.5 + sqrt({i}.0);" for i in range(statements))
    rest = "parameters { real y; }\nmodel { y ~ std_normal(); }\n"
    return f"transformed data {{\n{body}\n}}\n{rest}"


def test_pystan_build_gives_stanc_more_than_httpstan_s_one_second() -> None:
    """httpstan kills ``stanc`` after one second; a loaded CI machine once failed a build so.

    The program is lengthened until ``stanc`` needs two seconds here, then httpstan's own
    translation must time out while the one used during counterfair's build succeeds and
    gives the same C++ as httpstan does for a short program.
    """
    import subprocess

    import httpstan.compile

    from counterfair.stan.pystan_adapter import patient_stanc

    original = httpstan.compile.compile
    short = "parameters { real y; }\nmodel { y ~ std_normal(); }\n"
    with patient_stanc():
        assert httpstan.compile.compile is not original
        ours = httpstan.compile.compile(short, "model_short")
        theirs = original(short, "model_short")
        at_file = re.compile(r"'[^']*model_short\.stan'")  # each names its own temporary file
        assert at_file.sub("F", ours[0]) == at_file.sub("F", theirs[0]) and ours[1] == theirs[1]
        with pytest.raises(ValueError, match=r"Syntax error|Ill-formed|parsing error"):
            httpstan.compile.compile("parameters { real y }", "model_broken")
        statements = 1000
        while True:
            start = time.perf_counter()
            cpp, _ = httpstan.compile.compile(_long_program(statements), "model_long")
            if time.perf_counter() - start > 2.0:
                break
            statements *= 2
        assert "model_long" in cpp
    assert httpstan.compile.compile is original
    with pytest.raises(subprocess.TimeoutExpired):
        original(_long_program(statements), "model_long")


@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_a_quiet_fit_prints_nothing(stan_backend: str, capfd: pytest.CaptureFixture[str]) -> None:
    """No 'Building...', sampling progress, 'Messages received' or cmdstanpy log lines."""
    scm, data = law_level3_scm(), _small_level3_data()
    get_backend(stan_backend).compile(scm.stan_code())
    capfd.readouterr()
    scm.fit(data, chains=1, warmup=60, draws=60, seed=shifted(4), progress=False)
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


def test_quiet_pystan_build_silences_what_child_processes_write(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """httpstan's C++ compiler writes its warnings straight to file descriptors 1 and 2
    (a fresh `python experiments/compas.py --quick` under PyStan printed screens of them): a quiet
    build silences the descriptors too, and restores them afterwards."""
    import subprocess

    from counterfair.stan.pystan_adapter import _silenced

    with _silenced(True):
        subprocess.run(
            [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"],
            check=True,
        )
        os.write(2, b"direct\n")
    subprocess.run([sys.executable, "-c", "print('after')"], check=True)
    captured = capfd.readouterr()
    assert "out" not in captured.out and "err" not in captured.err
    assert "direct" not in captured.err
    assert "after" in captured.out


@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_a_fit_with_progress_shows_progress_but_not_stan_s_notes(
    stan_backend: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """progress=True: a progress display, and none of Stan's informational notes
    ("Gradient evaluation took ...", adaptation windows) that PyStan used to append."""
    scm, data = law_level3_scm(), _small_level3_data()
    get_backend(stan_backend).compile(scm.stan_code())
    capfd.readouterr()
    with caplog.at_level(logging.INFO, logger="counterfair"):
        scm.fit(data, chains=1, warmup=60, draws=60, seed=shifted(4), progress=True)
    out, err = capfd.readouterr()
    shown = out + err
    if stan_backend == "pystan":
        assert "Sampling" in shown
    assert "Gradient evaluation took" not in shown
    assert "Messages received during sampling" not in shown
    assert "MCMC diagnostics" not in shown  # the compact summary is logged, not printed
    assert "MCMC diagnostics" in caplog.text
