"""Per-row outputs of a Dask run as a folder of parquet partitions, written atomically.

The folder the user names (``rows_out=``) appears only when every partition is
written: tasks write ``part.00000.parquet``, ``part.00001.parquet``, ... into a
hidden temporary folder next to it (``.<name>.partial-<random>``), each file
itself written under a temporary name and renamed, and the client renames the
folder into place at the end. A run that is interrupted (an error in a task, a
killed client) leaves at most the hidden temporary folder, never a folder
under the user's name that looks complete. A rerun of a task (a worker died)
rewrites the same file name with the same rows.

The target must not exist or be an empty folder, unless ``overwrite=True``; the
old folder is then replaced only after the new one is complete. Every worker
must see the folder's file system (a local cluster, a shared disk).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pandas as pd

from counterfair import atomic, errors
from counterfair.io.fit_folder import check_target as folder_target

PARTIAL_MARK = ".partial-"
"""Part of the temporary folder's name: ``.<name>.partial-<random>``."""

def check_target(path: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """``path`` as a folder the run may write, checked before any task is sent.

    Raises
    ------
    TargetError
        If ``path`` is a file, or a non-empty folder and ``overwrite`` is false
        (:func:`counterfair.io.fit_folder.check_target`, the one check of a target).
    DataError
        If its parent folder does not exist.
    """
    target = folder_target(Path(path).expanduser().absolute(), overwrite=overwrite,
                           label="rows_out=")
    if not target.parent.is_dir():
        raise errors.DataError(f"rows_out={target!s}: its parent folder does not exist")
    return target


def start(target: Path) -> Path:
    """A new hidden temporary folder next to ``target`` for the partitions."""
    partial = target.parent / f".{target.name}{PARTIAL_MARK}{uuid.uuid4().hex[:12]}"
    partial.mkdir()
    return partial


def part_name(number: int) -> str:
    """File name of partition ``number``."""
    return f"part.{number:05d}.parquet"


def write_part(folder: str | os.PathLike[str], number: int, frame: pd.DataFrame) -> Path:
    """Write one partition's rows (a task does this); atomic per file."""
    final = Path(folder) / part_name(number)
    return atomic.write(final, lambda tmp: frame.to_parquet(tmp, index=False))


def finish(partial: Path, target: Path, n_parts: int, *, overwrite: bool) -> Path:
    """Rename the complete temporary folder to ``target`` (replacing it if allowed).

    Raises
    ------
    DataError
        If a partition file is missing (the run did not complete).
    """
    missing = [part_name(i) for i in range(n_parts) if not (partial / part_name(i)).is_file()]
    if missing:
        raise errors.DataError(
            f"partition file {missing[0]} is missing from {partial}; the output is incomplete"
        )
    if target.exists() and any(target.iterdir()) and not overwrite:
        # the folder appeared while the run went on
        raise errors.TargetError(errors.TARGET_NOT_EMPTY.format(label="rows_out=", path=target))
    return atomic.swap_folder(partial, target)


def abandon(partial: Path) -> None:
    """Remove the temporary folder of a run that failed."""
    shutil.rmtree(partial, ignore_errors=True)
