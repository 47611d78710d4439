"""Start-up: ``import counterfair`` and ``counterfair --help`` load no heavy dependency.

``counterfair/__init__.py`` imports each public name on first use (its tables
``_ATTRIBUTES`` and ``_MODULES``), and the command line builds its parser from the
standard library, so both start in a fraction of a second. Each check runs in a fresh
interpreter (this process has long imported everything) and looks at ``sys.modules``;
the start-up times themselves are measured by ``benchmarks/import_time.py``, not here.
The stub ``counterfair/__init__.pyi`` that type checkers read must name what the tables
name, from the same modules.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import counterfair as cf
from counterfair.cli import main

STUB = Path(cf.__file__).with_name("__init__.pyi")

HEAVY = (
    "arviz", "dask", "distributed", "skops", "shap", "matplotlib", "pandas", "numpy",
    "scipy", "sklearn", "xarray", "networkx", "cmdstanpy", "stan", "httpstan",
)
"""Third-party packages that start-up must not import (arviz alone took 0.9 s)."""

STAGES = (
    "model", "rows", "stan", "inference", "counterfactual", "learn", "audit", "io", "dask",
    "datasets", "experiments",
)
"""counterfair's pipeline subpackages, each of which imports pandas or more."""


def loaded_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    probe = (
        f"import json, sys\ntry:\n    exec({code!r})\nexcept SystemExit as exit:\n"
        "    assert exit.code in (0, None), exit.code\n"
        "print('\\n' + json.dumps(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout.splitlines()[-1]))


def too_heavy(modules: list[str]) -> list[str]:
    """The modules of ``modules`` that start-up should not have imported."""
    stages = tuple(f"counterfair.{stage}" for stage in STAGES)
    return [
        m
        for m in modules
        if m.split(".")[0] in HEAVY or m in stages or m.startswith(tuple(s + "." for s in stages))
    ]


def test_import_counterfair_loads_no_heavy_module() -> None:
    modules = loaded_after("import counterfair")
    assert "counterfair" in modules
    assert too_heavy(modules) == []


@pytest.mark.parametrize(
    "arguments",
    [["--help"], ["fit", "--help"], ["learn", "--help"], ["counterfactual", "--help"],
     ["audit", "--help"], ["decompose", "--help"], ["compile", "--help"]],
    ids=" ".join,
)
def test_command_line_help_loads_no_heavy_module(arguments: list[str]) -> None:
    modules = loaded_after(f"from counterfair.cli import main; main({arguments!r})")
    assert "counterfair.cli.commands" in modules
    assert too_heavy(modules) == []


def test_help_still_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["--help"])
    assert exit.value.code == 0
    text = capsys.readouterr().out
    for command in ("audit", "compile", "fit", "learn", "counterfactual", "decompose",
                    "falsify"):
        assert command in text
    for study in ("law-school", "compas", "adult-pscf", "explanations"):  # scripts, not commands
        assert study not in text


def test_the_law_school_worlds_script_has_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments import law_school_worlds

    with pytest.raises(SystemExit) as exit:
        law_school_worlds.main(["--help"])
    assert exit.value.code == 0
    text = capsys.readouterr().out
    assert "usage: python -m experiments.law_school_worlds" in text
    for option in ("--data-dir", "--out", "--quick", "--force", "--seed", "--lams"):
        assert option in text


def test_every_public_name_is_listed_and_resolves() -> None:
    """``dir()`` (tab completion) lists ``__all__``; each name is its module's object."""
    code = """
import importlib, json, counterfair as cf
listed = set(dir(cf))
wrong = []
for name in cf.__all__:
    value = getattr(cf, name)
    if name in cf._MODULES:
        expected = importlib.import_module(cf._MODULES[name])
    elif name in cf._ATTRIBUTES:
        module, _, attribute = cf._ATTRIBUTES[name].partition(":")
        expected = getattr(importlib.import_module(module), attribute or name)
    else:
        expected = value
    if value is not expected:
        wrong.append(name)
print(json.dumps({"missing": sorted(set(cf.__all__) - listed), "wrong": wrong}))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result == {"missing": [], "wrong": []}
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        _ = cf.not_a_name


def test_version_and_options_are_attributes_not_public_names() -> None:
    assert "__version__" not in cf.__all__ and "options" not in cf.__all__
    assert isinstance(cf.__version__, str)
    assert cf.options.DEFAULT_CHUNK_BYTES > 0  # still importable as cf.options


def stub_imports() -> dict[str, str]:
    """Name -> where the stub imports it from, in the tables' notation."""
    names = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}:{alias.name}"
    return names


def stub_all() -> list[str]:
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            return list(ast.literal_eval(node.value))
    raise AssertionError("the stub has no __all__")


def test_stub_names_what_the_tables_name() -> None:
    stub = stub_imports()
    expected = {"__version__": "counterfair._version:__version__"}
    for name, target in cf._ATTRIBUTES.items():
        module, _, attribute = target.partition(":")
        expected[name] = f"{module}:{attribute or name}"
    for name, module in cf._MODULES.items():
        parent, _, leaf = module.rpartition(".")
        expected[name] = f"{parent}:{leaf}"
    assert set(stub) == set(expected)  # the same names ...
    assert stub == expected  # ... from the same modules
    assert sorted(stub_all()) == sorted(cf.__all__)
