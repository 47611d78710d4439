"""Every Python block of the README runs, in order, in one namespace (as a reader would).

The blocks read the law school data from ``COUNTERFAIR_DATA`` and fit real Stan
programs, so the test is marked ``stan`` and runs once per back end.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks(text: str) -> list[str]:
    """The fenced ```python blocks of a markdown text, in order."""
    return [match.group(1) for match in BLOCK.finditer(text)]


def test_a_relative_data_folder_is_resolved_once_at_session_start() -> None:
    # conftest.resolve_data_folder: the README's own COUNTERFAIR_DATA=../shared/data is
    # relative, and the block runs below change into a temporary folder
    folder = os.environ.get("COUNTERFAIR_DATA")
    if folder is None:
        pytest.skip("COUNTERFAIR_DATA is not set")
    assert os.path.isabs(folder), folder


def test_readme_has_python_examples() -> None:
    blocks = python_blocks(README.read_text())
    assert blocks, "the README shows no Python example"
    for number, block in enumerate(blocks, start=1):
        compile(block, f"README.md python block {number}", "exec")


@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
@pytest.mark.skipif(
    not os.environ.get("COUNTERFAIR_DATA"), reason="COUNTERFAIR_DATA names no data folder"
)
def test_readme_python_blocks_run(
    stan_backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # anything a block writes stays out of the repository
    namespace: dict[str, object] = {"__name__": "__readme__"}
    for number, block in enumerate(python_blocks(README.read_text()), start=1):
        code = compile(block, f"README.md python block {number}", "exec")
        exec(code, namespace)
