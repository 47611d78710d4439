"""ARCHITECTURE.md names every module of the package, and no module that is gone.

The inventory of ARCHITECTURE.md is a run of stage paragraphs, each opened by a bold
header: ``**Base**`` (the modules at the package root) or a bold backticked folder such
as ``**`model/`**`` (``counterfair/model/``; a folder outside the package, such as
``**`experiments/`**``, is looked for at the repository root). A ``#`` heading ends the
stage. Every backticked path of a module (a word ending in ``.py``, ``.hpp`` or
``.cpp``) is resolved where it stands, and only there:

* a bare name (``validated.py``) is a module of the current stage's folder or of one of
  its subfolders (``term.py`` under ``model/`` is ``model/terms/term.py``), and must
  name exactly one; under ``**Base**`` only the package root counts; when the stage has
  no such module, or outside a stage, it may be a file of the package root (outside a
  stage only) or of the repository root (``setup.py``);
* a path with a folder (``terms/term.py``, ``model/implications.py``,
  ``tests/test_layers.py``) is looked for under the current stage's folder, then under
  ``counterfair/``, then at the repository root.

A module of the package (each ``.py`` file but ``__init__.py``, and the ``.hpp`` and
``.cpp`` sources) is *named* when its stage paragraph resolves a mention to it; a
mention that resolves to nothing, or to several modules, is *stale*. Pure file reading:
nothing of the package is imported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "counterfair"
SUFFIXES = (".py", ".hpp", ".cpp")

# In document order: a stage header, a heading, or a code span (one paragraph at most).
TOKEN = re.compile(
    r"\*\*`(?P<folder>[^`\s]+/)`\*\*"
    r"|(?P<base>\*\*Base\*\*)"
    r"|^(?P<heading>#{1,6}) "
    r"|`(?P<code>(?:[^`\n]|\n(?!\s*\n))+)`",
    re.MULTILINE,
)
MODULE_PATH = re.compile(r"[\w./-]+\.(?:py|hpp|cpp)\b")
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)


@dataclass
class Report:
    """What :func:`check` finds: modules not named, and mentions that name nothing."""

    named: set[str] = field(default_factory=set)
    missing: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    def message(self) -> str:
        lines = []
        if self.missing:
            lines.append("modules of the tree that ARCHITECTURE.md does not name in their stage:")
            lines += [f"  {path}" for path in self.missing]
        if self.stale:
            lines.append("mentions in ARCHITECTURE.md that name no module (or several):")
            lines += [f"  {mention}" for mention in self.stale]
        return "\n".join(lines)


def package_modules(root: Path = ROOT) -> set[str]:
    """Every module of the package, as a path relative to the repository root."""
    return {
        path.relative_to(root).as_posix()
        for path in (root / PACKAGE).rglob("*")
        if path.suffix in SUFFIXES and path.name != "__init__.py" and path.is_file()
    }


def _files_named(folder: Path, name: str, recursive: bool) -> list[Path]:
    found = folder.rglob(name) if recursive else folder.glob(name)
    return sorted(path for path in found if path.is_file() and "__pycache__" not in path.parts)


def _resolve(mention: str, stage: Path | None, root: Path) -> list[Path]:
    """The files a mention names where it stands (one, or none or several: stale)."""
    if "/" not in mention:
        if stage is None:
            return [p for p in (root / PACKAGE / mention, root / mention) if p.is_file()][:1]
        found = _files_named(stage, mention, recursive=stage != root / PACKAGE)
        return found or [p for p in (root / mention,) if p.is_file()]
    for base in (stage, root / PACKAGE, root):
        if base is not None and (base / mention).is_file():
            return [base / mention]
    return []


def _in_stage(path: Path, stage: Path, root: Path) -> bool:
    """Whether a stage paragraph's mention of ``path`` names it (Base: the root only)."""
    return path.parent == stage if stage == root / PACKAGE else path.is_relative_to(stage)


