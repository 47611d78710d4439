"""The one data-folder search shared by every data set: where a data file is looked for.

No data file is stored in the repository. :func:`find_data_file` looks for one in, in order,

1. the ``data_home`` argument (``--data-dir`` on the command line), which may also name the
   file itself,
2. the folder named by the ``COUNTERFAIR_DATA`` environment variable (:data:`DATA_ENV_VAR`),
3. the per-user cache folder :func:`default_data_home`, where downloads go,

and, for a data set whose published sha256 is known (law school), downloads it into the cache
if it is in none of them; the download is kept only if its sha256 matches. A file that cannot
be found (or downloaded) is a :class:`FileNotFoundError` naming every folder searched, the
file and its public copy. A ``data_home`` that does not exist is an error of its own
(:func:`check_data_home`), never silently skipped.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.request
from pathlib import Path

from counterfair import atomic

__all__ = [
    "DATA_ENV_VAR",
    "MISSING_DATA_HOME",
    "check_data_home",
    "default_data_home",
    "find_data_file",
]

DATA_ENV_VAR = "COUNTERFAIR_DATA"
"""Environment variable naming a folder that holds the data files."""

MISSING_DATA_HOME = (
    "data folder {path} does not exist (given as data_home / --data-dir); give an existing "
    "folder, or leave it out to use ${env} ({env_value})"
)
"""Error when an explicitly given data folder does not exist (it is never silently skipped)."""

_DOWNLOAD_TIMEOUT = 30.0  # seconds, per blocking socket operation


class _ChecksumError(ValueError):
    """A downloaded file does not have the expected sha256."""


def default_data_home() -> Path:
    """Return the per-user cache folder, searched last and where downloads are kept.

    Returns
    -------
    pathlib.Path
        ``$XDG_CACHE_HOME/counterfair`` if ``XDG_CACHE_HOME`` is set to a non-empty value,
        otherwise ``~/.cache/counterfair``. The folder is not created.
    """
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "counterfair").absolute()


def check_data_home(data_home: str | os.PathLike[str] | None) -> None:
    """Raise if ``data_home`` is given but does not exist.

    Raises
    ------
    FileNotFoundError
        Naming the folder and the ``COUNTERFAIR_DATA`` fallback that was not used.
    """
    if data_home is None:
        return
    path = Path(data_home).expanduser()
    if not path.exists():
        raise FileNotFoundError(
            MISSING_DATA_HOME.format(
                path=path.absolute(),
                env=DATA_ENV_VAR,
                env_value=os.environ.get(DATA_ENV_VAR) or "not set",
            )
        )


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _download(url: str, dest: Path, *, timeout: float = _DOWNLOAD_TIMEOUT) -> None:
    """Write the body of ``url`` to ``dest`` (tests replace this function)."""
    request = urllib.request.Request(url, headers={"User-Agent": "counterfair"})
    with urllib.request.urlopen(request, timeout=timeout) as response, open(dest, "wb") as fh:
        while chunk := response.read(1 << 16):
            fh.write(chunk)


def _download_verified(url: str, filename: str, sha256: str, dest_dir: Path) -> Path:
    """Download ``url`` as ``dest_dir / filename`` and verify its sha256.

    The body goes to a temporary file in ``dest_dir``, which is moved into place only if its
    sha256 matches ``sha256`` and deleted otherwise.
    """
    dest_dir.mkdir(parents=True, exist_ok=True)

    def fetch(tmp: Path) -> None:
        _download(url, tmp, timeout=_DOWNLOAD_TIMEOUT)
        digest = _sha256(tmp)
        if digest != sha256:
            raise _ChecksumError(
                f"the downloaded file has sha256 {digest}, expected {sha256}; it was deleted"
            )

    return atomic.write(dest_dir / filename, fetch, suffix=".part")


def _candidate_folders(data_home: str | os.PathLike[str] | None) -> list[tuple[Path, str]]:
    """Folders to search, in order, each with a label saying where it came from."""
    candidates: list[tuple[Path, str]] = []
    if data_home is not None:
        candidates.append((Path(data_home).expanduser().absolute(), "data_home / --data-dir"))
    env = os.environ.get(DATA_ENV_VAR, "")
    if env:
        candidates.append((Path(env).expanduser().absolute(), f"${DATA_ENV_VAR}"))
    candidates.append((default_data_home(), "per-user cache, where downloads go"))
    unique: list[tuple[Path, str]] = []
    for folder, label in candidates:
        if all(folder != seen for seen, _ in unique):
            unique.append((folder, label))
    return unique


def _not_found_message(
    filename: str,
    folders: list[tuple[Path, str]],
    reason: str = "",
    *,
    url: str = "",
    sha256: str | None = None,
) -> str:
    searched = "; ".join(f"{folder} ({label})" for folder, label in folders)
    source = []
    if url:
        source.append(f"public copy: {url}")
    if sha256:
        source.append(f"sha256 {sha256}")
    put = f"Put {filename} ({', '.join(source)})" if source else f"Put {filename}"
    return (
        f"{filename} not found. Folders searched: {searched}.\n"
        + (f"{reason}\n" if reason else "")
        + f"{put} in one of these folders, "
        f"or set the {DATA_ENV_VAR} environment variable to the folder that holds it."
    )


def find_data_file(
    filename: str,
    data_home: str | os.PathLike[str] | None = None,
    *,
    url: str = "",
    sha256: str | None = None,
    download: bool = False,
) -> Path:
    """Locate the data file ``filename``, downloading it into the cache if allowed.

    Parameters
    ----------
    filename : str
        Name of the file, e.g. ``"law_data.csv"`` or ``"adult.data"``.
    data_home : str or os.PathLike or None, optional
        Folder holding the file, searched first; a path to the file itself is also accepted.
    url : str, optional
        Public copy of the file: named in the error message, and downloaded if ``download``.
    sha256 : str or None, optional
        sha256 of the published file; a download is kept only if it matches.
    download : bool, default False
        If the file is in none of the searched folders, download ``url`` into
        :func:`default_data_home` and verify its sha256 (both are then required). If False,
        never touch the network.

    Returns
    -------
    pathlib.Path
        Absolute path of the file, from the first of these that holds it: ``data_home``, the
        folder in the ``COUNTERFAIR_DATA`` environment variable, :func:`default_data_home`.

    Raises
    ------
    FileNotFoundError
        If ``data_home`` is given but does not exist; or if the file is in none of the folders
        and is not downloaded (``download`` False) or the download fails (no network, HTTP
        error, timeout, sha256 mismatch, unwritable cache...). The message lists every folder
        searched (and how it was chosen), the file name and where to get the file.
    ValueError
        If ``download`` is True without a ``url`` and a ``sha256``.

    Notes
    -----
    Files found locally are not checksummed; only downloads are.
    """
    if download and not (url and sha256):
        raise ValueError(f"downloading {filename} needs its url and sha256")
    check_data_home(data_home)
    if data_home is not None:
        direct = Path(data_home).expanduser()
        if direct.is_file():
            return direct.absolute()
    folders = _candidate_folders(data_home)
    for folder, _ in folders:
        path = folder / filename
        if path.is_file():
            return path
    if not download or not sha256:
        reason = "Automatic download is off (download=False)." if sha256 else ""
        raise FileNotFoundError(
            _not_found_message(filename, folders, reason, url=url, sha256=sha256)
        )
    cache = default_data_home()
    try:
        return _download_verified(url, filename, sha256, cache)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        reason = f"Downloading it from {url} into {cache} failed: {exc!r}."
        raise FileNotFoundError(
            _not_found_message(filename, folders, reason, url=url, sha256=sha256)
        ) from exc
