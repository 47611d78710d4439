"""cmdstanpy adapter of :class:`~counterfair.stan.interface.StanBackend`.

Executables are cached by program text: ``<cache>/<CmdStan version>/model_<hash>.stan``
with the executable beside it, where ``<cache>`` is ``$COUNTERFAIR_CACHE``,
else ``$XDG_CACHE_HOME/counterfair/cmdstan``, else ``~/.cache/counterfair/cmdstan``.
A program is compiled once per machine and CmdStan build (its path and the time
stamp of its ``main.o`` are part of the hash), whatever the interpreter; concurrent
processes wait for each other's compilation (file lock).
Sampler output goes to a temporary folder that is removed once the draws are read.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import arviz as az
import numpy as np

from counterfair import atomic
from counterfair.stan import integrated
from counterfair.stan.interface import CMDSTAN_ARGS, SamplerRun, translate_sampler_args

CACHE_ENV = "COUNTERFAIR_CACHE"
"""Environment variable naming the folder of compiled CmdStan executables."""


def cache_dir() -> Path:
    """Folder of compiled executables for the CmdStan installation in use."""
    import cmdstanpy

    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        base = Path(explicit)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = Path(xdg) / "counterfair" / "cmdstan"
    version = ".".join(str(v) for v in (cmdstanpy.cmdstan_version() or ("unknown",)))
    return base / f"cmdstan-{version}"


def program_stem(code: str) -> str:
    """File stem of a program's source and executable in the cache."""
    import cmdstanpy

    home = Path(os.path.realpath(cmdstanpy.cmdstan_path()))
    digest = hashlib.sha256()
    digest.update(code.encode())
    if integrated.uses_header(code):  # the C++ it includes is part of the program
        digest.update(integrated.header_text().encode())
    digest.update(str(home).encode())
    main = home / "src" / "cmdstan" / "main.o"  # changes when CmdStan is rebuilt
    if main.exists():
        stat = main.stat()
        digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
    return f"model_{digest.hexdigest()[:16]}"


