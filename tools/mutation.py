"""Mutation score of the pure-numpy core, module by module, with mutmut 3.

Each module is mutated on its own, against the fast tests that exercise it (never the
``stan``, ``slow``, ``browser`` or ``docs`` ones), so that one mutant runs in seconds::

    python tools/mutation.py                  # every module below
    python tools/mutation.py rng encoding     # some of them
    python tools/mutation.py --list           # the modules and their tests
    python tools/mutation.py rng --survivors  # also print the surviving mutants' diffs
    python tools/mutation.py --baseline       # without the tests/test_mutants_* files

mutmut reads its configuration from the ``pyproject.toml`` of the folder it runs in and
writes its mutants under ``mutants/`` there; one configuration holds one selection of
tests. So every module gets a scratch folder, ``.mutation/<module>/`` (ignored by git),
holding copies of ``counterfair/`` and ``tests/``, a ``pyproject.toml`` with the module's
``[tool.mutmut]`` section and this project's pytest settings, and mutmut's own state.
The worktree's sources are never touched: mutmut mutates the copies in
``.mutation/<module>/mutants/``. A scratch folder is made afresh on every run.

The table printed at the end has, per module: mutants, killed, survived, timeout (a
mutant that made the tests run into mutmut's time limit, counted as caught), no tests
(mutants of functions no selected test reaches, counted as surviving) and the score,
(killed + timeout) / mutants. ``--json PATH`` writes the same rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRATCH = REPO / ".mutation"
FAST = "not stan and not slow and not browser and not docs and not fuzz"
TARGET = 0.85


@dataclass(frozen=True)
class Module:
    """One module under mutation and the fast tests that exercise it."""

    name: str
    source: str
    tests: tuple[str, ...]


MODULES: tuple[Module, ...] = (
    Module("rng", "counterfair/rng.py",
           ("tests/test_chunking.py", "tests/test_coupling.py", "tests/test_simulate.py",
            "tests/test_mutants_rng.py")),
    Module("encoding", "counterfair/model/encoding.py",
           ("tests/test_families.py", "tests/test_simulate.py", "tests/test_data_levels.py",
            "tests/test_rows_door.py", "tests/test_mutants_encoding.py")),
    Module("exact_abduction", "counterfair/inference/exact_abduction.py",
           ("tests/test_exact_abduction.py", "tests/test_terms.py",
            "tests/test_mutants_exact_abduction.py")),
    Module("paths", "counterfair/counterfactual/paths.py",
           ("tests/test_paths.py", "tests/test_mutants_paths.py")),
    Module("world", "counterfair/counterfactual/world.py",
           ("tests/test_multiworld.py", "tests/test_data_levels.py", "tests/test_learning.py",
            "tests/test_mutants_world.py")),
    Module("evaluate", "counterfair/model/evaluate.py",
           ("tests/test_coupling.py", "tests/test_simulate.py", "tests/test_terms.py",
            "tests/test_mutants_evaluate.py")),
    Module("groups", "counterfair/audit/_groups.py",
           ("tests/test_group_intervals.py", "tests/test_audit_group_extras.py",
            "tests/test_mutants_groups.py")),
    Module("streaming", "counterfair/audit/streaming.py",
           ("tests/test_audit_streaming.py", "tests/test_mutants_streaming.py")),
)
BY_NAME = {module.name: module for module in MODULES}


@dataclass
class Score:
    """One row of the table."""

    module: str
    mutants: int
    killed: int
    survived: int
    timeout: int
    no_tests: int
    other: int

    @property
    def score(self) -> float:
        return (self.killed + self.timeout) / self.mutants if self.mutants else 1.0


def _pyproject(module: Module, tests: list[str]) -> str:
    """The scratch folder's pyproject.toml: the module's mutmut section, our pytest settings."""
    ini = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"][
        "ini_options"]
    lines = ["[tool.pytest.ini_options]"]
    for key, value in ini.items():
        if key == "addopts":
            value = "-ra"  # mutmut passes the marker expression itself
        lines.append(f"{key} = {json.dumps(value)}")
    lines += [
        "",
        "[tool.mutmut]",
        'source_paths = ["counterfair"]',
        f"only_mutate = {json.dumps([module.source])}",
        f"pytest_add_cli_args_test_selection = {json.dumps(tests)}",
        f"pytest_add_cli_args = {json.dumps(['-m', FAST, '-p', 'no:cacheprovider'])}",
        "use_git_change_detection = false",
        "",
    ]
    return "\n".join(lines)


def _prepare(module: Module, *, baseline: bool = False) -> Path:
    folder = SCRATCH / module.name
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "counterfair", folder / "counterfair", ignore=ignore)
    shutil.copytree(REPO / "tests", folder / "tests", ignore=ignore)
    tests = [test for test in module.tests if (REPO / test).exists()
             and not (baseline and Path(test).name.startswith("test_mutants_"))]
    (folder / "pyproject.toml").write_text(_pyproject(module, tests), "utf-8")
    return folder


def _mutmut(folder: Path, *args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(folder)  # the copies, never the worktree's sources
    env.setdefault("MPLBACKEND", "Agg")
    env.setdefault("COUNTERFAIR_TEST_BACKENDS", "cmdstanpy")
    mutmut = Path(sys.executable).with_name("mutmut")
    return subprocess.run([str(mutmut), *args], cwd=folder, env=env, text=True,
                          capture_output=capture, check=False)


def _count(module: Module, folder: Path) -> Score:
    meta = folder / "mutants" / (module.source + ".meta")
    codes = json.loads(meta.read_text("utf-8"))["exit_code_by_key"]
    score = Score(module.name, len(codes), 0, 0, 0, 0, 0)
    from mutmut.stats import status_by_exit_code  # the tool's own reading of its codes

    for code in codes.values():
        status = status_by_exit_code[code]
        if status == "killed":
            score.killed += 1
        elif status == "survived":
            score.survived += 1
        elif status == "timeout":
            score.timeout += 1
        elif status in ("no tests", "not checked"):
            score.no_tests += 1  # no selected test reaches the function: not caught
        else:
            score.other += 1  # suspicious, segfault, interrupted: not caught either
    return score


def run_module(module: Module, *, max_children: int, survivors: bool = False,
               baseline: bool = False) -> Score:
    """Mutate one module in its scratch folder and count the outcomes."""
    folder = _prepare(module, baseline=baseline)
    done = _mutmut(folder, "run", "--max-children", str(max_children), capture=True)
    # mutmut stops (exit 1) when no selected test reaches any mutated function; the
    # mutants are then all "not checked", counted as not caught
    untested = ("could not find any test case for any mutant" in done.stdout
                or "failed to collect stats. runner returned 5" in done.stdout)
    meta = folder / "mutants" / (module.source + ".meta")
    if (done.returncode != 0 and not untested) or not meta.exists():
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"mutmut failed on {module.name} (exit {done.returncode})")
    if survivors:
        listing = _mutmut(folder, "results", capture=True).stdout
        for line in listing.splitlines():
            name = line.strip().split(":")[0]
            if name:
                print(_mutmut(folder, "show", name, capture=True).stdout)
    return _count(module, folder)


def table(scores: list[Score]) -> str:
    head = f"{'module':<16} {'mutants':>7} {'killed':>7} {'survived':>8} {'timeout':>7} " \
           f"{'no tests':>8} {'score':>7}"
    rows = [head, "-" * len(head)]
    for s in scores:
        rows.append(f"{s.module:<16} {s.mutants:>7} {s.killed:>7} {s.survived:>8} "
                    f"{s.timeout:>7} {s.no_tests:>8} {s.score:>7.1%}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", choices=[[], *BY_NAME], metavar="module",
                        help=f"modules to mutate (default: all of {', '.join(BY_NAME)})")
    parser.add_argument("--max-children", type=int, default=2)
    parser.add_argument("--survivors", action="store_true", help="print surviving mutants")
    parser.add_argument("--baseline", action="store_true",
                        help="leave out the tests/test_mutants_* files (the score before them)")
    parser.add_argument("--json", type=Path, help="also write the table as JSON here")
    parser.add_argument("--list", action="store_true", help="list the modules and tests")
    args = parser.parse_args(argv)
    chosen = [BY_NAME[name] for name in args.modules] or list(MODULES)
    if args.list:
        for module in chosen:
            print(module.name, module.source, " ".join(module.tests))
        return 0
    scores = []
    for module in chosen:
        print(f"mutating {module.source} ...", flush=True)
        scores.append(run_module(module, max_children=args.max_children,
                                 survivors=args.survivors, baseline=args.baseline))
    print(table(scores))
    if args.json:
        args.json.write_text(json.dumps(
            [{**asdict(s), "score": s.score} for s in scores], indent=2) + "\n", "utf-8")
    return 0 if all(s.score >= TARGET for s in scores) else 1


if __name__ == "__main__":
    raise SystemExit(main())
