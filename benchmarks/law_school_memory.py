"""Peak memory of the law school study, per Stan back end (issue 19: <= 2 GB).

Runs ``experiments/law_school.py`` in a fresh subprocess per back end under
``/usr/bin/time -v`` (peak resident set size of the process and its children that
were waited for; CmdStan's sampler processes are separate and not counted) and writes
``benchmarks/results/law_school_memory.json``.

Usage::

    COUNTERFAIR_DATA=/work/shared/data python benchmarks/law_school_memory.py \
        [--backends cmdstanpy pystan]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "law_school_memory.json"
TARGET_GB = 2.0


def measure(backend: str) -> dict[str, float | str | int]:
    """Run the study once with ``backend``; return its peak RSS (GB) and wall time (s)."""
    env = {**os.environ, "COUNTERFAIR_BACKEND": backend, "MPLBACKEND": "Agg"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="law-memory-") as out:
        command = ["/usr/bin/time", "-v", sys.executable, "experiments/law_school.py"]
        start = time.perf_counter()
        done = subprocess.run(
            [*command, "--out", str(Path(out) / "study")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        wall = time.perf_counter() - start
    found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"law school study failed with {backend}:\n{done.stderr[-3000:]}")
    peak = int(found.group(1)) * 1024 / 1e9
    return {
        "backend": backend,
        "peak_rss_gb": round(peak, 3),
        "wall_seconds": round(wall, 1),
        "ratio_to_target": round(peak / TARGET_GB, 3),
        "returncode": done.returncode,
    }


def main() -> None:
    """Measure each back end asked for, print a line each, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["cmdstanpy", "pystan"])
    args = parser.parse_args()
    rows = []
    for backend in args.backends:
        row = measure(backend)
        rows.append(row)
        print(
            f"{backend:10s} peak RSS {row['peak_rss_gb']:.2f} GB, "
            f"wall {row['wall_seconds']:.0f} s, "
            f"{row['ratio_to_target']:.2f} x the {TARGET_GB:g} GB target",
            flush=True,
        )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    if RESULTS.exists():  # keep the other back ends' last runs
        measured = {row["backend"] for row in rows}
        kept = json.loads(RESULTS.read_text()).get("runs", [])
        rows = [r for r in kept if r["backend"] not in measured] + rows
    tmp = RESULTS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"target_gb": TARGET_GB, "runs": rows}, indent=2) + "\n")
    os.replace(tmp, RESULTS)


if __name__ == "__main__":
    main()