@contextlib.contextmanager
def _quiet_cmdstanpy(level: int = logging.WARNING) -> Iterator[None]:
    """Hide cmdstanpy's log lines below ``level`` (compilation, chain start and end).

    Sampling passes ``logging.ERROR``: CmdStan's "non-fatal error during sampling"
    messages are rejected warm-up proposals; the fit's own diagnostics report what
    matters (divergences, R-hat, ESS) as ``ConvergenceWarning``.
    """
    from cmdstanpy.utils import get_logger

    logger = get_logger()  # installs cmdstanpy's handler first, so it cannot reset the level
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Exclusive lock on ``path`` (advisory; a no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # Windows: compilation races are then left to cmdstanpy
        yield
        return
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def executable(code: str) -> tuple[Path, float]:
    """Path of the compiled program (compiling it if needed) and the seconds spent compiling."""
    import cmdstanpy

    folder = cache_dir()
    folder.mkdir(parents=True, exist_ok=True)
    stem = program_stem(code)
    exe = folder / (stem + (".exe" if os.name == "nt" else ""))
    if exe.exists():
        return exe, 0.0
    with _file_lock(folder / f"{stem}.lock"):
        if exe.exists():  # another process compiled it while we waited
            return exe, 0.0
        start = time.perf_counter()
        source = folder / f"{stem}.stan"
        atomic.write(source, code)
        with _quiet_cmdstanpy():
            built = cmdstanpy.compile_stan_file(source, **_header_options(code))
        if Path(built) != exe:
            shutil.move(built, exe)
        return exe, time.perf_counter() - start


def _header_options(code: str) -> dict[str, Any]:
    """cmdstanpy's compile options for a program that calls the integrated-latent C++.

    CmdStan's makefile includes ``USER_HEADER``; the reduced makefile of the offline kit
    (``COUNTERFAIR_CMDSTAN_KIT``) has no such rule but appends ``CXXFLAGS``, so there the
    header is force-included through it.
    """
    import cmdstanpy

    if not integrated.uses_header(code):
        return {}
    header = str(integrated.HEADER)
    makefile = Path(cmdstanpy.cmdstan_path()) / "makefile"
    try:
        first = makefile.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        first = ""
    if first.startswith("# Reduced CmdStan makefile"):
        return {
            "stanc_options": {"allow-undefined": True},
            "cpp_options": {"CXXFLAGS": f"-include {shlex.quote(header)}"},
        }
    return {"user_header": header}


def _model(code: str) -> tuple[Any, float]:
    import cmdstanpy

    exe, seconds = executable(code)
    with _quiet_cmdstanpy():
        return cmdstanpy.CmdStanModel(exe_file=str(exe)), seconds


@dataclass(frozen=True)
class Adaptation:
    """What a short run learned: metric, step size, parameter layout and means.

    Attributes
    ----------
    inv_metric : numpy.ndarray
        Adapted diagonal inverse metric, averaged over chains (unconstrained order).
    step_size : float
        Adapted step size, averaged over chains.
    layout : list of (str, int)
        The program's parameters in unconstrained order with their sizes.
    means : dict of str to numpy.ndarray
        Posterior means of the parameters (constrained scale).
    draws : dict of str to numpy.ndarray
        The draws (chains stacked) of the variables asked for with ``keep``.
    """

    inv_metric: np.ndarray
    step_size: float
    layout: list[tuple[str, int]]
    means: dict[str, Any]
    draws: dict[str, np.ndarray] = field(default_factory=dict)


def _parameter_layout(fit: Any, size: int) -> list[tuple[str, int]]:
    """The parameters block (the first ``size`` unconstrained entries), in order."""
    layout, total = [], 0
    for name, variable in fit.metadata.stan_vars.items():
        if total == size:
            break
        count = int(np.prod(variable.dimensions)) if variable.dimensions else 1
        layout.append((name, count))
        total += count
    if total != size:
        raise RuntimeError(f"could not lay out {size} unconstrained parameters: {layout}")
    return layout


@contextlib.contextmanager
def _nuts(
    model: Any,
    data: Mapping[str, Any],
    chains: int,
    warmup: int,
    draws: int,
    seed: int | None,
    progress: bool,
    **args: Any,
) -> Iterator[Any]:
    """Run NUTS, chains in parallel, into a temporary folder; yield the fit while its
    output files exist (they are removed afterwards)."""
    output = tempfile.mkdtemp(prefix="counterfair-cmdstan-")
    try:
        with _quiet_cmdstanpy(logging.ERROR):
            yield model.sample(
                data=dict(data),
                chains=chains,
                parallel_chains=chains,
                iter_warmup=warmup,
                iter_sampling=draws,
                seed=seed,
                show_progress=progress,
                output_dir=output,
                **args,
            )
    finally:
        shutil.rmtree(output, ignore_errors=True)


_STAT_NAMES = {
    "divergent": "diverging",
    "n_leapfrog": "n_steps",
    "treedepth": "tree_depth",
    "stepsize": "step_size",
    "accept_stat": "acceptance_rate",
}
_STAT_DTYPES: dict[str, Any] = {
    "divergent__": bool,
    "n_leapfrog__": np.int64,
    "treedepth__": np.int64,
}


_BLOCK_BYTES = 32 * 2**20
"""Bytes of CSV text parsed at a time when reading draws (bounds the parser's memory)."""


def _parse_block(lines: list[bytes], columns: int) -> np.ndarray:
    """Parse CSV lines of draws with the parser cmdstanpy uses (same doubles, bit for bit)."""
    from cmdstanpy.utils.stancsv import csv_bytes_list_to_numpy

    block = csv_bytes_list_to_numpy(lines)
    if block.shape[1] != columns:
        raise ValueError(f"expected {columns} columns of draws, found {block.shape[1]}")
    return block


def read_draws(fit: Any) -> np.ndarray:
    """The ``(draw, chain, column)`` array of a NUTS fit's sampling draws, read block by block.

    cmdstanpy reads each chain's CSV text whole, joins it and parses it into a frame
    before copying it into its array (several times the draws' size at once); this
    reads at most ``_BLOCK_BYTES`` of text at a time into one preallocated array, with
    the same parser, so the values are the same.
    """
    n_draws, n_chains = fit.num_draws_sampling, fit.chains
    columns = len(fit.column_names)
    raw = np.empty((n_draws, n_chains, columns), dtype=np.float64)
    for chain, path in enumerate(fit.runset.csv_files):
        row, header, pending, size = 0, False, [], 0
        with open(path, "rb") as handle:
            for line in handle:
                if line.startswith(b"#"):
                    continue
                if not header:
                    header = True
                    continue
                pending.append(line)
                size += len(line)
                if size >= _BLOCK_BYTES:
                    block = _parse_block(pending, columns)
                    raw[row : row + len(block), chain] = block
                    row, pending, size = row + len(block), [], 0
        if pending:
            block = _parse_block(pending, columns)
            raw[row : row + len(block), chain] = block
            row += len(block)
        if row != n_draws:
            raise ValueError(f"{path}: expected {n_draws} draws, found {row}")
    return raw


def draws_to_idata(
    fit: Any,
    *,
    raw: np.ndarray | None = None,
    coords: Mapping[str, Sequence[Any]] | None = None,
    dims: Mapping[str, list[str]] | None = None,
) -> az.InferenceData:
    """InferenceData (``posterior`` and ``sample_stats``) of a cmdstanpy NUTS fit.

    The same variables, values, dims and coords as ``az.from_cmdstanpy(posterior=fit)``
    (without warm-up), built with one copy per variable from cmdstanpy's
    ``(draw, chain, column)`` array. ``az.from_cmdstanpy`` goes through
    ``fit.stan_variable``, which copies the whole draws array (all columns) once per
    variable; with a per-row latent of 17,432 rows that multiplied the peak memory.

    Parameters
    ----------
    fit : cmdstanpy.CmdStanMCMC
        The sampler's result (warm-up draws, if saved, are left out).
    raw : numpy.ndarray, optional
        Its ``(draw, chain, column)`` sampling draws (:func:`read_draws`); by default
        ``fit.draws()``.
    coords, dims : mapping, optional
        Passed to :func:`arviz.data.base.dict_to_dataset`.

    Returns
    -------
    arviz.InferenceData
    """
    import cmdstanpy
    from arviz.data.base import dict_to_dataset
    from stanio.reshape import VariableType

    if raw is None:
        raw = fit.draws()  # (draw, chain, column), a view of cmdstanpy's array
    n_draws, n_chains = raw.shape[:2]
    posterior: dict[str, np.ndarray] = {}
    for name, var in fit.metadata.stan_vars.items():
        if var.type == VariableType.SCALAR:
            block = raw[..., var.start_idx : var.end_idx]
            shaped = block.reshape(n_draws, n_chains, *var.dimensions, order="F")
            posterior[name] = np.array(np.swapaxes(shaped, 0, 1), dtype=float, order="C")
        else:  # complex and tuple variables: cmdstanpy's own extraction
            values = fit.stan_variable(name)
            values = values.reshape((-1, n_chains, *values.shape[1:]), order="F")
            posterior[name] = np.swapaxes(values, 0, 1).copy()
    stats: dict[str, np.ndarray] = {}
    for item, var in fit.metadata.method_vars.items():
        block = raw[..., var.start_idx : var.end_idx]
        values = np.swapaxes(block.reshape(n_draws, n_chains, *var.dimensions, order="F"), 0, 1)
        key = re.sub("__$", "", item)
        stats[_STAT_NAMES.get(key, key)] = np.array(
            values, dtype=_STAT_DTYPES.get(item, float), order="C"
        )
    dims = {name: list(d) for name, d in (dims or {}).items() if name in posterior}
    used = {dim for d in dims.values() for dim in d}  # only the coords the variables use:
    # arviz keeps only those too, but handled every coordinate for every variable (the
    # 17,432 row labels took 0.5 s for a program without per-row variables)
    coords = {dim: values for dim, values in (coords or {}).items() if dim in used}
    return az.InferenceData(
        posterior=dict_to_dataset(posterior, library=cmdstanpy, coords=coords, dims=dims),
        sample_stats=dict_to_dataset(stats, library=cmdstanpy),
    )


class CmdStanPyBackend:
    """Adapter for cmdstanpy (needs a CmdStan installation)."""

    name = "cmdstanpy"

    def compile(self, code: str) -> float:
        """Compile ``code`` unless its executable is cached; return the seconds spent."""
        return executable(code)[1]

    def sample(
        self,
        code: str,
        data: Mapping[str, Any],
        *,
        chains: int,
        warmup: int,
        draws: int,
        seed: int | None,
        progress: bool,
        coords: Mapping[str, Sequence[Any]] | None = None,
        dims: Mapping[str, list[str]] | None = None,
        **sampler_args: Any,
    ) -> SamplerRun:
        """Sample with NUTS, chains in parallel processes; compile first if needed."""
        args = translate_sampler_args(sampler_args, CMDSTAN_ARGS)
        if "inv_metric" in args:
            args["inv_metric"] = {"inv_metric": np.asarray(args["inv_metric"]).tolist()}
        start = time.perf_counter()
        model, compiled = _model(code)
        with _nuts(model, data, chains, warmup, draws, seed, progress, **args) as fit:
            saved_warmup = bool(fit.metadata.cmdstan_config.get("save_warmup"))
            raw = None if saved_warmup else read_draws(fit)
            idata = draws_to_idata(fit, raw=raw, coords=coords, dims=dims)
            del raw
        return SamplerRun(
            idata=idata,
            seconds=time.perf_counter() - start,
            backend=self.name,
            compile_seconds=compiled,
        )

    def adapt(
        self,
        code: str,
        data: Mapping[str, Any],
        *,
        chains: int,
        warmup: int,
        draws: int,
        seed: int | None,
        init: Any = None,
        keep: Collection[str] = (),
    ) -> Adaptation:
        """A short run whose adapted metric, step size and means seed another run
        (and whose draws of the variables ``keep`` are returned)."""
        model, _ = _model(code)
        with _nuts(model, data, chains, warmup, draws, seed, False, inits=init) as fit:
            metric = np.asarray(fit.inv_metric, dtype=float).reshape(chains, -1).mean(axis=0)
            layout = _parameter_layout(fit, metric.size)
            means = {name: np.asarray(fit.stan_variable(name)).mean(axis=0) for name, _ in layout}
            step = float(np.mean(fit.step_size))
            kept = {name: np.asarray(fit.stan_variable(name), dtype=float) for name in keep}
        return Adaptation(
            inv_metric=metric, step_size=step, layout=layout, means=means, draws=kept
        )

    def log_density(
        self,
        code: str,
        data: Mapping[str, Any],
        params: Mapping[str, Any],
        *,
        jacobian: bool = True,
    ) -> float:
        """Log density at constrained ``params`` (Jacobian of the constraints if asked)."""
        model, _ = _model(code)
        with _quiet_cmdstanpy():
            table = model.log_prob(
                params=dict(params), data=dict(data), jacobian=jacobian, sig_figs=18
            )
        return float(table["lp__"].iloc[0])


def pathfinder_idata(
    fit: Any,
    coords: Mapping[str, Sequence[Any]] | None = None,
    dims: Mapping[str, list[str]] | None = None,
) -> az.InferenceData:
    """Pathfinder's approximate draws as an ``InferenceData`` of one chain.

    ``sample_stats`` holds ``lp`` (the model's log density, when computed) and
    ``diverging`` (all False: approximate draws have no transitions), so code that
    reads a NUTS fit's statistics works on it.
    """
    variables = fit.stan_variables()
    posterior = {name: np.asarray(values)[np.newaxis, ...] for name, values in variables.items()}
    n = next(iter(posterior.values())).shape[1] if posterior else 0
    stats: dict[str, Any] = {"diverging": np.zeros((1, n), dtype=bool)}
    if "lp__" in fit.column_names:
        stats["lp"] = np.asarray(fit.draws()[:, fit.column_names.index("lp__")])[np.newaxis, :]
    dims = {name: list(d) for name, d in (dims or {}).items() if name in posterior}
    return az.from_dict(
        posterior=posterior, sample_stats=stats, coords=dict(coords or {}), dims=dims
    )


def _json_inits(init: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if init is None else {k: np.asarray(v).tolist() for k, v in init.items()}


def run_pathfinder(
    code: str,
    data: Mapping[str, Any],
    *,
    draws: int,
    seed: int | None,
    coords: Mapping[str, Sequence[Any]] | None = None,
    dims: Mapping[str, list[str]] | None = None,
    init: Mapping[str, Any] | None = None,
    num_paths: int | None = None,
) -> SamplerRun:
    """Multi-path Pathfinder (cmdstanpy ``CmdStanModel.pathfinder``): ``draws`` approximate
    draws, importance-resampled over ``num_paths`` single paths (CmdStan's default 4)."""
    start = time.perf_counter()
    model, compiled = _model(code)
    output = tempfile.mkdtemp(prefix="counterfair-pathfinder-")
    try:
        with _quiet_cmdstanpy(logging.ERROR):
            fit = model.pathfinder(
                data=dict(data),
                draws=draws,
                num_paths=num_paths,
                seed=seed,
                inits=_json_inits(init),
                output_dir=output,
            )
            idata = pathfinder_idata(fit, coords, dims)
    finally:
        shutil.rmtree(output, ignore_errors=True)
    return SamplerRun(
        idata=idata,
        seconds=time.perf_counter() - start,
        backend=CmdStanPyBackend.name,
        compile_seconds=compiled,
    )
