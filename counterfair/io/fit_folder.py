"""Folders that hold a fitted model without pickle: writing, checksums, reading back.

A saved fit is a folder::

    manifest.json   format, format version, counterfair version, kind, sha256 of every file
    scm.json        the SCM document (:mod:`counterfair.model.scm_document`)
    fit.json        protected levels, seed, back end, seconds, max tree depth,
                    subsample record, method (nuts or pathfinder)
    posterior.nc    the arviz InferenceData (posterior, sample stats), netCDF (h5netcdf)
    data.json       the training rows (exact: dtypes, categories, index, floats by repr)
    model.stan      the generated Stan program, as text (for reading; never needed to load)

Folders are written to a temporary sibling and renamed into place, so a target is
either absent, the old folder, or the complete new one. This module does not import
:mod:`counterfair.inference.fit` (whose ``Fit.save`` calls it); :mod:`counterfair.io.load`
reads folders back into objects.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from counterfair import atomic, errors
from counterfair._version import __version__

if TYPE_CHECKING:
    from counterfair.inference.fit import Fit

FORMAT = "counterfair-saved"
"""The ``format`` of a manifest."""

FORMAT_VERSION = 1
"""Version of the saved-folder format this counterfair writes and reads."""

MANIFEST = "manifest.json"
NETCDF_ENGINE = "h5netcdf"


def sha256(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_json(path: Path, document: Any) -> None:
    """Write ``document`` as indented UTF-8 JSON."""
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def check_target(
    path: str | os.PathLike[str], *, overwrite: bool, label: str = ""
) -> Path:
    """The one check of an output folder, before anything is written; returns its path.

    Every writer of a folder (saved fits and learners, the command line's run folders,
    a Dask run's ``rows_out=``) asks it first.

    Raises
    ------
    TargetError
        If ``path`` is a file, or a non-empty folder and ``overwrite`` is false (the
        message starts with ``label``, e.g. ``"rows_out="``). It is a
        ``FileExistsError`` and a :class:`~counterfair.errors.DataError`.
    """
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise errors.TargetError(errors.TARGET_NOT_A_FOLDER.format(label=label, path=target))
    if target.is_dir() and any(target.iterdir()) and not overwrite:
        raise errors.TargetError(errors.TARGET_NOT_EMPTY.format(label=label, path=target))
    return target


def write_folder(
    path: str | os.PathLike[str],
    kind: str,
    fill: Callable[[Path], None],
    *,
    overwrite: bool,
) -> Path:
    """Write a saved folder atomically: ``fill(tmp)`` writes the files, then the manifest.

    Returns the folder's path.
    """
    target = Path(path)
    check_target(target, overwrite=overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, atomic.default_mode(directory=True))
    try:
        fill(tmp)
        files = {
            p.relative_to(tmp).as_posix(): sha256(p)
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        write_json(
            tmp / MANIFEST,
            {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "counterfair_version": __version__,
                "kind": kind,
                "files": files,
            },
        )
        atomic.swap_folder(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def read_manifest(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a saved folder's manifest: format, version and every checksum.

    Raises
    ------
    DataError
        If the folder or manifest is missing, the format version is newer than
        this counterfair reads (both versions named), or a file is missing or its
        sha256 differs from the manifest (the file named).
    """
    folder = Path(path)
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise errors.DataError(f"{folder} is not a saved counterfair folder: no {MANIFEST}")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise errors.DataError(f"{manifest_path} is not valid JSON: {error}") from error
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise errors.DataError(f"{manifest_path}: format is not {FORMAT!r}")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise errors.DataError(
            f"{folder} has format version {version!r} (written by counterfair "
            f"{manifest.get('counterfair_version')}); this counterfair ({__version__}) reads "
            f"format versions up to {FORMAT_VERSION}; upgrade counterfair"
        )
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise errors.DataError(f"{manifest_path}: no list of files")
    for name, digest in files.items():
        file = folder / name
        if not file.is_file():
            raise errors.DataError(f"{folder}: file {name} listed in the manifest is missing")
        if sha256(file) != digest:
            raise errors.DataError(
                f"{folder}: checksum mismatch for {name} (the file was truncated or edited "
                "after saving); refusing to load it"
            )
    return manifest


# ---------------------------------------------------------------------- fits
def fill_fit(fit: Fit, folder: Path) -> None:
    """Write the files of a fit into ``folder`` (see the module docstring)."""
    write_json(folder / "scm.json", fit.scm.to_dict())
    write_json(
        folder / "fit.json",
        {
            "levels": {node: list(levels) for node, levels in fit.encoding.levels.items()},
            "continuous": sorted(fit.encoding.continuous),
            "seed": fit.seed,
            "backend": fit.backend,
            "seconds": fit.seconds,
            "max_treedepth_hits": fit.diagnostics.max_treedepth_hits,
            "subsample": fit.subsample,
            "missing": fit.missing,
            "method": fit.method,
            "integrated": list(fit.integrated),
            "quadrature": None if fit.quadrature is None else fit.quadrature.as_dict(),
        },
    )
    fit.idata.to_netcdf(str(folder / "posterior.nc"), engine=NETCDF_ENGINE)
    write_json(folder / "data.json", frame_to_dict(fit.data))
    (folder / "model.stan").write_text(
        fit.scm.stan_code(integrate=fit.integrated, holes=fit.holes), encoding="utf-8"
    )


def save_fit(fit: Fit, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Save a fit to the folder ``path`` (see :meth:`counterfair.Fit.save`)."""
    return write_folder(path, "fit", lambda folder: fill_fit(fit, folder), overwrite=overwrite)


def _column_to_dict(series: pd.Series | pd.Index) -> dict[str, Any]:
    if isinstance(series.dtype, pd.CategoricalDtype):
        values = pd.Categorical(series)
        return {
            "dtype": "category",
            "categories": values.categories.tolist(),
            "ordered": bool(values.ordered),
            "codes": values.codes.tolist(),
        }
    return {"dtype": str(series.dtype), "values": series.tolist()}


def _column_from_dict(entry: Mapping[str, Any]) -> pd.Categorical | np.ndarray:
    if entry["dtype"] == "category":
        return pd.Categorical.from_codes(
            entry["codes"], categories=entry["categories"], ordered=entry["ordered"]
        )
    return pd.array(entry["values"], dtype=entry["dtype"])


def frame_to_dict(frame: pd.DataFrame) -> dict[str, Any]:
    """A data frame as JSON-ready columns, exactly: dtypes, categories, index, full floats.

    Python's JSON writes floats by ``repr``, which reads back to the same number.
    """
    columns = []
    for name in frame.columns:
        if not isinstance(name, str):
            raise errors.DataError(f"cannot save column {name!r}: column names must be strings")
        columns.append({"name": name, **_column_to_dict(frame[name])})
    index = {"name": frame.index.name, **_column_to_dict(frame.index)}
    return {"index": index, "columns": columns}


def frame_from_dict(document: Mapping[str, Any]) -> pd.DataFrame:
    """The data frame written by :func:`frame_to_dict`."""
    index_entry = document["index"]
    index = pd.Index(_column_from_dict(index_entry), name=index_entry["name"])
    return pd.DataFrame(
        {entry["name"]: _column_from_dict(entry) for entry in document["columns"]}, index=index
    )


def read_data(path: Path) -> pd.DataFrame:
    """Read a frame written by :func:`frame_to_dict` as JSON."""
    return frame_from_dict(json.loads(path.read_text(encoding="utf-8")))


def read_fit_parts(folder: Path) -> Mapping[str, Any]:
    """The JSON parts of a saved fit: the SCM document and ``fit.json``."""
    scm_doc = json.loads((folder / "scm.json").read_text(encoding="utf-8"))
    info = json.loads((folder / "fit.json").read_text(encoding="utf-8"))
    return {"scm": scm_doc, "info": info}
