"""Abduction: latents (paired with parameter sets) for rows, exactly or by MCMC.

What :meth:`counterfair.Fit.abduct` runs. The rows come through their door
(:meth:`counterfair.rows.Rows.check`; the training rows are the fit's own,
:attr:`counterfair.Fit.rows`), then one of three engines draws the latents: the
fit's own posterior draws for its training rows; exact abduction on a grid per row
(:mod:`counterfair.inference.exact_abduction`), chunk by chunk with draws keyed by
the rows' global positions; or the Stan abduction program (MCMC) on all rows at once.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import pandas as pd

from counterfair import errors
from counterfair.inference import exact_abduction, latent_problem
from counterfair.inference.abduction_result import (
    DEFAULT_CHAINS,
    DEFAULT_WARMUP,
    EXACT_DRAWS_PER_SET,
    MIN_DRAWS_PER_CHAIN,
    Abduction,
)
from counterfair.inference.diagnostics import warn_on_divergences
from counterfair.inference.missing_rows import abduct_by_pattern, fill_missing, hole_patterns
from counterfair.logs import progress_enabled
from counterfair.model.params import ParamDraws
from counterfair.rng import RowRandom
from counterfair.rows import chunking
from counterfair.rows.validated import Rows
from counterfair.stan.backend import get_backend
from counterfair.stan.data import abduction_data, conditioning_nodes, coords_and_dims
from counterfair.stan.families import stan_family
from counterfair.stan.holes import draw_name, mis_name

if TYPE_CHECKING:  # types only: Fit.abduct delegates here
    from counterfair.inference.fit import AbductionMethod, Fit
    from counterfair.model.scm import SCM

LOADED_BACKEND = "none (loaded from a saved folder)"
"""Back end name of a fit loaded by :func:`counterfair.load`: it runs no Stan program."""


NEEDS_MCMC = (
    "abducting these rows needs MCMC (the Stan abduction program), conditioning on "
    "{conditioned}: engine='mcmc' (or an MCMCAbduction) was asked for or exact abduction "
    "does not apply; this fit "
    "was loaded from a saved folder and runs no Stan program. Use engine='auto' or 'exact' "
    "with nodes exact abduction supports (counterfair.inference.exact_abduction), or refit the SCM"
)
"""Error when a loaded fit would need MCMC to abduct new rows."""


MISSING_CONDITIONING_COLUMN = (
    "cannot condition the latents on {node!r}: data has no column {column!r}; "
    "columns: {columns}. Pass condition_on= without {node!r} (e.g. condition_on={suggestion})"
)
"""Error when a conditioning node, or one of its observed parents, is not in the data."""


def default_conditioning(scm: SCM, data: pd.DataFrame) -> tuple[str, ...]:
    """The default conditioning set: the latents' children present in ``data``.

    A child counts as present when its column and the columns of its observed
    parents are all in ``data``. Every function that abducts (:meth:`Fit.abduct`,
    :meth:`Fit.latents`, :meth:`Fit.counterfactual`,
    :func:`counterfair.audit.counterfactual_fairness`, :class:`FairLearner`'s
    predictions) uses this same rule when ``condition_on`` is not given, so rows
    without the outcome (a test set, a production payload) are abducted from
    what they hold.
    """
    return tuple(
        node
        for node in conditioning_nodes(scm, None)
        if node in data.columns
        and all(t.parent in data.columns for t in scm.equations[node].observed)
    )


def _check_conditioning(scm: SCM, data: pd.DataFrame, conditioned: Sequence[str]) -> None:
    """Every conditioning node and its observed parents must be columns of ``data``."""
    present = default_conditioning(scm, data)
    for node in conditioned:
        for column in (node, *(t.parent for t in scm.equations[node].observed)):
            if column not in data.columns:
                raise errors.DataError(
                    MISSING_CONDITIONING_COLUMN.format(
                        node=node,
                        column=column,
                        columns=list(map(str, data.columns)),
                        suggestion=list(present),
                    )
                )


def _thin(
    params: ParamDraws, latents: dict[str, np.ndarray], n_samples: int, seed: int | None
) -> tuple[ParamDraws, dict[str, np.ndarray]]:
    """Keep ``n_samples`` joint samples (the same ones for parameters and latents), seeded."""
    pick = np.sort(np.random.default_rng(seed).choice(params.n, n_samples, replace=False))
    return params.take(pick), {k: v[pick] for k, v in latents.items()}


def _count(name: str, value: object, least: int) -> None:
    """``value`` must be an integer (not a bool) of at least ``least``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        what = "a positive integer" if least else "an integer of at least 0"
        raise ValueError(f"MCMCAbduction: {name} must be {what}, got {value!r}")


