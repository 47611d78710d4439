"""Adult, path-specific fairness with age and hours per week as smooth terms.

The SCM of :mod:`experiments.adult_pscf` (Chiappa's Adult graph), declared
twice: *linear* (every parent a straight line, as in that study) and *smooth*, where
standardised age and hours per week also enter as penalised splines
(:class:`counterfair.Smooth`, ``k = 10``) wherever a node that takes terms has them as
parents:

* ``edu_z``: ``s(age_z)``;
* ``hours_z``: ``s(age_z)``;
* ``income``: ``s(age_z)`` and ``s(hours_z)``.

``marital``, ``occupation`` and ``workclass`` are categorical nodes, which do not take
terms yet: they keep straight lines in age in both declarations.

Both declarations are fitted by NUTS on the same rows and ranked by PSIS-LOO with
each row's latent ``U_R`` integrated out. When this study was written ``cf.compare``
raised ``SCMError`` on a categorical node (no log density; added since, in 1c6eda2),
and its importance sampling (every node, for every prior draw of ``U_R``) is slow on
these rows (more than 15 minutes on 300 rows on a shared machine).
:func:`compare_declarations` computes ``log p(row | theta)`` with ``U_R`` integrated
out by counterfair's LOO quadrature, which now covers categorical children (the C++ the
integrated fit runs), and ranks it with :func:`arviz.compare`.
Each declaration then trains and audits the study's four predictors (Full, Unaware,
Kusner L2, PSCF) exactly as :func:`experiments.adult_pscf.run_study` does:
accuracy and AUC on the test rows, total and path-specific change of the probability
under ``do(sex)``.

Run it with ``python -m experiments.adult_smooth [--quick]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from experiments.adult_pscf import (
    AdultPSCFConfig,
    _evaluate,
    _predictors,
    _subsample,
    _train,
    adult_pscf_scm,
    prepare,
)

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")

SMOOTH_TERMS: dict[str, tuple[str, ...]] = {
    "edu_z": ("age_z",),
    "hours_z": ("age_z",),
    "income": ("age_z", "hours_z"),
}
"""Nodes given smooth terms, and the parents each term bends in."""

DECLARATIONS = ("linear", "smooth")
HERMITE_NODES = 40
"""Gauss-Hermite nodes per row for the latent ``U_R`` in the LOO (the reference rule of
:mod:`counterfair.inference.latent_rows`)."""
PARETO_K_BAD = 0.7


@dataclass(frozen=True, kw_only=True)
class AdultSmoothConfig:
    """Settings of the study (the sizes mean what they mean in ``AdultPSCFConfig``).

    Attributes
    ----------
    data_dir : str or None
        Folder holding ``adult.data`` and ``adult.test`` (else ``$COUNTERFAIR_DATA``).
    seed : int
        Seed of the subsamples, the fits, the abductions and the audits.
    scm_rows, chains, warmup, draws : int
        Rows and NUTS settings of both fits (the same rows for both).
    learner_rows, n_samples, test_rows, audit_rows, cf_samples : int
        As in :class:`~experiments.adult_pscf.AdultPSCFConfig`.
    k : int
        Basis size of every smooth term.
    predictors : tuple of str
        Which of Full, Unaware, Kusner L2 and PSCF to train and audit.
    quick : bool
        Set by :meth:`quick_mode`.
    """

    data_dir: str | None = None
    seed: int = 0
    scm_rows: int = 2000
    chains: int = 2
    warmup: int = 500
    draws: int = 500
    learner_rows: int = 2000
    n_samples: int = 10
    test_rows: int = 0
    audit_rows: int = 500
    cf_samples: int = 20
    k: int = 10
    predictors: tuple[str, ...] = ("Full", "Unaware", "Kusner L2", "PSCF")
    quick: bool = False

    @classmethod
    def quick_mode(cls, **overrides: Any) -> AdultSmoothConfig:
        """The page's settings: 300 SCM rows, 2 chains of 200 + 200, 300 test rows."""
        settings: dict[str, Any] = {
            "scm_rows": 300,
            "warmup": 200,
            "draws": 200,
            "learner_rows": 300,
            "n_samples": 5,
            "test_rows": 300,
            "audit_rows": 60,
            "cf_samples": 10,
            "quick": True,
        }
        settings.update(overrides)
        return cls(**settings)

    def pscf_config(self) -> AdultPSCFConfig:
        """The same sizes as an ``AdultPSCFConfig`` (for the reused steps)."""
        return AdultPSCFConfig(
            data_dir=self.data_dir, seed=self.seed, scm_rows=self.scm_rows,
            chains=self.chains, warmup=self.warmup, draws=self.draws,
            learner_rows=self.learner_rows, n_samples=self.n_samples,
            test_rows=self.test_rows, audit_rows=self.audit_rows,
            cf_samples=self.cf_samples, quick=self.quick,
        )


