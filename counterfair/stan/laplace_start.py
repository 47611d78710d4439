"""Laplace start of a fit whose parameters are all structural: mode, Hessian, dense metric.

A program with no per-row parameter (every latent integrated out, or no latent at all)
has a few dozen parameters and, with thousands of rows, a posterior close to a
Gaussian. NUTS needs that Gaussian's covariance as its metric; windowed adaptation
learns it from the warm-up's own draws, and on the law school fit (31 parameters) the
estimate from 175 draws left about 11 leapfrog steps per draw where the covariance of a
long run gave 7. This start computes it instead:

1. **Mode.** CmdStan's L-BFGS (``optimize``, with the Jacobian of the constraints, so it
   is the mode of the density NUTS samples) from the fit's usual inits.
2. **Hessian.** The gradient of the log density (CmdStan's ``log_prob`` method, one run
   for all points) at the mode and at ``HESSIAN_STEP`` either side of it along each
   unconstrained axis; central differences give the Hessian ``H``. It must be
   symmetric to ``SYMMETRY_TOLERANCE`` and negative definite, and the mode must lie
   within ``MODE_TOLERANCE`` (in posterior sds) of the Newton step's end; otherwise
   :class:`LaplaceError` is raised and the fit falls back to the pilot.
3. **Metric, inits, check draws.** ``(-H)^-1`` is the dense inverse metric. Each chain
   starts at its own draw from the Gaussian ``N(mode, (-H)^-1)`` (dispersed like the
   posterior, so R-hat can still see chains that disagree). The quadrature's node check
   gets ``CHECK_SETS`` draws of CmdStan's ``laplace`` method instead, which come with
   the transformed parameters the check reads: centred at the same mode (CmdStan's
   optimizer restarted there writes it with all digits), with CmdStan's own
   finite-difference Hessian.

NUTS then adapts only the step size, for ``ADAPT_ITERATIONS`` iterations: CmdStan
estimates no metric when warm-up is shorter than 20 iterations, so the metric stays the
Hessian's. The rest of the requested warm-up runs at the adapted step size and its
draws are dropped (burn-in). The posterior is unchanged; only where NUTS starts and the
metric it uses are.
"""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from counterfair.model.params import ParamDraws
from counterfair.stan.unconstrained import Unconstrained, UnsupportedParametersError, declarations

logger = logging.getLogger(__name__)

__all__ = [
    "ADAPT_ITERATIONS",
    "DEFAULT_WARMUP",
    "LaplaceError",
    "LaplaceStart",
    "laplace_start",
]

ADAPT_ITERATIONS = 19
"""Warm-up iterations that adapt the step size (CmdStan adapts no metric below 20)."""
DEFAULT_WARMUP = 50
"""Warm-up of a Laplace-started fit when none is given: step size, then burn-in."""
HESSIAN_STEP = 1e-4
"""Step of the central differences of the gradient (unconstrained scale)."""
SYMMETRY_TOLERANCE = 1e-3
"""Largest relative asymmetry of the finite-difference Hessian accepted."""
MODE_TOLERANCE = 0.5
"""The Hessian is taken where the next Newton step is shorter than this (in posterior
sds, the Hessian's metric)."""
NEWTON_STEPS = 4
"""Newton steps allowed from the optimizer's end."""
CHECK_SETS = 6
"""Draws of the Gaussian approximation handed to the quadrature's node check."""
INITIAL_STEP = 0.5
"""Initial step size (CmdStan's heuristic then adjusts it before adaptation)."""


class LaplaceError(RuntimeError):
    """The mode or the Hessian could not be found or trusted; the reason is the message."""


@dataclass(frozen=True)
class LaplaceStart:
    """What the Laplace start hands to NUTS.

    Attributes
    ----------
    inv_metric : numpy.ndarray
        Dense inverse metric, ``(-H)^-1`` at the mode (unconstrained scale, Stan's order).
    inits : list of dict
        One starting point per chain (constrained values), drawn from the Gaussian.
    mode : dict
        The mode (constrained values).
    draws : ParamDraws
        ``CHECK_SETS`` draws of every parameter from CmdStan's Laplace approximation
        at the mode (transformed parameters included).
    seconds : float
        Wall time of the start (optimizer and Hessian).
    """

    inv_metric: np.ndarray
    inits: list[dict[str, Any]]
    mode: dict[str, np.ndarray]
    draws: ParamDraws
    seconds: float
    kind: str = "laplace"
    pilot_rows: int | None = None

    def sampler_args(self, warmup: int) -> dict[str, Any]:
        """Arguments of NUTS: the dense metric, a first step size and the inits.

        ``warmup`` is checked here; :meth:`split` gives its adaptation and burn-in.
        """
        if warmup < 1:
            raise ValueError(f"a Laplace-started fit needs warmup >= 1, got {warmup}")
        return {
            "metric": "dense_e",
            "inv_metric": self.inv_metric,
            "stepsize": INITIAL_STEP,
        }

    @staticmethod
    def split(warmup: int) -> tuple[int, int]:
        """``warmup`` as (iterations adapting the step size, burn-in iterations dropped)."""
        adapt = min(warmup, ADAPT_ITERATIONS)
        return adapt, warmup - adapt