@dataclass(frozen=True)
class MCMCAbduction:
    """The MCMC engine of abduction, with its settings: ``engine=MCMCAbduction(...)``.

    The Stan abduction program samples the latents of all the rows at once given the
    parameter sets (one program: not chunked, and not chunk-invariant). Pass it as
    ``engine=`` to :meth:`counterfair.Fit.abduct` (and to whatever abducts rows:
    ``Fit.counterfactual``, ``counterfactual_predictions(abduction_args=...)``,
    ``FairLearner(abduction_args=...)``); ``engine="mcmc"`` is ``MCMCAbduction()``.
    Its settings only matter when the program is sampled, so they exist only here:
    there is no way to give them to the exact engine.

    Parameters
    ----------
    chains : int
        Chains of the abduction program (default 2).
    warmup : int
        Warm-up iterations per chain (default 300).
    draws : int, optional
        Draws per chain; default: enough for ``n_samples`` over the parameter sets,
        at least 100.
    progress : bool, optional
        Show the sampler's progress bars; default: where a person watches
        (:mod:`counterfair.logs`).

    Raises
    ------
    ValueError
        If ``chains`` or ``draws`` is not a positive integer, ``warmup`` not an integer
        of at least 0, or ``progress`` neither a bool nor None.
    """

    chains: int = DEFAULT_CHAINS
    warmup: int = DEFAULT_WARMUP
    draws: int | None = None
    progress: bool | None = None

    def __post_init__(self) -> None:
        _count("chains", self.chains, 1)
        _count("warmup", self.warmup, 0)
        if self.draws is not None:
            _count("draws", self.draws, 1)
        if self.progress is not None and not isinstance(self.progress, bool):
            raise ValueError(
                f"MCMCAbduction: progress must be True, False or None, got {self.progress!r}"
            )


AbductionEngine = Literal["auto", "exact", "mcmc"] | MCMCAbduction
"""What ``engine=`` takes: a name, or the MCMC engine with its settings."""


UNKNOWN_ENGINE = (
    "engine must be 'auto', 'exact', 'mcmc' or an MCMCAbduction(chains=, warmup=, draws=, "
    "progress=) (counterfair.inference.abduct), got {engine!r}"
)


def mcmc_engine(engine: AbductionEngine) -> MCMCAbduction | None:
    """The MCMC settings ``engine`` asks for (``"mcmc"``: the defaults), or None for
    ``"auto"`` and ``"exact"``.

    Raises
    ------
    ValueError
        If ``engine`` is none of them (the message names what it takes).
    """
    if isinstance(engine, MCMCAbduction):
        return engine
    if isinstance(engine, str) and engine in ("auto", "exact", "mcmc"):
        return MCMCAbduction() if engine == "mcmc" else None
    raise ValueError(UNKNOWN_ENGINE.format(engine=engine))


