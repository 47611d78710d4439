"""Atomic writes: the one place counterfair puts a file or a folder where a user reads it.

Every file and folder the package writes (reports, SCM files, saved fits and learners,
the command line's tables, Dask partitions, downloaded data, the native library) is
written first under a hidden temporary name beside its destination, then moved into
place with one rename. An interrupted or failed write therefore leaves either the old
content or the new one, never half of it, and no stray temporary file. New files get
the permissions the user's umask gives (``mkstemp`` alone would give 0600).

- :func:`write` is the whole of it for one file;
- :func:`stage` and :func:`publish` split it, for a writer that prepares several files
  and moves them together only once all are written;
- :func:`swap_folder` moves a finished temporary folder onto its destination.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["default_mode", "publish", "stage", "swap_folder", "write"]

#: What fills a staged file: text, bytes, or a function given the temporary path.
Content = str | bytes | Callable[[Path], object]


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows.

    ``os.umask`` can only be read by setting it; between the two calls another thread
    (a Dask worker's) would create files with umask 0. ``/proc/self/status`` says it.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


def default_mode(*, directory: bool = False) -> int:
    """Permissions a new file or folder gets under the current umask."""
    return (0o777 if directory else 0o666) & ~_umask()


def _fill(tmp: Path, content: Content) -> None:
    if isinstance(content, str):
        tmp.write_text(content, encoding="utf-8")
    elif isinstance(content, bytes):
        tmp.write_bytes(content)
    else:
        content(tmp)


def stage(
    path: str | os.PathLike[str],
    content: Content,
    *,
    suffix: str = ".tmp",
    mode: int | None = None,
) -> Path:
    """Write ``content`` to a new hidden file beside ``path`` and return the file.

    ``content`` is text (written as UTF-8), bytes, or a function that writes the
    temporary path it is given (``frame.to_csv``, ``figure.savefig``, a compiler). The
    file gets ``mode``, by default the umask's. If the write raises, the file is removed
    and the error propagates; ``path`` itself is never touched.
    """
    target = Path(path)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=suffix,
                                    dir=target.parent)
    os.close(handle)
    tmp = Path(name)
    try:
        _fill(tmp, content)
        os.chmod(tmp, default_mode() if mode is None else mode)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def publish(
    tmp: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    overwrite: bool = True,
    exists: str | None = None,
) -> Path:
    """Move the staged file ``tmp`` onto ``path`` in one rename; returns ``path``.

    With ``overwrite=False`` an existing ``path`` is never replaced, even one that
    appeared after the caller checked: the move is a hard link, which fails if the name
    is taken (where the file system has no hard links, the name is checked first).
    ``tmp`` is removed in every case.

    Raises
    ------
    FileExistsError
        If ``overwrite`` is false and ``path`` exists; its message is ``exists`` when
        given, else names the path.
    """
    staged, target = Path(tmp), Path(path)
    message = exists if exists is not None else f"{target} exists"
    try:
        if overwrite:
            os.replace(staged, target)
            return target
        try:
            os.link(staged, target)
        except FileExistsError:
            raise FileExistsError(message) from None
        except OSError:  # no hard links on this file system
            if target.exists():
                raise FileExistsError(message) from None
            os.replace(staged, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
    return target


def write(
    path: str | os.PathLike[str],
    content: Content,
    *,
    overwrite: bool = True,
    exists: str | None = None,
    suffix: str = ".tmp",
    mode: int | None = None,
) -> Path:
    """Write ``content`` to ``path`` atomically (:func:`stage`, then :func:`publish`)."""
    tmp = stage(path, content, suffix=suffix, mode=mode)
    return publish(tmp, path, overwrite=overwrite, exists=exists)


def swap_folder(tmp: str | os.PathLike[str], target: str | os.PathLike[str]) -> Path:
    """Move the finished folder ``tmp`` onto ``target``, replacing a folder there.

    The old folder is first renamed aside, so that ``target`` names either the old
    folder or the new one at every moment; it is deleted once the new one is in place.
    If the move fails, the old folder is put back. Returns ``target``.
    """
    source, dest = Path(tmp), Path(target)
    if not dest.exists():
        os.replace(source, dest)
        return dest
    old = dest.parent / f".{dest.name}.old-{uuid.uuid4().hex[:12]}"
    os.replace(dest, old)
    try:
        os.replace(source, dest)
    except BaseException:
        os.replace(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return dest
