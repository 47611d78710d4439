"""counterfair.atomic: the one way the package puts a file or folder in place.

A write either lands whole or leaves the old content and no stray file; an existing file
is not replaced when the caller says so, even one that appears after its check; new
files get the umask's permissions; and no other module of the package renames files
into place or makes its own temporary files beside a destination.
"""

from __future__ import annotations

import ast
import errno
import os
import stat
from pathlib import Path

import pytest

from counterfair import atomic

PACKAGE = Path(__file__).resolve().parents[1] / "counterfair"


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_text_bytes_and_a_writer_each_land_whole(tmp_path: Path) -> None:
    assert atomic.write(tmp_path / "a.txt", "é\n").read_text(encoding="utf-8") == "é\n"
    assert atomic.write(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    atomic.write(tmp_path / "c.csv", lambda tmp: tmp.write_text("x\n1\n"))
    assert (tmp_path / "c.csv").read_text() == "x\n1\n"
    assert _names(tmp_path) == ["a.txt", "b.bin", "c.csv"]


def test_a_failing_writer_keeps_the_old_file_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "table.csv"
    target.write_text("old\n")

    def half(tmp: Path) -> None:
        tmp.write_text("new, but only ha")
        raise RuntimeError("disk full (injected)")

    with pytest.raises(RuntimeError, match="injected"):
        atomic.write(target, half)
    assert target.read_text() == "old\n"
    assert _names(tmp_path) == ["table.csv"]


def test_a_failed_rename_keeps_the_old_file_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.html"
    target.write_text("old\n")

    def failing(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error (injected)")

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(OSError, match="injected"):
        atomic.write(target, "new\n")
    assert target.read_text() == "old\n"
    assert _names(tmp_path) == ["report.html"]


def test_no_overwrite_refuses_an_existing_file_with_the_callers_message(tmp_path: Path) -> None:
    target = tmp_path / "out.html"
    target.write_text("theirs\n")
    with pytest.raises(FileExistsError, match=r"out\.html exists; pass overwrite=True"):
        atomic.write(target, "ours\n", overwrite=False,
                     exists=f"{target} exists; pass overwrite=True")
    assert target.read_text() == "theirs\n"
    assert _names(tmp_path) == ["out.html"]
    with pytest.raises(FileExistsError, match=r"out\.html exists"):
        atomic.write(target, "ours\n", overwrite=False)


def test_no_overwrite_holds_against_a_file_that_appears_after_staging(tmp_path: Path) -> None:
    target = tmp_path / "out.csv"
    staged = atomic.stage(target, "ours\n")
    target.write_text("appeared meanwhile\n")  # another process, between check and move
    with pytest.raises(FileExistsError):
        atomic.publish(staged, target, overwrite=False)
    assert target.read_text() == "appeared meanwhile\n"
    assert _names(tmp_path) == ["out.csv"]


def test_staged_files_are_hidden_beside_their_place_until_published(tmp_path: Path) -> None:
    first = atomic.stage(tmp_path / "a.csv", "1\n")
    second = atomic.stage(tmp_path / "b.csv", "2\n")
    assert first.parent == tmp_path and first.name.startswith(".a.csv.")
    assert not (tmp_path / "a.csv").exists()
    atomic.publish(first, tmp_path / "a.csv")
    atomic.publish(second, tmp_path / "b.csv")
    assert _names(tmp_path) == ["a.csv", "b.csv"]


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_new_files_follow_the_umask(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        path = atomic.write(tmp_path / "f.txt", "x")
        assert atomic.default_mode() == 0o666 & ~umask
        assert atomic.default_mode(directory=True) == 0o777 & ~umask
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_swap_folder_replaces_a_folder_and_puts_it_back_if_the_move_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "run"
    target.mkdir()
    (target / "old.txt").write_text("old")
    new = tmp_path / ".run.tmp"
    new.mkdir()
    (new / "new.txt").write_text("new")
    atomic.swap_folder(new, target)
    assert _names(target) == ["new.txt"]
    assert _names(tmp_path) == ["run"]

    again = tmp_path / ".run.tmp2"
    again.mkdir()
    (again / "newer.txt").write_text("newer")
    real = os.replace
    calls = []

    def second_fails(src: object, dst: object) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.EIO, "Input/output error (injected)")
        real(src, dst)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "replace", second_fails)
    with pytest.raises(OSError, match="injected"):
        atomic.swap_folder(again, target)
    monkeypatch.undo()
    assert _names(target) == ["new.txt"]  # the old folder is back in place
    assert sorted(_names(tmp_path)) == [".run.tmp2", "run"]


def _calls(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name):
                found.add(f"{owner.id}.{node.func.attr}")
    return found


def test_no_other_module_moves_files_into_place_on_its_own() -> None:
    # the one helper: no other module renames a file into place or makes its own
    # temporary file beside a destination (temporary folders for Stan's work are fine)
    banned = {"os.replace", "os.rename", "tempfile.mkstemp", "tempfile.NamedTemporaryFile"}
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "atomic.py" and path.parent == PACKAGE:
            continue
        used = _calls(ast.parse(path.read_text(encoding="utf-8"))) & banned
        if used:
            offenders[str(path.relative_to(PACKAGE))] = sorted(used)
    assert offenders == {}