def training_abduction(
    fit: Fit, n_samples: int | None, seed: int | None, rows: Rows | None = None
) -> Abduction:
    """The training rows' joint posterior draws (parameters, latents), thinned to
    ``n_samples``; ``rows``: a part of the training rows (their positions in them).

    For a fit of ``missing="model"`` the rows' missing values are filled per sample: a
    sampled node's by its posterior draws (``<node>_mis``, the same draws as the
    parameters), a node without children's by a draw from its equation given the
    sample's parents and latents (stream ``("missing", node)`` keyed by the row's
    position); :attr:`Abduction.holes` marks them.
    """
    params = fit.params()
    latents = {
        name: np.asarray(fit.idata.posterior[name].values).reshape(params.n, -1)
        for name in fit.scm.latents
    }
    holes = fit.holes
    sampled = {
        node: np.asarray(fit.idata.posterior[mis_name(node)].values).reshape(params.n, -1)
        for node, kind in holes.items()
        if kind == "sample"
    }
    for node, kind in holes.items():  # a summed node's posterior draws, in its values
        if kind == "sum":
            stan = np.asarray(fit.idata.posterior[draw_name(node)].values)
            emitter = stan_family(fit.scm.equations[node])
            sampled[node] = emitter.values_from_stan(stan.reshape(params.n, -1))
    if n_samples is not None and n_samples < params.n:
        params, drawn = _thin(params, {**latents, **sampled}, n_samples, seed)
        latents = {name: drawn[name] for name in latents}
        sampled = {node: drawn[node] for node in sampled}
    training = fit.rows
    observed = training.values(holes=bool(holes))
    filled = fill_missing(
        fit.scm, params, latents, observed, training.codes, training.holes,
        np.arange(len(fit.data), dtype=np.int64), seed, sampled,
    )
    abduction = Abduction(
        data=fit.data,
        params=params,
        latents=latents,
        codes=dict(training.codes),
        observed=filled,
        conditioned_on=fit.scm.observed,
        holes={node: np.asarray(mask) for node, mask in training.holes.items()},
    )
    if rows is None:
        return abduction
    if not is_training_rows(fit, rows):
        raise errors.DataError(
            "these rows have missing values and are not the fit's training rows: only "
            "the rows a missing='model' fit was fitted on are abducted from its draws"
        )
    return abduction.take_rows(np.asarray(rows.positions, dtype=np.int64))


def is_training_rows(fit: Fit, rows: Rows) -> bool:
    """Whether ``rows`` are (a part of) the fit's training rows, at their positions:
    the same index labels and the same values, missing ones included."""
    where = np.asarray(rows.positions, dtype=np.int64)
    n = len(fit.data)
    if where.size and (where.min() < 0 or where.max() >= n):
        return False
    own = fit.data.iloc[where]
    if not rows.frame.index.equals(own.index):
        return False
    shared = [c for c in own.columns if c in rows.frame.columns]
    return bool(rows.frame[shared].equals(own[shared]))


def parameter_sets(
    fit: Fit, method: str, n_param_draws: int, seed: int | None) -> ParamDraws:
    """The parameter sets abduction conditions on: their mean, or seeded posterior draws."""
    all_params = fit.params()
    if method == "mean":
        return all_params.mean()
    if method == "draws":
        rng = np.random.default_rng(seed)
        count = min(n_param_draws, all_params.n)
        return all_params.take(np.sort(rng.choice(all_params.n, count, replace=False)))
    raise ValueError(f"method must be 'mean' or 'draws', got {method!r}")


def checked_rows(
    fit: Fit, data: pd.DataFrame | Rows | None, positions: np.ndarray | None) -> Rows:
    """The rows to abduct, through their door (the training rows when ``data`` is None).

    Raises
    ------
    ValueError
        If ``positions`` is given with Rows (which carry theirs), or does not hold
        one global position per row.
    """
    if data is None:
        data = fit.rows if positions is None else fit.rows.frame
    if isinstance(data, Rows) and positions is not None:
        raise ValueError("positions= is given twice: the Rows carry their positions")
    if positions is not None:
        positions = np.asarray(positions, dtype=np.int64)
        n = len(data)
        if positions.shape != (n,):
            raise ValueError(
                f"positions has shape {positions.shape}, expected ({n},): one "
                "global position per row"
            )
    return Rows.check(
        data, fit.scm, fit.encoding, positions=positions, missing=rows_policy(fit)
    )


def rows_policy(fit: Fit) -> str:
    """What :meth:`Rows.check` does with other rows' missing values for this fit:
    ``"model"`` for a fit of ``missing="model"`` (they are abducted as unknown under
    missing at random), else ``"error"``."""
    return "model" if (fit.missing or {}).get("policy") == "model" else "error"


