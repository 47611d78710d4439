"""The stages import one way: the import-linter layers contract of ``pyproject.toml`` holds.

The contract (``[tool.importlinter]``) orders the subpackages base -> model -> rows ->
stan -> inference -> counterfactual -> learn | audit -> io -> dask -> datasets -> cli;
its only exceptions are the named one-line delegates of ``SCM``, ``Fit`` and the
learners. A second contract forbids the package to import the studies of
``experiments/``, which the wheel does not carry. ``lint-imports`` also runs in CI on its
own.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _contracts(kind: str) -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return [dict(c) for c in config["contracts"] if c["type"] == kind]


def _contract() -> dict[str, object]:
    (contract,) = _contracts("layers")
    return contract


def test_the_package_is_forbidden_to_import_the_studies() -> None:
    (forbidden,) = _contracts("forbidden")
    assert forbidden["source_modules"] == ["counterfair"]
    assert forbidden["forbidden_modules"] == ["experiments"]


def test_the_layers_contract_is_kept() -> None:
    command = Path(sys.executable).with_name("lint-imports")
    if not command.exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    done = subprocess.run([str(command)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "KEPT" in done.stdout


def test_every_exception_is_a_named_delegate_and_there_are_five_at_most() -> None:
    contract = _contract()
    ignored = contract["ignore_imports"]
    assert isinstance(ignored, list) and len(ignored) <= 5
    sources = {line.split(" -> ")[0] for line in ignored}
    assert sources <= {
        "counterfair.model.scm",
        "counterfair.inference.fit",
        "counterfair.learn.saving",
    }


def test_every_subpackage_has_a_layer() -> None:
    layers = " | ".join(str(layer) for layer in _contract()["layers"])  # type: ignore[union-attr]
    named = {name.strip() for name in layers.split("|")}
    package = ROOT / "counterfair"
    stages = {
        f"counterfair.{p.name}" for p in package.iterdir() if (p / "__init__.py").exists()
    }
    assert stages <= named, sorted(stages - named)
