"""Shared fixtures."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


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
