"""The mutation score of one small module of the numpy core (tools/mutation.py).

Runs mutmut 3 on ``counterfair/model/encoding.py`` against its fast tests, in a
scratch copy under ``.mutation/`` (the sources are never mutated), and checks that
at least 85 % of the mutants are caught. Takes a few minutes: marked ``slow`` and
``mutation``, so default runs leave it out; run it with ``pytest -m mutation``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TARGET = 0.85

pytestmark = [pytest.mark.mutation, pytest.mark.slow]


def test_encoding_mutation_score_meets_the_target(tmp_path: Path) -> None:
    pytest.importorskip("mutmut")
    out = tmp_path / "scores.json"
    env = {k: v for k, v in os.environ.items() if k != "MUTANT_UNDER_TEST"}
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "mutation.py"), "encoding", "--json", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=3600, check=False,
    )
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    (row,) = json.loads(out.read_text("utf-8"))
    assert row["module"] == "encoding" and row["mutants"] > 50
    assert row["score"] >= TARGET, row
    assert done.returncode == 0, done.stdout[-3000:]
