"""Fitting an SCM: NUTS (or Pathfinder) on the rows, with a warm start for many rows.

:func:`fit` is what :meth:`counterfair.SCM.fit` runs: it checks the options, then
:func:`fit_scm` checks and encodes the rows at their door (a stratified subsample
above ``max_rows``), generates the Stan data, samples, checks scales and
convergence, and returns a :class:`~counterfair.Fit`.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.inference import scales
from counterfair.inference.diagnostics import diagnose, warn_on_problems
from counterfair.inference.fit import Fit
from counterfair.inference.pathfinder import (
    check_method,
    check_pathfinder_backend,
    pathfinder_draws,
    refuse_nuts_options,
    run_pathfinder,
)
from counterfair.inference.quadrature_nodes import QuadratureRule, choose_nodes, default_rule
from counterfair.inference.starts import NUTS_WARMUP, default_warmup, fit_inits
from counterfair.inference.starts import choose_start as _warm_start
from counterfair.inference.training_latents import add_training_latents, drawn_after_sampling
from counterfair.logs import progress_enabled
from counterfair.model.data_levels import with_levels_from_data
from counterfair.model.encoding import Encoding
from counterfair.model.identification import convergence_hint
from counterfair.model.params import ParamDraws
from counterfair.model.terms import group_codes
from counterfair.options import DEFAULT_MAX_ROWS
from counterfair.rows.missing import (
    TAIL_SHARE,
    check_missing_policy,
    drop_incomplete,
    hole_plan,
    model_record,
    scm_columns,
)
from counterfair.rows.subsample import fit_rows
from counterfair.rows.validated import Rows, check_frame
from counterfair.stan.anchored_recovery import add_anchored_latents
from counterfair.stan.anchoring import all_anchors_of
from counterfair.stan.backend import get_backend, resolve_backend_name
from counterfair.stan.data import coords_and_dims, fit_data
from counterfair.stan.holes import draw_name, mis_name, summed_count, top_name, touched_latents
from counterfair.stan.inits import latent_inits
from counterfair.stan.integrated import (
    LATENTS_MODES,
    integrated_latents,
    nonfinite_rows,
    quadrature_data,
)
from counterfair.stan.integrated_pairs import pair_quadrature_data, pairs_of
from counterfair.stan.interface import SamplerRun
from counterfair.stan.laplace_start import LaplaceStart
from counterfair.stan.warm_start import WarmStart

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

__all__ = ["Fit", "fit", "fit_scm", "strata_columns", "training_rows"]

def fit(
    scm: SCM,
    data: pd.DataFrame,
    *,
    chains: int | None = None,
    warmup: int | None = None,
    draws: int | None = None,
    seed: int | None = None,
    backend: str = "auto",
    progress: bool | None = None,
    warm_start: bool | str = "auto",
    subsample: int | None = None,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    method: Literal["nuts", "pathfinder"] = "nuts",
    latents: str = "auto",
    missing: str = "error",
    **sampler_args: Any,
) -> Fit:
    """Fit ``scm`` to ``data``: what :meth:`counterfair.SCM.fit` runs (see it for the options).

    Checks the options of the method first: NUTS defaults to 4 chains of 500 + 500
    iterations; Pathfinder refuses NUTS-only options and the PyStan back end, and
    integrated latents (``latents="auto"`` then samples them jointly).
    """
    check_method(method)
    if latents not in LATENTS_MODES:
        raise ValueError(f"latents must be one of {list(LATENTS_MODES)}, got {latents!r}")
    if method == "pathfinder" and latents == "integrated":
        raise ValueError(
            "latents='integrated' is a NUTS option: Pathfinder approximates the joint "
            "program; drop one of them"
        )
    dropped = None
    policy = check_missing_policy(missing)
    if policy == "drop" and isinstance(data, pd.DataFrame):
        data, dropped = drop_incomplete(data, scm)
    holes: dict[str, str] | None = None
    if policy == "model":
        if warm_start not in ("auto", False):
            raise ValueError(
                f"warm_start={warm_start!r} is not used with missing='model': the Laplace "
                "start and the pilot fit assume complete rows; leave warm_start='auto'"
            )
        frame = check_frame(data)
        counts = {c: int(n) for c, n in frame[scm_columns(scm, frame)].isna().sum().items()}
        holes = hole_plan(scm, counts)
        dropped = model_record(frame, scm, holes)
    if isinstance(data, pd.DataFrame):  # levels left to the data are read once, here
        scm = with_levels_from_data(scm, data)
    if method == "pathfinder":
        refuse_nuts_options(
            {
                "chains": chains,
                "warmup": warmup,
                "warm_start": None if warm_start in ("auto", False) else warm_start,
                "progress": True if progress else None,
                **sampler_args,
            }
        )
        check_pathfinder_backend(backend)
        result = fit_scm(
            scm,
            data,
            chains=1,
            warmup=0,
            draws=pathfinder_draws(draws),
            seed=seed,
            backend=backend,
            progress=False,
            warm_start=False,
            subsample=subsample,
            max_rows=max_rows,
            method="pathfinder",
            latents=latents,
            holes=holes,
        )
    else:
        result = fit_scm(
            scm,
            data,
            chains=4 if chains is None else chains,
            warmup=warmup,
            draws=500 if draws is None else draws,
            seed=seed,
            backend=backend,
            progress=progress,
            warm_start=warm_start,
            subsample=subsample,
            max_rows=max_rows,
            latents=latents,
            holes=holes,
            **sampler_args,
        )
    # what missing='drop' left out, or what missing='model' modelled, kept with the fit
    return result if dropped is None else dataclasses.replace(result, missing=dropped)


def fit_scm(
    scm: SCM,
    data: pd.DataFrame,
    *,
    chains: int,
    warmup: int | None,
    draws: int,
    seed: int | None,
    backend: str,
    progress: bool | None,
    warm_start: bool | str = "auto",
    subsample: int | None = None,
    max_rows: int | None = DEFAULT_MAX_ROWS,
    method: str = "nuts",
    latents: str = "auto",
    holes: dict[str, str] | None = None,
    **sampler_args: Any,
) -> Fit:
    """Fit ``scm`` to ``data`` by NUTS (or Pathfinder); see :meth:`counterfair.SCM.fit`.

    With ``method="pathfinder"`` (options checked by :func:`fit`), ``draws`` is the
    number of approximate draws and ``chains``, ``warmup`` and the sampler
    arguments are not used. ``holes``: ``missing="model"``'s plan
    (:func:`counterfair.rows.missing.hole_plan`); the rows keep their missing values.
    """
    holes = dict(holes or {})
    rows, subsample_info = training_rows(
        scm, data, subsample=subsample, max_rows=max_rows, seed=seed,
        missing="model" if holes else "error",
    )
    holes = {node: kind for node, kind in holes.items() if node in rows.holes}
    scm, rows = learn_terms(scm, rows)
    stan_data = fit_data(scm, rows, holes=holes)
    scales.warn_on_scales(scm, rows)
    if method == "pathfinder":
        if latents == "auto":
            for name in scm.latents:
                logger.info(
                    "latent %r sampled jointly: Pathfinder approximates the joint program "
                    "(integrated latents are a NUTS option)", name,
                )
        return _pathfinder_fit(
            scm, rows, stan_data, draws, seed, backend, subsample_info, holes
        )
    integrate = _without_touched(
        scm, integrated_latents(scm, latents, resolve_backend_name(backend)), holes, latents
    )
    start = (
        None
        if holes
        else _warm_start(
            scm, rows, stan_data, warm_start, backend, chains, warmup, seed, sampler_args,
            integrate,
        )
    )
    if warmup is None:  # chains the user started elsewhere than the Laplace start's
        # draws get the pilot's warm-up length: their burn-in is not known to be short
        warmup = NUTS_WARMUP if "init" in sampler_args else default_warmup(start)
    rule = _quadrature_rule(scm, rows, start, seed) if integrate else None
    if rule is not None:
        stan_data = {**stan_data, **quadrature_data(rule.nodes, rule.newton)}
    if pairs_of(scm, integrate):  # two latents per row: the fixed rule (PAIR_NODES per axis)
        stan_data = {**stan_data, **pair_quadrature_data()}
    run = _sample(
        scm,
        rows,
        stan_data,
        start,
        backend,
        budget=_Budget(chains=chains, warmup=warmup, draws=draws, seed=seed, progress=progress),
        sampler_args=sampler_args,
        integrate=integrate,
        holes=holes,
    )
    diagnostics = diagnose(
        run.idata,
        scm.parameter_names(),
        # the sampled missing values are row-level unknowns, checked with the latents
        [*scm.latents, *(mis_name(n) for n, kind in holes.items() if kind == "sample")],
        max_depth=int(sampler_args.get("max_depth", 10)),
    )
    warn_on_problems(diagnostics, rhat_hint=convergence_hint(scm))
    _check_count_sums(run.idata, scm, holes, stan_data)
    summary, *details = str(diagnostics).splitlines()
    logger.info("%s", summary)  # the problems themselves are warned (ConvergenceWarning)
    for line in details:
        logger.debug("%s", line)
    return Fit(
        scm=scm,
        idata=run.idata,
        encoding=_encoding(rows),
        data=rows.frame,
        seconds=run.seconds + (start.seconds if start is not None else 0.0),
        backend=run.backend,
        seed=seed,
        diagnostics=diagnostics,
        _backend_name=backend,
        warm_start=start,
        subsample=subsample_info,
        integrated=integrate,
        quadrature=rule,
        _rows=rows,
    )


def _check_count_sums(
    idata: Any, scm: SCM, holes: dict[str, str], stan_data: dict[str, Any]
) -> None:
    """Warn, naming the node, when a summed count's last count ``K`` holds more than
    :data:`~counterfair.rows.missing.TAIL_SHARE` of some row's posterior in some draw:
    the sum over ``0..K`` may then have cut off mass that matters."""
    for node, kind in holes.items():
        if kind != "sum" or not summed_count(scm, node):
            continue
        share = float(np.max(idata.posterior[top_name(node)].values))
        bound = int(stan_data[f"K_{node}"])
        logger.info(
            "missing='model': %r summed over 0..%d; the largest posterior share of %d in a "
            "row is %.1e", node, bound, bound, share,
        )
        if share > TAIL_SHARE:
            warnings.warn(
                f"missing='model' summed the missing counts of {node!r} over 0..{bound} "
                f"(twice the largest observed count plus 10), and {bound} holds "
                f"{share:.1e} of some row's posterior (above {TAIL_SHARE:.0e}): larger "
                "counts are likely there and were cut off; check those rows, or use "
                "missing='drop'",
                errors.ConvergenceWarning,
                stacklevel=3,
            )


def _without_touched(
    scm: SCM, integrate: tuple[str, ...], holes: dict[str, str], latents: str
) -> tuple[str, ...]:
    """``integrate`` without the latents that ``missing="model"``'s holes touch: sampled
    jointly, with one log line each (``latents="auto"``), or a ValueError naming them
    (``latents="integrated"``)."""
    touched = touched_latents(scm, holes)
    kept = tuple(name for name in integrate if name not in touched)
    for name in integrate:
        if name not in touched:
            continue
        if latents == "integrated":
            raise ValueError(
                f"latent {name!r} cannot be integrated out: {touched[name]!r} has missing "
                "values, which missing='model' samples with the latent; use latents='auto'"
            )
        logger.info(
            "latent %r sampled jointly: %r has missing values (missing='model' samples "
            "them with the latent)", name, touched[name],
        )
    return kept


def _quadrature_rule(
    scm: SCM, rows: Rows, start: WarmStart | LaplaceStart | None, seed: int | None
) -> QuadratureRule:
    """The nodes of an integrated fit: checked at the start's draws when there are some
    (:func:`counterfair.inference.quadrature_nodes.choose_nodes`), else the default."""
    if start is None or start.draws is None:
        return default_rule("the default: no pilot fit whose draws the check could use")
    names = scm.parameter_names()
    draws = ParamDraws({k: v for k, v in start.draws.items() if k in names})
    source = "the Laplace approximation's" if isinstance(start, LaplaceStart) else "the pilot's"
    return choose_nodes(scm, draws, rows.codes, rows.values(), seed=seed, source=source)


def training_rows(
    scm: SCM,
    data: pd.DataFrame,
    *,
    subsample: int | None,
    max_rows: int | None,
    seed: int | None,
    missing: str = "error",
) -> tuple[Rows, dict[str, Any] | None]:
    """The rows NUTS runs on, checked at the door (:meth:`Rows.check`) and copied.

    The protected attributes' encoding is learned from all the rows given, so that
    every level of the user's data is known to the fit even when NUTS runs on a
    stratified subsample (:func:`counterfair.rows.subsample.fit_rows`). ``missing``:
    ``"model"`` lets observed nodes hold missing values (:attr:`Rows.holes`).
    """
    rows = Rows.check(data, scm, missing=missing)
    for column, mask in rows.holes.items():
        if np.asarray(mask).all():
            raise errors.DataError(
                f"column {column!r} has no value in any row: missing='model' needs "
                "some rows that hold it"
            )
    rows, info = fit_rows(
        rows, strata_columns(scm, rows.frame), subsample=subsample, max_rows=max_rows, seed=seed
    )
    # NUTS's rows are numbered 0..n-1, as the fit's own rows always were
    return dataclasses.replace(rows, positions=np.arange(len(rows), dtype=np.int64)).copy(), info


def learn_terms(scm: SCM, rows: Rows) -> tuple[SCM, Rows]:
    """The SCM with what its terms learn from the training rows (a smooth term's range),
    and the rows as checked for it (:meth:`counterfair.SCM.learned`)."""
    terms = [t.term for eq in scm.equations.values() for t in eq.bending]
    if not terms:
        return scm, rows
    needed = {p.name for eq in scm.equations.values() for t in eq.bending for p in t.parents}
    values: dict[str, Any] = dict(rows.values(needed & set(scm.observed)))
    values.update({node: rows.codes[node] for node in needed if node in rows.codes})
    for term in terms:
        column = getattr(term, "column", None)
        if column is not None:
            if column not in rows.frame.columns:
                raise errors.DataError(
                    f"column {column!r} is missing: it is the grouping column of {term.label}; "
                    f"columns: {list(rows.frame.columns)}"
                )
            values[column] = rows.frame[column].to_numpy()
    learned = scm.learned(values)
    learned_terms = [t.term for eq in learned.equations.values() for t in eq.bending]
    codes = {**rows.codes, **group_codes(learned_terms, rows.frame)}
    return learned, dataclasses.replace(rows, _scm=learned, codes=codes)


def _encoding(rows: Rows) -> Encoding:
    assert rows.encoding is not None  # rows checked for an SCM carry their encoding
    return rows.encoding


def _pathfinder_fit(
    scm: SCM,
    rows: Rows,
    stan_data: dict[str, Any],
    draws: int,
    seed: int | None,
    backend: str,
    subsample_info: dict[str, Any] | None,
    holes: dict[str, str] | None = None,
) -> Fit:
    """The fit by Pathfinder: its draws kept as one chain, no convergence warnings."""
    coords, dims = _coords_and_dims(scm, rows, holes or {})
    run = run_pathfinder(
        scm.stan_code(holes=holes),
        stan_data,
        draws=draws,
        seed=seed,
        coords=coords,
        dims=dims,
        init=_with_hole_inits(latent_inits(scm, stan_data, 1, seed), scm, stan_data, holes)[0],
    )
    add_anchored_latents(scm, run.idata, stan_data, _encoding(rows), rows.codes)
    return Fit(
        scm=scm,
        idata=run.idata,
        encoding=_encoding(rows),
        data=rows.frame,
        seconds=run.seconds,
        backend=run.backend,
        seed=seed,
        diagnostics=diagnose(run.idata, scm.parameter_names(), scm.latents),
        _backend_name=backend,
        subsample=subsample_info,
        method="pathfinder",
        _rows=rows,
    )


@dataclasses.dataclass(frozen=True)
class _Budget:
    """The NUTS run's size and seed, as :func:`fit_scm` resolved them."""

    chains: int
    warmup: int
    draws: int
    seed: int | None
    progress: bool | None


def _sample(
    scm: SCM,
    rows: Rows,
    stan_data: dict[str, Any],
    start: WarmStart | LaplaceStart | None,
    backend: str,
    *,
    budget: _Budget,
    sampler_args: dict[str, Any],
    integrate: tuple[str, ...] = (),
    holes: dict[str, str] | None = None,
) -> SamplerRun:
    """NUTS on the fit program, from the latents' inits and the warm start if any."""
    chains, warmup, draws, seed = budget.chains, budget.warmup, budget.draws, budget.seed
    burn = 0
    if isinstance(start, LaplaceStart):
        if "metric" in sampler_args and sampler_args["metric"] != "dense_e":
            raise ValueError(
                f"a Laplace-started fit uses a dense metric, not {sampler_args['metric']!r}; "
                "pass warm_start=False to choose the metric"
            )
        sampler_args.setdefault("init", start.inits)
        sampler_args.update(start.sampler_args(warmup))
        warmup, burn = start.split(warmup)
    if "init" not in sampler_args:
        sampler_args["init"] = _with_hole_inits(
            fit_inits(scm, stan_data, chains, seed, integrate), scm, stan_data, holes
        )
        if isinstance(start, WarmStart):
            sampler_args["init"] = [{**chain, **start.inits} for chain in sampler_args["init"]]
    if integrate and "metric" not in sampler_args:
        # a few dozen structural parameters, correlated (intercepts and level effects):
        # a dense metric cut the Adult fit's leapfrog steps per draw from 38 to 14
        sampler_args["metric"] = "dense_e"
    if isinstance(start, WarmStart):
        adapted = start.sampler_args(warmup)
        if sampler_args.get("metric") == "dense_e":
            adapted["inv_metric"] = np.diag(adapted["inv_metric"])
        sampler_args.update(adapted)
    coords, dims = _coords_and_dims(scm, rows, holes or {})
    run = get_backend(backend).sample(
        scm.stan_code(integrate=integrate, holes=holes),
        stan_data,
        chains=chains,
        warmup=warmup,
        draws=draws + burn,
        seed=seed,
        progress=progress_enabled(budget.progress),  # never a bar in a log file, a pipe or CI
        coords=coords,
        dims=dims,
        **sampler_args,
    )
    if burn:  # the Laplace start's burn-in: run after adaptation, dropped here
        run = dataclasses.replace(run, idata=_without_burn_in(run.idata, burn))
    anchored = set(all_anchors_of(scm, integrate))
    add_training_latents(scm, run.idata, rows, drawn_after_sampling(scm, integrate), anchored, seed)
    for latent in integrate:
        name = f"z_{latent}" if f"z_{latent}" in run.idata.posterior else latent
        bad = nonfinite_rows(run.idata.posterior[name].values)
        if bad:
            shown = ", ".join(str(i) for i in bad[:10]) + (", ..." if len(bad) > 10 else "")
            warnings.warn(
                f"the quadrature of latent {latent!r} was not finite for {len(bad)} training "
                f"row(s) (positions {shown}) in some draws: check those rows' values",
                errors.ConvergenceWarning,
                stacklevel=4,
            )
    add_anchored_latents(scm, run.idata, stan_data, _encoding(rows), rows.codes, integrate)
    return run


def _coords_and_dims(
    scm: SCM, rows: Rows, holes: dict[str, str]
) -> tuple[dict[str, list[Any]], dict[str, list[str]]]:
    """The fit's coords and dims; a sampled node's missing values run over
    ``<node>_missing_row``, the labels of the rows that miss it."""
    coords, dims = coords_and_dims(scm, _encoding(rows), rows.frame, ["row"])
    for node, kind in holes.items():
        if kind in ("sample", "sum"):
            labels = rows.frame.index[rows.holes[node]]
            coords[f"{node}_missing_row"] = [getattr(v, "item", lambda v=v: v)() for v in labels]
            name = mis_name(node) if kind == "sample" else draw_name(node)
            dims[name] = [f"{node}_missing_row"]
    return coords, dims


def _with_hole_inits(
    inits: list[dict[str, Any]],
    scm: SCM,
    stan_data: dict[str, Any],
    holes: dict[str, str] | None,
) -> list[dict[str, Any]]:
    """The chains' inits for a program with ``holes``: a sampled node's missing values
    at the mean of its observed ones; the latents the holes touch are sampled directly,
    so an anchored init (``z_<latent>``) is left to Stan's own."""
    if not holes:
        return inits
    touched = touched_latents(scm, holes)
    out = []
    for chain in inits:
        chain = {k: v for k, v in chain.items() if not (k.startswith("z_") and k[2:] in touched)}
        for node, kind in holes.items():
            if kind == "sample":
                n = int(stan_data[f"N_mis_{node}"])
                chain[mis_name(node)] = np.full(n, float(stan_data[f"loc_{node}"]))
        out.append(chain)
    return out


def _without_burn_in(idata: Any, burn: int) -> Any:
    """``idata`` without its first ``burn`` draws of every chain, draws renumbered from 0."""
    import arviz as az

    groups = {}
    for group in idata.groups():
        dataset = idata[group]
        if "draw" in dataset.dims:
            dataset = dataset.isel(draw=slice(burn, None))
            dataset = dataset.assign_coords(draw=np.arange(dataset.sizes["draw"]))
        groups[group] = dataset
    return az.InferenceData(**groups)  # a new one: setting a group adds it once more


def strata_columns(scm: SCM, data: pd.DataFrame) -> list[str]:
    """Columns a subsample of ``data`` is stratified on: protected x sink observed nodes.

    The sink observed nodes (observed nodes without children, the outcomes) that
    are columns of ``data``; continuous ones are cut into quantile bins
    (:func:`counterfair.rows.subsample.stratum_codes`).
    """
    sinks = [n for n in scm.observed if not scm.children(n) and n in data.columns]
    return [*scm.protected, *sinks]