def check(text: str, root: Path = ROOT) -> Report:
    """Check ARCHITECTURE.md's text against the package tree under ``root``."""
    report = Report()
    stage: Path | None = None
    label = "(before any stage)"
    for match in TOKEN.finditer(FENCE.sub("", text)):
        if match["heading"]:
            stage, label = None, "(outside the stages)"
        elif match["base"]:
            stage, label = root / PACKAGE, "**Base**"
        elif match["folder"]:
            folder = match["folder"]
            label = f"**`{folder}`**"
            candidates = [root / PACKAGE / folder, root / folder]
            stage = next((path for path in candidates if path.is_dir()), None)
            if stage is None:
                report.stale.append(f"{label}: no such folder")
        else:
            for mention in MODULE_PATH.findall(match["code"]):
                found = _resolve(mention, stage, root)
                if len(found) != 1:
                    where = ", ".join(p.relative_to(root).as_posix() for p in found)
                    report.stale.append(
                        f"`{mention}` under {label}: "
                        + (f"names several modules ({where})" if found else "no such module")
                    )
                elif stage is not None and _in_stage(found[0], stage, root):
                    report.named.add(found[0].relative_to(root).as_posix())
    report.missing = sorted(package_modules(root) - report.named)
    return report


def architecture_text() -> str:
    return (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")


def test_architecture_names_every_module_and_no_gone_one() -> None:
    report = check(architecture_text())
    assert not report.missing and not report.stale, report.message()
    assert package_modules() <= report.named


def _new_findings(changed: str) -> tuple[list[str], list[str]]:
    """What the check finds in a changed copy of the text beyond what it finds in the text
    itself (so that these tests prove the checker whatever the state of the tree)."""
    before, after = check(architecture_text()), check(changed)
    missing = [path for path in after.missing if path not in before.missing]
    stale = [mention for mention in after.stale if mention not in before.stale]
    return missing, stale


def test_the_check_fails_on_a_module_left_out_and_on_a_gone_one() -> None:
    text = architecture_text()
    left_out = "`subsample.py`"
    assert text.count(left_out) == 1, "the test needs a module named once"
    assert "ghost.py" not in text and not (ROOT / PACKAGE / "rows" / "ghost.py").exists()
    rows_header = "**`rows/`**"
    assert text.count(rows_header) == 1
    changed = text.replace(left_out, "subsample").replace(
        rows_header, rows_header + " `ghost.py` (a module that is not there),"
    )

    assert _new_findings(changed) == (
        [f"{PACKAGE}/rows/subsample.py"],
        ["`ghost.py` under **`rows/`**: no such module"],
    )
    message = check(changed).message()
    assert f"{PACKAGE}/rows/subsample.py" in message and "`ghost.py`" in message


def test_a_bare_name_counts_only_in_its_own_stage() -> None:
    # a module moved to another stage is stale where the old name stands, and missing
    text = architecture_text()
    rows_header, stan_header = "**`rows/`**", "**`stan/`**"
    assert "`validated.py`" in text and text.count(stan_header) == 1
    moved = text.replace("`validated.py`", "validated").replace(
        stan_header, stan_header + " `validated.py`,"
    )
    # a bare name that several folders of the stage hold names none of them
    ambiguous = text.replace(rows_header, rows_header + " `__init__.py`,").replace(
        "**`model/`**", "**`model/`** `__init__.py`,"
    )

    assert _new_findings(moved) == (
        [f"{PACKAGE}/rows/validated.py"],
        ["`validated.py` under **`stan/`**: no such module"],
    )
    assert _new_findings(ambiguous) == (
        [],
        [
            "`__init__.py` under **`model/`**: names several modules ("
            f"{PACKAGE}/model/__init__.py, {PACKAGE}/model/families/__init__.py, "
            f"{PACKAGE}/model/terms/__init__.py)"
        ],
    )