def exact(
    fit: Fit,
    checked: Rows,
    param_sets: ParamDraws,
    observed: dict[str, np.ndarray],
    conditioned: tuple[str, ...],
    n_samples: int | None,
    seed: int | None,
    positions: np.ndarray | None = None,
) -> Abduction:
    """Latents drawn exactly given each parameter set; ``n_samples`` balanced over the sets.

    Runs chunk by chunk (:mod:`counterfair.rows.chunking`); the uniforms are keyed by
    the rows' global positions, so the result does not depend on the chunk size.
    """
    needed = set(conditioned)
    for node in conditioned:
        needed.update(t.parent for t in fit.scm.equations[node].observed)
    values = checked.values(needed)
    codes = dict(checked.codes)
    rows = checked.frame
    total = EXACT_DRAWS_PER_SET * param_sets.n if n_samples is None else n_samples
    per_set = -(-total // param_sets.n)
    per_row = chunking.bytes_per_row(per_set * param_sets.n, len(fit.scm.latents))
    parts: dict[str, list[np.ndarray]] = {name: [] for name in fit.scm.latents}
    for where, chunk in checked.chunks(per_row):
        drawn = exact_abduction.sample_latents(
            fit.scm,
            param_sets,
            {k: v[where] for k, v in codes.items()},
            {k: v[where] for k, v in values.items()},
            conditioned,
            draws_per_set=per_set,
            rng=RowRandom(seed, chunk.positions),
        )
        for name, array in drawn.items():
            parts[name].append(array[:total])
    latents = {name: chunking.concat_rows(p, axis=1) for name, p in parts.items()}
    params = param_sets.take(np.arange(total) % param_sets.n)
    return Abduction(
        rows,
        params,
        latents,
        codes,
        observed,
        conditioned,
        engine="exact",
        positions=positions,
    )


def mcmc(
    fit: Fit,
    checked: Rows,
    param_sets: ParamDraws,
    codes: dict[str, np.ndarray],
    observed: dict[str, np.ndarray],
    conditioned: tuple[str, ...],
    *,
    n_samples: int | None,
    settings: MCMCAbduction,
    seed: int | None,
    positions: np.ndarray | None = None,
) -> Abduction:
    """Latents sampled by the Stan abduction program given the parameter sets.

    One program for all the rows: not chunked, and not chunk-invariant.
    """
    if fit._backend_name == LOADED_BACKEND:
        raise errors.FairnessError(NEEDS_MCMC.format(conditioned=list(conditioned)))
    chains = settings.chains
    per_chain = settings.draws or max(
        MIN_DRAWS_PER_CHAIN, -(-(n_samples or 0) // (chains * param_sets.n))
    )
    if n_samples is not None and n_samples > chains * per_chain * param_sets.n:
        raise ValueError(
            f"n_samples={n_samples} is more than chains * draws * parameter sets = "
            f"{chains} * {per_chain} * {param_sets.n}; raise draws or lower n_samples"
        )
    program = fit.scm.abduction_code()
    rows = checked.frame
    stan_data = abduction_data(fit.scm, checked, fit.encoding, param_sets, conditioned)
    coords, dims = coords_and_dims(fit.scm, fit.encoding, rows, ["param_set", "row"])
    run = get_backend(fit._backend_name).sample(
        program,
        stan_data,
        chains=chains,
        warmup=settings.warmup,
        draws=per_chain,
        seed=seed,
        progress=progress_enabled(settings.progress),
        coords=coords,
        dims={k: v for k, v in dims.items() if k in fit.scm.latents},
    )
    latents: dict[str, np.ndarray] = {}
    set_index = np.array([])
    for name in fit.scm.latents:
        array = np.asarray(run.idata.posterior[name].values)  # (chain, draw, S, N)
        c, d, s, n = array.shape
        latents[name] = array.reshape(c * d * s, n)
        set_index = np.tile(np.arange(s), c * d)
    warn_on_divergences(run.idata, "abduction of new rows")
    params = param_sets.take(set_index)
    if n_samples is not None and n_samples < params.n:
        params, latents = _thin(params, latents, n_samples, seed)
    return Abduction(
        rows, params, latents, codes, observed, conditioned, engine="mcmc", positions=positions
    )


def abduct(
    fit: Fit,
    data: pd.DataFrame | Rows | None = None,
    *,
    condition_on: Collection[str] | None = None,
    method: AbductionMethod = "mean",
    n_samples: int | None = None,
    n_param_draws: int = 20,
    engine: AbductionEngine = "auto",
    seed: int | None = None,
    positions: np.ndarray | None = None,
) -> Abduction:
    """Abduction of rows: what :meth:`counterfair.Fit.abduct` runs (see it for the options)."""
    seed = fit.seed if seed is None else seed
    settings = mcmc_engine(engine)
    if data is None and condition_on is None and engine == "auto":
        return training_abduction(fit, n_samples, seed)
    own_draws = condition_on is None and engine == "auto"
    if own_draws and isinstance(data, Rows) and data.holes and is_training_rows(fit, data):
        # the training rows of a missing='model' fit: its posterior holds their latents
        # and missing values jointly with the parameters
        return training_abduction(fit, n_samples, seed, rows=data)
    checked = checked_rows(fit, data, positions)
    if checked.holes and own_draws and is_training_rows(fit, checked):
        return training_abduction(fit, n_samples, seed, rows=checked)
    if checked.holes:  # other rows with missing values: one pattern at a time
        def conditioning(held: Sequence[str]) -> tuple[str, ...]:
            if condition_on is None:
                return default_conditioning(fit.scm, checked.frame[list(held)])
            return tuple(n for n in conditioning_nodes(fit.scm, condition_on) if n in held)

        def complete(sub: Rows, conditioned: tuple[str, ...]) -> Abduction:
            return abduct(
                fit, sub, condition_on=conditioned, method=method, n_samples=n_samples,
                n_param_draws=n_param_draws, engine=engine, seed=seed,
            )

        evidence = None if condition_on is None else conditioning_nodes(fit.scm, condition_on)
        return abduct_by_pattern(fit.scm, checked, conditioning, evidence, complete, seed)
    if isinstance(data, Rows) or positions is not None:
        positions = checked.positions
    rows = checked.frame
    if condition_on is None:
        conditioned = default_conditioning(fit.scm, rows)
    else:
        conditioned = conditioning_nodes(fit.scm, condition_on)
        _check_conditioning(fit.scm, rows, conditioned)
    codes = dict(checked.codes)
    observed = checked.values(checked.present())
    param_sets = parameter_sets(fit, method, n_param_draws, seed)
    if not fit.scm.latents:
        size = n_samples or 1
        index = np.arange(size) % param_sets.n
        return Abduction(
            rows,
            param_sets.take(index),
            {},
            codes,
            observed,
            conditioned,
            engine="none",
            positions=positions,
        )
    if engine == "exact":
        latent_problem.require_exact(fit.scm, conditioned)
    use_exact = engine == "exact" or (
        engine == "auto" and latent_problem.supports_exact(fit.scm, conditioned)
    )
    if use_exact:
        return exact(
            fit, checked, param_sets, observed, conditioned, n_samples, seed, positions
        )
    return mcmc(
        fit,
        checked,
        param_sets,
        codes,
        observed,
        conditioned,
        n_samples=n_samples,
        settings=MCMCAbduction() if settings is None else settings,
        seed=seed,
        positions=positions,
    )


def abduction_is_exact(
    fit: Fit,
    data: pd.DataFrame | Rows,
    *,
    condition_on: Collection[str] | None = None,
    engine: AbductionEngine = "auto",
    **_: Any,
) -> bool:
    """Whether :func:`abduct` of these rows runs chunk by chunk.

    What :meth:`counterfair.Fit.abduction_is_exact` runs.
    """
    settings = mcmc_engine(engine)
    own_draws = condition_on is None and engine == "auto"
    if isinstance(data, Rows) and data.holes and own_draws and is_training_rows(fit, data):
        return False  # the fit's own draws, cut after
    if not fit.scm.latents or engine == "exact":
        return True
    if settings is not None:
        return False
    frame = data.frame if isinstance(data, Rows) else data
    conditioned = (
        default_conditioning(fit.scm, frame)
        if condition_on is None
        else conditioning_nodes(fit.scm, condition_on)
    )
    # rows with missing values are abducted a pattern at a time: each its own set
    patterns = hole_patterns(data) if isinstance(data, Rows) and data.holes else []
    return all(
        latent_problem.supports_exact(fit.scm, tuple(n for n in conditioned if n not in missing))
        for missing in [frozenset(), *(m for m, _ in patterns)]
    )