def _parameter_shapes(fit: Any, names: list[str]) -> dict[str, tuple[int, ...]]:
    """Constrained shapes of ``names`` from a cmdstanpy result's metadata."""
    variables = fit.metadata.stan_vars
    return {name: tuple(int(n) for n in variables[name].dimensions) for name in names}


def _params_r(points: np.ndarray) -> list[list[float]]:
    """``points`` (one per row) laid out for CmdStan's ``params_r``.

    CmdStan reads a 2-D ``params_r`` from JSON in column-major order and then takes it
    row by row, so the array written is the one whose column-major order is the points'
    row-major order. :func:`_hessian`'s symmetry check would catch a change of that.
    """
    n, p = points.shape
    return points.ravel().reshape(p, n).T.tolist()


def _gradients(exe: Path, data_file: Path, points: np.ndarray, folder: Path) -> np.ndarray:
    """Log density (column 0) and its gradient at each unconstrained point (Jacobian on)."""
    inputs, output = folder / "points.json", folder / "log_prob.csv"
    inputs.write_text(json.dumps({"params_r": _params_r(points)}))
    command = [
        str(exe),
        "log_prob",
        f"unconstrained_params={inputs}",
        "jacobian=1",
        "data",
        f"file={data_file}",
        "output",
        f"file={output}",
        "sig_figs=18",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not output.exists():
        raise LaplaceError(
            f"CmdStan's log_prob failed: {(done.stdout + done.stderr).strip()[-500:]}"
        )
    lines = [line for line in output.read_text().splitlines() if line and line[0] != "#"]
    values = np.array([[float(x) for x in line.split(",")] for line in lines[1:]])
    if values.shape != (len(points), points.shape[1] + 1):
        raise LaplaceError(f"CmdStan's log_prob gave shape {values.shape} for {points.shape}")
    return values


def _hessian(gradients: np.ndarray, step: float) -> np.ndarray:
    """Central-difference Hessian from gradients at ``+step`` / ``-step`` along each axis
    (rows ``1 + 2 i`` and ``2 + 2 i`` of ``gradients``), symmetrised after a check."""
    p = gradients.shape[1]
    plus, minus = gradients[1::2], gradients[2::2]
    hessian = (plus - minus) / (2.0 * step)
    asymmetry = np.abs(hessian - hessian.T).max() / max(np.abs(hessian).max(), 1e-300)
    if not np.all(np.isfinite(hessian)) or asymmetry > SYMMETRY_TOLERANCE:
        raise LaplaceError(
            f"the finite-difference Hessian of the {p} parameters is not symmetric "
            f"(relative asymmetry {asymmetry:.2g})"
        )
    return (hessian + hessian.T) / 2.0


def _listed(values: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Constrained values as CmdStan's JSON inits take them."""
    return {name: np.asarray(value).tolist() for name, value in values.items()}


def _newton(
    exe: Path, data_file: Path, u: np.ndarray, folder: Path
) -> tuple[np.ndarray, np.ndarray]:
    """Newton steps from ``u`` until the next would move less than ``MODE_TOLERANCE``
    posterior sds; return the precision ``-H`` there and the mode (that last step's end).

    Each step evaluates the gradient at ``u`` and ``HESSIAN_STEP`` either side of it
    along every axis in one CmdStan run. L-BFGS's own stopping rule ends it some posterior
    sds short of the mode on thousands of rows (14 on the law school data), and tighter
    tolerances cost it thousands of gradients; the exact Newton step lands there in one.
    """
    p = u.size
    offsets = HESSIAN_STEP * np.eye(p)
    distance = float("inf")
    for _ in range(NEWTON_STEPS):
        points = np.vstack([u, *[u + sign * offsets[i] for i in range(p) for sign in (1, -1)]])
        gradients = _gradients(exe, data_file, points, folder)[:, 1:]
        precision = -_hessian(gradients, HESSIAN_STEP)
        try:
            np.linalg.cholesky(precision)
        except np.linalg.LinAlgError as error:
            raise LaplaceError("the Hessian is not negative definite") from error
        step = np.linalg.solve(precision, gradients[0])
        distance = float(np.sqrt(step @ precision @ step))
        if distance <= MODE_TOLERANCE:
            return precision, u + step
        u = u + step
    raise LaplaceError(
        f"{NEWTON_STEPS} Newton steps from the optimizer's end left the mode "
        f"{distance:.2g} posterior sds away"
    )


def laplace_start(
    code: str,
    data: Mapping[str, Any],
    *,
    chains: int,
    seed: int | None,
    init: Mapping[str, Any],
    coarse: Mapping[str, Any] | None = None,
) -> LaplaceStart:
    """Mode, Hessian and dense metric of the program ``code`` on ``data`` (CmdStan).

    Parameters
    ----------
    code : str
        A program whose parameters are all structural (no per-row parameter).
    data : mapping
        Its data.
    chains : int
        Chains of the fit: one init each.
    seed : int, optional
        Seed of the optimizer and of the Gaussian draws.
    init : mapping
        Where the optimizer starts (constrained values of every parameter).
    coarse : mapping, optional
        The program's data on a subsample of the rows: the optimizer runs there (its
        gradients are cheaper by the ratio of rows), and the Newton steps on ``data``
        take its end to the mode of the whole posterior, a few of the subsample's
        posterior sds away. If they fail from there, the optimizer runs on ``data``.

    Raises
    ------
    LaplaceError
        When the optimizer fails, a declaration cannot be transformed, or the Hessian
        is not symmetric, not negative definite, or not at the mode.
    """
    import cmdstanpy

    from counterfair.stan.cmdstan_adapter import _quiet_cmdstanpy, executable

    start = time.perf_counter()
    exe, _ = executable(code)
    with tempfile.TemporaryDirectory(prefix="counterfair-laplace-") as tmp:
        folder = Path(tmp)
        data_file = folder / "data.json"
        cmdstanpy.write_stan_json(str(data_file), dict(data))
        with _quiet_cmdstanpy(logging.ERROR):
            model = cmdstanpy.CmdStanModel(exe_file=str(exe))

        def optimum_on(file: Path, name: str) -> tuple[Unconstrained, np.ndarray]:
            """L-BFGS's end on the data in ``file``, unconstrained."""
            with _quiet_cmdstanpy(logging.ERROR):
                try:
                    optimum = model.optimize(
                        data=str(file),
                        inits=dict(init),
                        seed=seed,
                        jacobian=True,
                        output_dir=str(folder / name),
                        iter=10_000,
                    )
                except (RuntimeError, ValueError) as error:  # ValueError: before 2.32
                    raise LaplaceError(f"CmdStan's optimizer failed: {error}") from error
            try:
                names = [d.name for d in declarations(code)]
                shapes = _parameter_shapes(optimum, names)
                transform = Unconstrained.of(code, shapes, data)
            except UnsupportedParametersError as error:
                raise LaplaceError(str(error)) from error
            with _quiet_cmdstanpy(logging.ERROR):  # its note on scalars of size-1 vectors
                values = {
                    name: np.asarray(optimum.stan_variable(name), dtype=float).reshape(shape)
                    for name, shape in shapes.items()
                }
            return transform, transform.unconstrain(values)

        found = None
        if coarse is not None:
            coarse_file = folder / "coarse.json"
            cmdstanpy.write_stan_json(str(coarse_file), dict(coarse))
            transform, u = optimum_on(coarse_file, "optimize-coarse")
            try:
                found = _newton(exe, data_file, u, folder)
            except LaplaceError as error:
                logger.info(
                    "Laplace start: Newton steps from the subsample's mode failed (%s); "
                    "the optimizer on every row instead", error,
                )
        if found is None:
            transform, u = optimum_on(data_file, "optimize")
            found = _newton(exe, data_file, u, folder)
        precision, mode = found
        with _quiet_cmdstanpy(logging.ERROR):  # draws with transformed parameters
            try:  # CmdStan's laplace method centred at the Newton mode (all its digits)
                at_mode = model.optimize(  # started at the mode, L-BFGS may find no
                    data=str(data_file),     # decrease ("line search failed"): it is there
                    inits=_listed(transform.constrain(mode)),
                    seed=seed,
                    jacobian=True,
                    output_dir=str(folder / "mode"),
                    sig_figs=18,
                    require_converged=False,
                )
                gaussian = model.laplace_sample(
                    data=str(data_file),
                    mode=at_mode,
                    draws=CHECK_SETS,
                    jacobian=True,
                    seed=seed,
                    output_dir=str(folder / "laplace"),
                )
            except (RuntimeError, ValueError) as error:
                raise LaplaceError(f"CmdStan's laplace method failed: {error}") from error
        checks = {k: np.asarray(v, dtype=float) for k, v in gaussian.stan_variables().items()}
    covariance = np.linalg.inv(precision)
    covariance = (covariance + covariance.T) / 2.0
    factor = np.linalg.cholesky(precision)
    z = np.random.default_rng(seed).standard_normal((chains, mode.size))
    spread = np.linalg.solve(factor.T, z.T).T  # rows ~ N(0, precision^-1)
    inits = [_listed(transform.constrain(mode + row)) for row in spread]
    return LaplaceStart(
        inv_metric=covariance,
        inits=inits,
        mode=transform.constrain(mode),
        draws=ParamDraws(checks),
        seconds=time.perf_counter() - start,
    )
