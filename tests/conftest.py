"""Shared fixtures, and the Stan back end every ``stan``-marked test runs against.

A test marked ``stan`` runs against one back end: cmdstanpy when a CmdStan installation
is found, the default of ``backend="auto"``. The generated programs are the same for
both back ends, and ``tests/test_codegen.py`` type-checks every one with stanc. Tests of
what differs between the back ends (draw layout, seeds, warm starts, save and load, the
recovery fit) are marked ``every_backend`` as well and run against each back end found
(PyStan, and cmdstanpy), or the comma-separated names in ``COUNTERFAIR_TEST_BACKENDS``.
The ``stan_backend`` fixture points ``backend="auto"`` at its back end (through
``COUNTERFAIR_BACKEND``) for the tests and module fixtures that depend on it, so a
module-scoped fit is made once per back end.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from _models import law_level2_fit

import counterfair as cf
from counterfair.stan.backend import (
    BACKEND_ENV,
    BACKEND_NAMES,
    available_backends,
    resolve_backend_name,
)

REPO = Path(__file__).resolve().parents[1]
# a test never starts a CmdStan download or build (tests/test_install.py sets it per test)
os.environ.setdefault("COUNTERFAIR_INSTALL_CMDSTAN", "never")
TEST_BACKENDS_ENV = "COUNTERFAIR_TEST_BACKENDS"


def backends_under_test() -> list[str]:
    """The back ends the ``stan`` tests run against."""
    wanted = os.environ.get(TEST_BACKENDS_ENV, "").strip()
    if not wanted:
        return available_backends()
    names = [name.strip() for name in wanted.split(",") if name.strip()]
    unknown = [name for name in names if name not in BACKEND_NAMES]
    if unknown:
        raise pytest.UsageError(f"{TEST_BACKENDS_ENV} names unknown back end(s) {unknown}")
    return names


DATA_ENV = "COUNTERFAIR_DATA"


def resolve_data_folder() -> None:
    """Make a relative ``COUNTERFAIR_DATA`` absolute, against the folder pytest started in.

    The README suggests ``COUNTERFAIR_DATA=../shared/data``; tests that change into a
    temporary folder (the README and notebook runs) and the commands they start would
    otherwise resolve it against that folder and find nothing.
    """
    folder = os.environ.get(DATA_ENV, "").strip()
    if folder and not os.path.isabs(folder):
        os.environ[DATA_ENV] = str(Path(folder).resolve())


def pytest_configure(config: pytest.Config) -> None:
    """Resolve the data folder once, and point ``backend="auto"`` at a back end under test.

    Without the second step, ``COUNTERFAIR_TEST_BACKENDS=pystan`` on a machine with CmdStan
    would still send the unmarked tests (and the commands they start) to CmdStan, compiling
    their programs one by one there.
    """
    resolve_data_folder()
    if os.environ.get(BACKEND_ENV, "").strip():
        return
    under_test = backends_under_test()
    if under_test and resolve_backend_name("auto") not in under_test:
        os.environ[BACKEND_ENV] = under_test[0]


def one_backend() -> list[str]:
    """The back end a ``stan`` test runs against unless it is marked ``every_backend``:
    cmdstanpy when under test (the default back end), else the first found."""
    under_test = backends_under_test()
    return ["cmdstanpy"] if "cmdstanpy" in under_test else under_test[:1]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.definition.get_closest_marker("stan") is None:
        return
    if "stan_backend" not in metafunc.fixturenames:
        metafunc.fixturenames.append("stan_backend")
    every = metafunc.definition.get_closest_marker("every_backend") is not None
    backends = backends_under_test() if every else one_backend()
    metafunc.parametrize("stan_backend", backends, indirect=True, scope="module")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``toy_latents`` tests ignore the IdentificationWarning of their small SCMs."""
    for item in items:
        if item.get_closest_marker("toy_latents") is not None:
            item.add_marker(
                pytest.mark.filterwarnings("ignore::counterfair.errors.IdentificationWarning")
            )


@pytest.fixture(scope="module")
def law_fit(stan_backend: str) -> cf.Fit:
    """The one law school fit of the suite (``_models.law_level2_fit``), per back end."""
    return law_level2_fit().fit


def pytest_collection_finish(session: pytest.Session) -> None:
    """Compile every program the selected ``stan`` tests need, two at a time, up front.

    On a machine with empty caches this halves the wall time of compilation (each
    program is compiled once per back end either way). A failure here is reported and
    left to the test that needs the program.
    """
    if not any(item.get_closest_marker("stan") for item in session.items):
        return
    from _models import stan_programs

    from counterfair.stan.precompile import compile_programs

    slow = any(item.get_closest_marker("slow") for item in session.items)
    # the default back end's programs up front; the other back ends compile the few
    # programs of their every_backend tests when those run
    for backend in one_backend():
        try:
            compile_programs(stan_programs(slow=slow), backend=backend, jobs=2)
        except Exception as error:  # the tests themselves will compile and report
            print(f"\nprecompiling for {backend} failed: {error!r}", file=sys.stderr)


@pytest.fixture(scope="module")
def stan_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    """Name of the Stan back end under test; ``backend="auto"`` resolves to it meanwhile."""
    name = getattr(request, "param", None)
    if name is None:
        pytest.fail("stan_backend is only available to tests marked @pytest.mark.stan")
    patch = pytest.MonkeyPatch()
    patch.setenv(BACKEND_ENV, name)
    try:
        yield name
    finally:
        patch.undo()


@pytest.fixture(scope="session")
def regen_tool() -> ModuleType:
    """``tools/regenerate_stan_models.py`` (not a package) loaded as a module.

    It holds the law school SCM builders and the list of golden Stan programs.
    """
    path = REPO / "tools" / "regenerate_stan_models.py"
    spec = importlib.util.spec_from_file_location("regenerate_stan_models", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(autouse=True)
def _counterfair_logger_restored() -> Iterator[None]:
    """A test that runs the command line in-process (which calls ``logs.console``) leaves
    counterfair's logger as it found it, so later tests see a library user's defaults."""
    import logging

    logger = logging.getLogger("counterfair")
    state = (list(logger.handlers), logger.level, logger.propagate)
    yield
    logger.handlers[:], logger.level, logger.propagate = state


@pytest.fixture(scope="module")
def client() -> Iterator[object]:
    """A real ``distributed.LocalCluster`` of two worker processes and its client, one per
    test module that asks for it (the Dask tests); skipped without the [dask] extra."""
    distributed = pytest.importorskip("distributed", reason="distributed is not installed")
    cluster = distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    )
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()
