"""The example notebook runs in a real Jupyter kernel (an event loop) with each back end."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOK = REPO / "examples" / "law_school_in_brief.ipynb"


def _tool():  # type: ignore[no-untyped-def]
    path = REPO / "tools" / "build_example_notebook.py"
    spec = importlib.util.spec_from_file_location("build_example_notebook", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_kept_notebook_has_the_tools_cells_and_their_outputs() -> None:
    import nbformat

    kept = nbformat.read(NOTEBOOK, as_version=4)
    fresh = _tool().notebook()
    assert [c.source for c in kept.cells] == [c.source for c in fresh.cells]
    code = [c for c in kept.cells if c.cell_type == "code"]
    assert all(c.get("outputs") for c in code), "run tools/build_example_notebook.py"
    assert not [o for c in code for o in c.outputs if o.output_type == "error"]


@pytest.mark.stan
@pytest.mark.skipif(
    not os.environ.get("COUNTERFAIR_DATA"), reason="COUNTERFAIR_DATA names no data folder"
)
def test_notebook_executes_in_a_kernel(stan_backend: str, tmp_path: Path) -> None:
    tool = _tool()
    nb = tool.execute(tool.notebook(), tmp_path)  # the kernel inherits COUNTERFAIR_BACKEND
    text = "\n".join(
        str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )
    assert f"back end: {stan_backend}" in text
    changes = dict(re.findall(r"(\w[\w ]*?)\s+mean \|change\| = ([0-9.]+)", text))
    assert float(changes["Fair K"]) == 0.0
    assert float(changes["Unaware"]) > 0.05
