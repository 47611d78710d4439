"""Optional dependencies (issue 30): shap, with numba and llvmlite, is the [explain]
extra; the explanation audits name the extra when it is missing."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from counterfair.audit.explanations import NO_SHAP, import_shap

ROOT = Path(__file__).parents[1]


def test_shap_is_an_extra_not_a_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(d.startswith("shap") for d in project["dependencies"])
    assert any(d.startswith("shap") for d in project["optional-dependencies"]["explain"])
    # the tests need it: the dev extra installs it for CI (.ci/run installs .[dev,cmdstan])
    assert any(d.startswith("shap") for d in project["optional-dependencies"]["dev"])
    assert any(d.startswith("hypothesis") for d in project["optional-dependencies"]["dev"])


def test_explanation_audits_name_the_extra_without_shap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "shap", None)  # what Python does for a missing module
    with pytest.raises(ImportError, match=r"pip install 'counterfair\[explain\]'") as caught:
        import_shap()
    assert str(caught.value) == NO_SHAP
