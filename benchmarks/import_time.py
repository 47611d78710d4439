"""Start-up time of ``import counterfair`` and ``counterfair --help`` (target 0.5 s each).

Each command runs in N fresh interpreters (default 7) after one untimed run that fills
the bytecode cache; the script prints the median, min and max wall time of each next to
its target and their ratio, the median CPU time (user + system, less sensitive than wall
time to other jobs on the machine) and the peak resident set size of the processes (both
from the ``rusage`` of each child, ``os.wait4``). ``python -c pass`` is timed too, as the floor
no package can go under. ``counterfair --help`` runs as the console script does,
``from counterfair.cli import main; main(["--help"])``, so that it works for any checkout.

``--repo DIR`` measures another checkout (its directory goes first on ``PYTHONPATH`` and
is the children's working directory); the header names the file ``counterfair`` was
imported from, to show which checkout ran. ``--importtime K`` adds, per command, the K
imports with the largest cumulative time under ``python -X importtime``.

Usage::

    python benchmarks/import_time.py [--runs 7] [--repo DIR] [--importtime 12]

For the layout before the subpackages (commit e1684db)::

    git worktree add /tmp/cf_before e1684db
    python benchmarks/import_time.py --repo /tmp/cf_before
    git worktree remove /tmp/cf_before
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 0.5

COMMANDS = {
    "python -c pass": "pass",
    "import counterfair": "import counterfair",
    "counterfair --help": "import sys; from counterfair.cli import main; "
    "sys.exit(main(['--help']))",
}
TARGETS = {"import counterfair": TARGET_SECONDS, "counterfair --help": TARGET_SECONDS}


def environment(repo: Path) -> dict[str, str]:
    """The children's environment: ``repo`` first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo), env.get("PYTHONPATH")]))
    return env


def run_once(python: str, code: str, repo: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one fresh ``python -c code``."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [python, "-c", code],
        cwd=repo,
        env=environment(repo),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode() if child.stderr else ""
    if child.returncode != 0:
        raise RuntimeError(f"python -c {code!r} failed ({child.returncode}):\n{error[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024  # kB on Linux


def import_times(python: str, code: str, repo: Path, top: int) -> list[str]:
    """The ``top`` imports of ``code`` with the largest cumulative time (-X importtime)."""
    done = subprocess.run(
        [python, "-X", "importtime", "-c", code],
        cwd=repo,
        env=environment(repo),
        capture_output=True,
        text=True,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|")
        rows.append((int(cumulative), int(own), name.rstrip()))
    total = sum(own for _, own, _ in rows)
    lines = [f"  {total / 1e6:.3f} s in {len(rows)} imports; largest cumulative:"]
    for cumulative, own, name in sorted(rows, reverse=True)[:top]:
        lines.append(f"  {cumulative / 1e6:7.3f} s (self {own / 1e6:.3f}) {name}")
    return lines


def describe(repo: Path, python: str) -> list[str]:
    """Which checkout and interpreter run, on what machine."""
    git = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%h %s"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    where = subprocess.run(
        [python, "-c", "import counterfair; print(counterfair.__file__)"],
        cwd=repo,
        env=environment(repo),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    version = subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return [
        f"repo {repo}: commit {git[:90] or '?'}" + (" (+ uncommitted changes)" if dirty else ""),
        f"counterfair imported from {where}",
        f"python {version} ({python}), {os.cpu_count()} CPUs, {platform.machine()}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per command")
    parser.add_argument("--repo", type=Path, default=ROOT, help="checkout to measure")
    parser.add_argument("--python", default=sys.executable, help="interpreter to run")
    parser.add_argument(
        "--importtime", type=int, default=0, metavar="K",
        help="also list the K largest imports of each command (python -X importtime)",
    )
    args = parser.parse_args(argv)
    repo = args.repo.resolve()
    print(f"Start-up time: {args.runs} fresh processes per command, after one untimed run")
    for line in describe(repo, args.python):
        print(line)
    load_before = os.getloadavg()[0]
    rule = "-" * 100
    print(rule)
    print(
        f"{'command':22s} {'median s':>9s} {'min s':>7s} {'max s':>7s} {'target s':>9s} "
        f"{'median/target':>14s} {'CPU s':>7s} {'peak RSS MB (median, max)':>26s}"
    )
    print(rule)
    verdicts = []
    for label, code in COMMANDS.items():
        run_once(args.python, code, repo)  # fills __pycache__; not timed
        measured = [run_once(args.python, code, repo) for _ in range(args.runs)]
        walls = [wall for wall, _, _ in measured]
        cpus = [cpu for _, cpu, _ in measured]
        peaks = [peak for _, _, peak in measured]
        median = statistics.median(walls)
        target = TARGETS.get(label)
        ratio = f"{median / target:13.2f}x" if target else f"{'':14s}"
        print(
            f"{label:22s} {median:9.3f} {min(walls):7.3f} {max(walls):7.3f} "
            f"{(f'{target:.1f}' if target else '-'):>9s} {ratio} "
            f"{statistics.median(cpus):7.3f} {statistics.median(peaks):18.0f}, {max(peaks):6.0f}",
            flush=True,
        )
        if target:
            verdicts.append(f"{label}: {'MET' if median <= target else 'NOT MET'}")
    print(rule)
    print(f"1-min load {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"TARGET (median <= {TARGET_SECONDS} s): " + "; ".join(verdicts))
    if args.importtime:
        for label, code in COMMANDS.items():
            if label in TARGETS:
                print(f"python -X importtime, {label}:")
                print("\n".join(import_times(args.python, code, repo, args.importtime)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
