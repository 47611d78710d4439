"""COMPAS with age as a smooth term.

The SCM of :mod:`experiments.compas`, declared twice: *linear* (as in that
study) and *smooth*, where standardised age ``age_z`` also enters its two children
as a penalised spline (:class:`counterfair.Smooth`, ``k = 10``):

* ``priors_count`` (negative binomial): ``s(age_z)``;
* ``two_year_recid`` (Bernoulli): ``s(age_z)``.

In that study age is an observed Normal root (a fair input, not a protected
attribute): the counterfactual audit intervenes on ``race`` and ``sex``, and age keeps
its value in every world. A bend in age still matters there: the latent ``U`` is
abducted from ``priors_count`` given age, so what a straight line in age misses goes
into ``U`` (and into the fair learner, which reads ``U`` and age).

Both declarations are fitted by NUTS on the same rows and ranked by PSIS-LOO
(:func:`counterfair.compare`, ``U`` integrated out by Gauss-Hermite quadrature). Each
then trains Full, Unaware and Fair (U, age) as the study does, and reports accuracy,
AUC and the change of labels and probabilities under ``do(race)`` and ``do(sex)``.

Run it with ``python -m experiments.compas_smooth [--quick]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from sklearn.linear_model import LogisticRegression

from experiments.compas import (
    OUTCOME,
    CompasConfig,
    _counterfactual_audit,
    _evaluate,
    _fit_scm,
    _load_rows,
    _timed,
    compas_scm,
)

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")

SMOOTH_CHILDREN = ("priors_count", OUTCOME)
"""The children of ``age_z`` given ``s(age_z)``."""

FAIR = "Fair (U, age)"


@dataclass(frozen=True, kw_only=True)
class CompasSmoothConfig:
    """Settings of the study (the sizes mean what they mean in ``CompasConfig``).

    Attributes
    ----------
    data_dir : str or None
        Folder holding ``compas-scores-two-years.csv`` (else ``$COUNTERFAIR_DATA``).
    seed : int
        Seed of the split, subsample, fits, abductions and audits.
    scm_rows, chains, warmup, draws : int
        Rows and NUTS settings of both fits (the same rows for both).
    n_samples, audit_rows, cf_samples : int
        As in :class:`~experiments.compas.CompasConfig`.
    k : int
        Basis size of the smooth terms.
    quick : bool
        Set by :meth:`quick_mode`.
    """

    data_dir: str | None = None
    seed: int = 0
    scm_rows: int = 1500
    chains: int = 2
    warmup: int = 500
    draws: int = 1000
    n_samples: int = 30
    audit_rows: int = 1000
    cf_samples: int = 50
    k: int = 10
    quick: bool = False

    @classmethod
    def quick_mode(cls, **overrides: Any) -> CompasSmoothConfig:
        """The page's settings: 300 SCM rows, 2 chains of 200 + 200, 200 audited rows."""
        settings: dict[str, Any] = {
            "scm_rows": 300,
            "warmup": 200,
            "draws": 200,
            "n_samples": 10,
            "audit_rows": 200,
            "cf_samples": 20,
            "quick": True,
        }
        settings.update(overrides)
        return cls(**settings)

    def compas_config(self) -> CompasConfig:
        """The same sizes as a ``CompasConfig`` (for the reused steps)."""
        return CompasConfig(
            data_dir=self.data_dir, seed=self.seed, scm_rows=self.scm_rows,
            chains=self.chains, warmup=self.warmup, draws=self.draws,
            n_samples=self.n_samples, audit_rows=self.audit_rows,
            cf_samples=self.cf_samples, n_bootstrap=0, quick=self.quick,
        )


def smooth_scm(k: int = 10) -> Any:
    """The study's SCM with ``s(age_z)`` on ``priors_count`` and ``two_year_recid``."""
    import counterfair as cf

    linear = compas_scm()
    return linear.with_specs(
        {
            node: dataclasses.replace(linear.specs[node], terms=(cf.Smooth("age_z", k=k),))
            for node in SMOOTH_CHILDREN
        }
    )


