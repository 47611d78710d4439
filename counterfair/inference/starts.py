"""Where NUTS starts: a Laplace start, a pilot fit, or neither.

:func:`fit_scm <counterfair.inference.sampling.fit_scm>` asks :func:`choose_start` which
start a fit takes (``warm_start=`` of :meth:`counterfair.SCM.fit`), and
:func:`default_warmup` how long its warm-up is when none is given. The starts themselves
are stage-4 code: :mod:`counterfair.stan.laplace_start` (mode, Hessian, dense metric) and
:mod:`counterfair.stan.warm_start` (the pilot).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np

from counterfair.inference.quadrature_nodes import default_rule
from counterfair.rows.validated import Rows
from counterfair.stan.backend import resolve_backend_name
from counterfair.stan.data import fit_data
from counterfair.stan.inits import latent_inits
from counterfair.stan.integrated import quadrature_data
from counterfair.stan.integrated_pairs import pair_quadrature_data, pairs_of
from counterfair.stan.laplace_start import DEFAULT_WARMUP, LaplaceError, LaplaceStart, laplace_start
from counterfair.stan.warm_start import MIN_ROWS, MIN_WARMUP, WarmStart, pilot_fit

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

logger = logging.getLogger("counterfair.inference.sampling")  # its lines, as before the move

__all__ = ["NUTS_WARMUP", "WARM_STARTS", "choose_start", "default_warmup", "fit_inits"]

_ADAPTATION_ARGS = ("stepsize", "init_phase", "metric_window", "term_phase", "inv_metric")
WARM_STARTS = (True, False, "auto", "pilot", "laplace")
"""Values of ``warm_start``: ``True`` is ``"pilot"``."""
NUTS_WARMUP = 500
"""Warm-up of a NUTS fit when none is given (a Laplace-started fit: ``DEFAULT_WARMUP``)."""


OPTIMIZER_ROWS = 5_000
"""Rows the Laplace start's optimizer runs on when there are more: L-BFGS takes hundreds
of gradients, the Newton steps that follow on every row a few dozen each."""


def choose_start(
    scm: SCM,
    rows: Rows,
    stan_data: dict[str, Any],
    warm_start: bool | str,
    backend: str,
    chains: int,
    warmup: int | None,
    seed: int | None,
    sampler_args: dict[str, Any],
    integrate: tuple[str, ...] = (),
) -> WarmStart | LaplaceStart | None:
    """The start of NUTS: a Laplace start, a pilot fit, or none.

    ``"auto"`` takes the Laplace start (:mod:`counterfair.stan.laplace_start`) where the
    program has no per-row parameter (every latent integrated out, or none) and there
    are at least ``MIN_ROWS`` rows, falling back to the pilot with a log line if it
    fails; else the pilot fit of :mod:`counterfair.stan.warm_start` where it is worth
    it. With integrated latents the pilot is worth it at any size: it runs the joint
    program, whose gradients are several times cheaper than the quadrature's, so the
    main fit's warm-up does not spend its first deep trees on the quadrature.
    """
    if not any(warm_start is v or (isinstance(v, str) and warm_start == v) for v in WARM_STARTS):
        raise ValueError(
            f"warm_start must be True, False, 'auto', 'pilot' or 'laplace', got {warm_start!r}"
        )
    if warm_start is False:
        return None
    explicit = [k for k in _ADAPTATION_ARGS if k in sampler_args]
    if sampler_args.get("metric", "dense_e") != "dense_e":  # a Laplace start is dense
        explicit.append("metric")
    on_cmdstan = resolve_backend_name(backend) == "cmdstanpy"
    sampled = [latent for latent in scm.latents if latent not in integrate]
    if warm_start == "laplace" and warmup == 0:
        raise ValueError("warm_start='laplace' adapts the step size: give warmup >= 1")
    wanted = warm_start == "laplace" or (
        warm_start == "auto" and len(rows) >= MIN_ROWS and warmup != 0
    )
    if wanted and on_cmdstan and not explicit and not sampled:
        try:
            return _laplace(scm, rows, stan_data, chains, seed, integrate)
        except LaplaceError as error:
            if warm_start == "laplace":
                raise ValueError(f"warm_start='laplace' failed: {error}") from error
            logger.info("Laplace start failed (%s); a pilot fit instead", error)
    if warm_start == "laplace":
        why = (
            "it needs the cmdstanpy back end"
            if not on_cmdstan
            else f"it sets {explicit} itself; pass warm_start=False to set them"
            if explicit
            else f"latents {sampled} are sampled jointly (per-row parameters); "
            "use latents='integrated' or another warm_start"
        )
        raise ValueError(f"warm_start='laplace' cannot apply: {why}")
    explicit = [k for k in explicit if k != "metric"]  # the pilot takes any metric
    steps = NUTS_WARMUP if warmup is None else warmup
    if warm_start == "auto":
        small = len(rows) < MIN_ROWS and not integrate
        if explicit or not on_cmdstan or small or steps < MIN_WARMUP:
            return None
    else:
        if not on_cmdstan:
            raise ValueError(
                f"warm_start={warm_start!r} needs the cmdstanpy back end (PyStan cannot be "
                "given an initial metric); use backend='cmdstanpy' or warm_start=False"
            )
        if explicit:
            raise ValueError(
                f"warm_start={warm_start!r} sets {explicit} itself; pass warm_start=False "
                "to set them"
            )
    return pilot_fit(scm, rows, stan_data, chains=chains, seed=seed, integrate=integrate)


def default_warmup(start: WarmStart | LaplaceStart | None) -> int:
    """Warm-up of a fit given none: ``DEFAULT_WARMUP`` after a Laplace start (its step
    size adapts in 19 iterations), else ``NUTS_WARMUP``."""
    return DEFAULT_WARMUP if isinstance(start, LaplaceStart) else NUTS_WARMUP


def _laplace(
    scm: SCM,
    rows: Rows,
    stan_data: dict[str, Any],
    chains: int,
    seed: int | None,
    integrate: tuple[str, ...],
) -> LaplaceStart:
    """The Laplace start of the fit program, its quadrature at the default rule; on more
    than ``OPTIMIZER_ROWS`` rows its optimizer runs on a random subsample of that many
    (seeded by ``seed``), its Newton steps and Hessian on every row."""
    data = dict(stan_data)
    if integrate:
        rule = default_rule("")
        data.update(quadrature_data(rule.nodes, rule.newton))
    if pairs_of(scm, integrate):
        data.update(pair_quadrature_data())
    init = fit_inits(scm, stan_data, 1, seed, integrate)[0]
    coarse = None
    if len(rows) > OPTIMIZER_ROWS:
        chosen = np.sort(
            np.random.default_rng(seed).choice(len(rows), OPTIMIZER_ROWS, replace=False)
        )
        coarse = {**fit_data(scm, rows.take(chosen)), **_quadrature_only(data, stan_data)}
        for key, value in stan_data.items():  # the priors' scales are the whole data's
            if key.startswith("scale_"):
                coarse[key] = value
    start = laplace_start(
        scm.stan_code(integrate=integrate), data, chains=chains, seed=seed, init=init,
        coarse=coarse,
    )
    logger.info(
        "Laplace start: mode and Hessian of %d parameters in %.1f s (dense metric; "
        "warm-up adapts the step size only%s)",
        start.inv_metric.shape[0],
        start.seconds,
        f"; the optimizer on {OPTIMIZER_ROWS:,} of the {len(rows):,} rows, Newton steps on "
        "all" if coarse is not None else "",
    )
    return start


def _quadrature_only(data: dict[str, Any], stan_data: dict[str, Any]) -> dict[str, Any]:
    """What ``data`` adds to the fit's ``stan_data``: the quadrature's rule."""
    return {key: value for key, value in data.items() if key not in stan_data}


def fit_inits(
    scm: SCM, stan_data: dict[str, Any], chains: int, seed: int | None, integrate: tuple[str, ...]
) -> list[dict[str, Any]]:
    """The latents' inits (:func:`counterfair.stan.inits.latent_inits`) of the fit program:
    without the per-row latents that ``integrate`` takes out of it."""
    inits = latent_inits(scm, stan_data, chains, seed)
    names = {f"z_{name}" for name in integrate} | set(integrate)
    return [{k: v for k, v in chain.items() if k not in names} for chain in inits]