def smooth_scm(k: int = 10) -> Any:
    """The study's SCM with the smooth terms of :data:`SMOOTH_TERMS` (basis size ``k``)."""
    import counterfair as cf

    linear = adult_pscf_scm()
    return linear.with_specs(
        {
            node: dataclasses.replace(
                linear.specs[node], terms=tuple(cf.Smooth(p, k=k) for p in parents)
            )
            for node, parents in SMOOTH_TERMS.items()
        }
    )


def node_log_density(eq: Any, params: Any, eta: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``counterfair``'s LOO density of a node, and the log softmax for a categorical one.

    For a categorical node the linear predictors ``(S, N, K-1)`` (reference level at 0)
    give the log probability of the observed level ``y`` (codes from 0), the same as
    ``counterfair.inference.loo.node_log_density`` since 1c6eda2 (which raised before).
    """
    from counterfair.inference import loo

    if eq.family.name != "categorical":
        return np.asarray(loo.node_log_density(eq, params, eta, y))
    logits = np.concatenate([np.zeros((*eta.shape[:-1], 1)), eta], axis=-1)
    codes = np.broadcast_to(np.asarray(y, dtype=int)[None, :, None], (*eta.shape[:-1], 1))
    return np.asarray(
        np.take_along_axis(logits, codes, axis=-1)[..., 0] - logsumexp(logits, axis=-1)
    )


def pointwise_log_likelihood(fit: Any, *, nodes: int = HERMITE_NODES) -> np.ndarray:
    """``log p(row_n | theta_s)`` of a fit, shape ``(S, N)``, its latents integrated out.

    counterfair's LOO quadrature (:func:`counterfair.inference.loo.pointwise_log_likelihood`):
    nodes without a latent parent enter once; ``U_R``'s Normal child in closed form and
    its categorical children by the adaptive Gauss-Hermite quadrature an integrated
    fit's program runs (the C++ of ``counterfair/stan/quadrature.hpp``), with ``nodes``
    nodes and Newton steps run to convergence. The study computed this itself, by a
    non-adaptive quadrature, while the package's latent problems did not cover
    categorical children.
    """
    from counterfair.inference import loo
    from counterfair.inference.latent_rows import REFERENCE_NEWTON

    return loo.pointwise_log_likelihood(
        fit.scm, fit.params(), dict(fit.rows.codes), fit.rows.values(), method="quadrature",
        nodes=nodes, newton=REFERENCE_NEWTON,
    )


def compare_declarations(fits: dict[str, Any], *, nodes: int = HERMITE_NODES) -> pd.DataFrame:
    """PSIS-LOO of each fit and :func:`arviz.compare` of them (stacking weights), best first.

    Columns as ``cf.compare``: ``elpd_loo``, ``p_loo``, ``elpd_diff``, ``se``, ``dse``,
    ``weight``, and ``n_bad_k`` (rows with Pareto k > 0.7).
    """
    import arviz as az

    datasets = {}
    bad = {}
    for name, fit in fits.items():
        posterior = fit.idata.posterior
        chains, draws = posterior.sizes["chain"], posterior.sizes["draw"]
        values = pointwise_log_likelihood(fit, nodes=nodes).reshape(chains, draws, -1)
        datasets[name] = az.from_dict(
            posterior={"lp_dummy": np.zeros((chains, draws))},
            log_likelihood={"row": values},
            coords={"row_id": list(fit.data.index)},
            dims={"row": ["row_id"]},
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            k = np.asarray(az.loo(datasets[name], pointwise=True).pareto_k)
        bad[name] = int((k > PARETO_K_BAD).sum())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        table = az.compare(datasets, ic="loo", method="stacking")
    table = table.drop(columns=[c for c in ("warning", "scale") if c in table.columns])
    table["n_bad_k"] = [bad[name] for name in table.index]
    return table


def _fit(scm: Any, rows: pd.DataFrame, config: AdultSmoothConfig) -> tuple[Any, list[str]]:
    import counterfair as cf
    from counterfair.errors import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", cf.errors.ConvergenceWarning)
        fit = scm.fit(
            rows, chains=config.chains, warmup=config.warmup, draws=config.draws,
            seed=config.seed, progress=False,
        )
    return fit, [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]


def _slowest(table: pd.DataFrame) -> str:
    """The parameter with the largest R-hat (the one that mixes slowest)."""
    return str(table["r_hat"].idxmax()) if "r_hat" in table and len(table) else ""


def run_smooth_study(config: AdultSmoothConfig) -> dict[str, Any]:
    """Fit both declarations, compare them by LOO, and score and audit the predictors.

    Returns
    -------
    dict
        ``"loo"`` (:func:`compare_declarations`' table, best first), ``"metrics"`` (one
        row per declaration and predictor: accuracy, AUC, total and path-specific
        change under ``do(sex)``), ``"fits"`` (R-hat, ESS, divergences, time per
        declaration), ``"info"`` (settings, sizes, timings; JSON-ready).
    """
    import counterfair as cf

    start = time.perf_counter()
    pscf_config = config.pscf_config()
    frame, _ = prepare(cf.datasets.load_adult(config.data_dir))
    rows = _subsample(frame, pscf_config)
    scms = {"linear": adult_pscf_scm(), "smooth": smooth_scm(config.k)}
    fits: dict[str, Any] = {}
    fit_rows = []
    for name, scm in scms.items():
        t0 = time.perf_counter()
        fits[name], fit_warnings = _fit(scm, rows.scm_train, config)
        diagnostics = fits[name].diagnostics
        fit_rows.append(
            {
                "declaration": name,
                "seconds": round(time.perf_counter() - t0, 1),
                "max_rhat": float(diagnostics.max_rhat),
                "min_ess_bulk": float(diagnostics.min_ess_bulk),
                "divergences": int(diagnostics.divergences),
                "warnings": len(fit_warnings),
                "slowest": _slowest(diagnostics.table),
            }
        )
        logger.info("adult-smooth: %s fit %s", name, fit_rows[-1])
    t0 = time.perf_counter()
    table = compare_declarations(fits)
    loo_seconds = round(time.perf_counter() - t0, 1)
    metrics = []
    timings: dict[str, float] = {}
    for name, scm in scms.items():
        predictors = {
            key: value
            for key, value in _predictors(scm, fits[name], pscf_config).items()
            if key in config.predictors
        }
        _train(predictors, rows, timings)
        abduction = fits[name].abduct(
            rows.audit_rows, method="draws", n_samples=config.cf_samples, seed=config.seed
        )
        metric_rows, _, _ = _evaluate(predictors, fits[name], abduction, rows, pscf_config,
                                      timings)
        metrics += [{"declaration": name, **row} for row in metric_rows]
    info = {
        "config": dataclasses.asdict(config),
        "rows": {"scm_fit": len(rows.scm_train), "fair_learners": len(rows.learner_train),
                 "test_scored": len(rows.test), "audited": len(rows.audit_rows)},
        "smooth_terms": {node: list(parents) for node, parents in SMOOTH_TERMS.items()},
        "loo_seconds": loo_seconds,
        "total_seconds": round(time.perf_counter() - start, 1),
    }
    return {
        "loo": table,
        "metrics": pd.DataFrame(metrics).drop(columns="chiappa_2019_accuracy"),
        "fits": pd.DataFrame(fit_rows),
        "info": info,
    }


def results_markdown(results: dict[str, Any]) -> str:
    """The LOO table, the fits' diagnostics and the predictors' table, in Markdown."""
    loo = results["loo"]
    lines = [
        "| declaration | elpd_loo | p_loo | elpd_diff | SE of diff | Pareto k > 0.7 |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in loo.iterrows():
        lines.append(
            f"| {name} | {row['elpd_loo']:.1f} | {row['p_loo']:.1f} | {row['elpd_diff']:.1f} "
            f"| {row['dse']:.1f} | {int(row['n_bad_k'])} |"
        )
    lines += ["", "| declaration | fit (s) | max R-hat (parameter) | min bulk ESS "
              "| divergences |", "|---|---|---|---|---|"]
    for row in results["fits"].itertuples(index=False):
        lines.append(
            f"| {row.declaration} | {row.seconds:.0f} | {row.max_rhat:.3f} ({row.slowest}) "
            f"| {row.min_ess_bulk:.0f} | {row.divergences} |"
        )
    lines += ["", "| declaration | predictor | accuracy | AUC | total change do(sex) "
              "| path-specific change |", "|---|---|---|---|---|---|"]
    for row in results["metrics"].itertuples(index=False):
        lines.append(
            f"| {row.declaration} | {row.predictor} | {row.accuracy:.3f} | {row.auc:.3f} "
            f"| {row.total_change:.3f} | {row.path_specific_change:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m experiments.adult_smooth [--quick] [--out folder]``."""
    p = argparse.ArgumentParser(prog="python -m experiments.adult_smooth")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None, help="folder for results.md and results.json")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    config = (AdultSmoothConfig.quick_mode if args.quick else AdultSmoothConfig)(
        data_dir=args.data_dir
    )
    results = run_smooth_study(config)
    text = results_markdown(results)
    print(text)
    if args.out is not None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text(text)
        payload = {
            "loo": results["loo"].reset_index(names="declaration").to_dict("records"),
            "metrics": results["metrics"].to_dict("records"),
            "fits": results["fits"].to_dict("records"),
            "info": results["info"],
        }
        (out / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