def _predictors(
    scm: Any, fit: Any, train: pd.DataFrame, config: CompasConfig, timings: dict[str, float]
) -> dict[str, Any]:
    """Full, Unaware and Fair (U, age), trained as the study trains them."""
    import counterfair as cf

    predictors: dict[str, Any] = {
        "Full": cf.full_predictor(scm, OUTCOME, estimator=LogisticRegression(max_iter=1000)),
        "Unaware": cf.unaware_predictor(
            scm, OUTCOME, estimator=LogisticRegression(max_iter=1000)
        ),
        FAIR: cf.FairLearner(
            fit,
            target=OUTCOME,
            features=cf.inputs.Latent(),
            n_samples=config.n_samples,
            seed=config.seed,
        ),
    }
    for name, predictor in predictors.items():
        _timed(f"train {name}", partial(predictor.fit, train), timings)
    return predictors


def _slowest(table: pd.DataFrame) -> str:
    """The parameter with the largest R-hat (the one that mixes slowest)."""
    return str(table["r_hat"].idxmax()) if "r_hat" in table and len(table) else ""


def run_smooth_study(config: CompasSmoothConfig) -> dict[str, Any]:
    """Fit both declarations, compare them by LOO, and score and audit the predictors.

    Returns
    -------
    dict
        ``"loo"`` (``cf.compare``'s table, best first), ``"metrics"`` (one row per
        declaration and predictor: accuracy, AUC), ``"changes"`` (one row per
        declaration, predictor, response and attribute: mean |change| under do()),
        ``"fits"`` (R-hat, ESS, divergences, time), ``"info"`` (JSON-ready).
    """
    import counterfair as cf

    start = time.perf_counter()
    base = config.compas_config()
    timings: dict[str, float] = {}
    data = _load_rows(base, timings)
    unlabelled = data.test.drop(columns=OUTCOME)
    y_test = data.test[OUTCOME].to_numpy()
    scms = {"linear": compas_scm(), "smooth": smooth_scm(config.k)}
    fits: dict[str, Any] = {}
    fit_rows, metrics, changes = [], [], []
    for name, scm in scms.items():
        t0 = time.perf_counter()
        fits[name], fit_warnings = _fit_scm(scm, data.scm_train, base, timings)
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
        predictors = _predictors(scm, fits[name], data.train, base, timings)
        evaluation = _evaluate(predictors, unlabelled, y_test, timings)
        audit = _counterfactual_audit(fits[name], unlabelled, predictors, base, timings)
        metrics += [{"declaration": name, **row} for row in evaluation.metrics_rows]
        changes += [{"declaration": name, **row} for row in audit.change_rows]
    t0 = time.perf_counter()
    table = cf.compare(fits, seed=config.seed)
    info = {
        "config": dataclasses.asdict(config),
        "rows": {"train": len(data.train), "scm_fit": len(data.scm_train),
                 "test": len(data.test)},
        "smooth_terms": {node: ["age_z"] for node in SMOOTH_CHILDREN},
        "loo_seconds": round(time.perf_counter() - t0, 1),
        "total_seconds": round(time.perf_counter() - start, 1),
    }
    return {
        "loo": table,
        "metrics": pd.DataFrame(metrics),
        "changes": pd.DataFrame(changes),
        "fits": pd.DataFrame(fit_rows),
        "info": info,
    }


def results_markdown(results: dict[str, Any]) -> str:
    """The LOO table, the fits' diagnostics and the predictors' table, in Markdown."""
    lines = [
        "| declaration | elpd_loo | p_loo | elpd_diff | SE of diff | Pareto k > 0.7 |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in results["loo"].iterrows():
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
    pivot = results["changes"].pivot_table(
        index=["declaration", "predictor"], columns=["response", "attribute"],
        values="mean_abs_change", sort=False,
    )
    lines += [
        "",
        "| declaration | predictor | accuracy | AUC | label change do(race) "
        "| label change do(sex) | probability change do(race) | probability change do(sex) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in results["metrics"].itertuples(index=False):
        cells = [
            f"{pivot.loc[(row.declaration, row.predictor), (response, attribute)]:.3f}"
            for response in ("label", "probability")
            for attribute in ("race", "sex")
        ]
        lines.append(
            f"| {row.declaration} | {row.predictor} | {row.accuracy:.3f} | {row.auc:.3f} | "
            + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m experiments.compas_smooth [--quick] [--out folder]``."""
    p = argparse.ArgumentParser(prog="python -m experiments.compas_smooth")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None, help="folder for results.md and results.json")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    config = (CompasSmoothConfig.quick_mode if args.quick else CompasSmoothConfig)(
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
            "changes": results["changes"].to_dict("records"),
            "fits": results["fits"].to_dict("records"),
            "info": results["info"],
        }
        (out / "results.json").write_text(json.dumps(payload, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
