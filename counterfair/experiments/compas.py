"""COMPAS: a counterfactually fair recidivism classifier, on ProPublica's data.

The second study on real data (after the law school one). One command runs it::

    counterfair compas --data-dir /path/to/data --out results/compas

**Data.** :func:`counterfair.load_compas` (ProPublica's filters, 6,172 rows), kept to
the two largest groups of ``race`` (African-American and Caucasian, 5,278 rows) so that
``do(race)`` has one counterfactual level, as in ProPublica's analysis. A stratified
third of the rows is held out for testing; the SCM is fitted by NUTS on a random
subsample of the training rows (``scm_rows``, default 1,500) to keep the run short.

**SCM.** ``race`` and ``sex`` are protected (references Caucasian and Male); a latent
``U`` (a criminal-history propensity, ``N(0, 1)``) drives

* ``priors_count`` -- negative binomial (log link, learned dispersion) on race,
  sex, age and U: its variance is about 7 times its mean, far more than a Poisson
  with U allows (see the posterior predictive check in docs/studies/compas.md);
* ``juv_count`` (felony + misdemeanour + other juvenile counts) -- Poisson on race,
  sex and U;
* ``felony`` (``c_charge_degree == 'F'``) -- Bernoulli (logit) on race, sex and U;
* ``two_year_recid`` -- Bernoulli on race, sex, age and U.

``age_z`` (standardised age) is an observed Normal root node: age is not caused by
race or sex, so it is a fair input (a non-descendant of the protected attributes).
``juv_count`` stays Poisson: with a negative binomial for both counts, the two
dispersions absorbed what U shares between them, U's loadings were barely identified
and the fit did not mix (2 chains of 500 + 500 on 1,500 rows: R-hat up to 1.17 for ten
parameters, bulk ESS 9 for ``phi_priors_count``). With one negative binomial the same
fit gave R-hat 1.010 at 500 draws per chain and 1.005 at 1,000 (min bulk ESS 252), the
study's default. Age enters as a standardised number.

**Predictors.** *Fair* -- :class:`~counterfair.FairLearner` (Algorithm 1) on U and
age, U abducted without the outcome; *Unaware* -- logistic regression on every
observed column but race and sex; *Full* -- the same plus race and sex. Two
non-causal baselines a sceptic would run (``docs/baselines.md``): *Order-preserving
(Full)* -- Full's probabilities ranked within each race x sex group and mapped to the
pooled distribution (Rosenblatt and Witter, 2023); *DP thresholds (Full)* --
fairlearn's ``ThresholdOptimizer`` with a demographic-parity constraint over the race
x sex groups on Full's probabilities (when fairlearn is installed).

**Outputs** (under ``out``): ``results.md`` / ``results.json`` (accuracy, AUC,
counterfactual change of labels and probabilities under do(race) and do(sex), the
group audit with its explicit reference groups, per-stage and total wall time),
``counterfactual_change.csv``, ``group_audit.csv`` and ``audit.html``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal

import networkx as nx
import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, roc_auc_score

PROTECTED = ("race", "sex")
RACES = ("Caucasian", "African-American")
SEXES = ("Male", "Female")
OUTCOME = "two_year_recid"
ORDER_PRESERVING = "Order-preserving (Full)"
DP_THRESHOLDS = "DP thresholds (Full)"
RESPONSES: tuple[Literal["prediction", "probability"], ...] = ("prediction", "probability")
OBSERVED = ("age_z", "priors_count", "juv_count", "felony")
FAMILY_NOTE = (
    "Families: priors_count negative binomial (over-dispersed), juv_count Poisson (a "
    "second negative binomial left U unidentified), felony / two_year_recid Bernoulli; "
    "age enters as standardised age (an observed Normal root node)."
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class CompasConfig:
    """Settings of the COMPAS study.

    Attributes
    ----------
    data_dir : str or None
        Folder holding ``compas-scores-two-years.csv`` (else ``$COUNTERFAIR_DATA``).
    out : pathlib.Path
        Output folder.
    seed : int
        Seed of the split, subsample, fit, abduction and audit.
    scm_rows : int
        Training rows the SCM is fitted on by NUTS (a random subsample).
    chains, warmup, draws : int
        NUTS settings of the SCM fit.
    n_samples : int
        ``m``, draws of U per training row for the fair learner.
    audit_rows : int
        Test rows in the counterfactual audit.
    cf_samples : int
        Joint samples per audited row.
    test_share : float
        Share of rows held out (stratified by race, sex and outcome).
    n_bootstrap : int
        Bootstrap resamples of the group audit.
    quick : bool
        Smoke test (set by :meth:`quick_mode`).
    """

    data_dir: str | None = None
    out: Path = field(default_factory=lambda: Path("results/compas"))
    seed: int = 0
    scm_rows: int = 1500
    chains: int = 2
    warmup: int = 500
    draws: int = 1000
    n_samples: int = 30
    audit_rows: int = 1000
    cf_samples: int = 50
    test_share: float = 1 / 3
    n_bootstrap: int = 200
    quick: bool = False

    @classmethod
    def quick_mode(cls, **overrides: Any) -> CompasConfig:
        """A smoke test: 300 SCM rows, short chains, 200 audited rows, no bootstrap."""
        settings: dict[str, Any] = {
            "scm_rows": 300,
            "chains": 2,
            "warmup": 150,
            "draws": 150,
            "n_samples": 10,
            "audit_rows": 200,
            "cf_samples": 20,
            "n_bootstrap": 0,
            "quick": True,
        }
        settings.update(overrides)
        return cls(**settings)


def _log(message: str) -> None:
    logger.info("compas: %s", message)


def compas_scm(priors_count: Any = None) -> Any:
    """The study's SCM (see the module docstring).

    Parameters
    ----------
    priors_count : Observed spec, optional
        The family of ``priors_count`` (default ``cf.NegativeBinomial()``; the posterior
        predictive check of ``experiments/compas_ppc.py`` compares it with
        ``cf.Poisson()``).
    """
    import counterfair as cf

    g = nx.DiGraph()
    g.add_node("race", spec=cf.Protected(levels=RACES))
    g.add_node("sex", spec=cf.Protected(levels=SEXES))
    g.add_node("U", spec=cf.Latent())
    g.add_node("age_z", spec=cf.Normal())
    g.add_node(
        "priors_count",
        spec=cf.NegativeBinomial() if priors_count is None else priors_count,
    )
    g.add_node("juv_count", spec=cf.Poisson())
    g.add_node("felony", spec=cf.Bernoulli())
    g.add_node(OUTCOME, spec=cf.Bernoulli())
    for child in ("priors_count", "juv_count", "felony", OUTCOME):
        for parent in ("race", "sex", "U"):
            g.add_edge(parent, child)
    g.add_edge("age_z", "priors_count")
    g.add_edge("age_z", OUTCOME)
    return cf.SCM(g)


def prepare(raw: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """The study's columns from :func:`load_compas` rows; also the age standardisation."""
    rows = raw[raw["race"].isin(RACES)].copy()
    mean, sd = float(rows["age"].mean()), float(rows["age"].std())
    frame = pd.DataFrame(
        {
            "race": pd.Categorical(rows["race"], categories=list(RACES)),
            "sex": pd.Categorical(rows["sex"], categories=list(SEXES)),
            "age_z": (rows["age"] - mean) / sd,
            "priors_count": rows["priors_count"].astype(int),
            "juv_count": (
                rows["juv_fel_count"] + rows["juv_misd_count"] + rows["juv_other_count"]
            ).astype(int),
            "felony": (rows["c_charge_degree"] == "F").astype(int),
            OUTCOME: rows[OUTCOME].astype(int),
        }
    ).reset_index(drop=True)
    return frame, {"age_mean": mean, "age_sd": sd}


def split(frame: pd.DataFrame, test_share: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Stratified (race x sex x outcome) train / test split."""
    from sklearn.model_selection import train_test_split

    strata = frame["race"].astype(str) + "|" + frame["sex"].astype(str)
    strata = strata + "|" + frame[OUTCOME].astype(str)
    train, test = train_test_split(
        frame, test_size=test_share, random_state=seed, stratify=strata
    )
    return train.sort_index(), test.sort_index()


def _timed(label: str, step: Callable[[], Any], timings: dict[str, float]) -> Any:
    start = time.perf_counter()
    value = step()
    timings[label] = round(time.perf_counter() - start, 2)
    _log(f"{label}: {timings[label]:.1f} s")
    return value


def run(config: CompasConfig) -> dict[str, Any]:
    """Run the study; write its outputs under ``config.out`` and return the results."""
    import warnings

    import counterfair as cf
    from counterfair.audit import (
        counterfactual_fairness,
        counterfactual_html,
        group_metrics,
        reference_levels,
        write_report,
    )

    start = time.perf_counter()
    timings: dict[str, float] = {}
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    _log(FAMILY_NOTE)
    raw = _timed("load", lambda: cf.load_compas(config.data_dir), timings)
    frame, scaling = prepare(raw)
    train, test = split(frame, config.test_share, config.seed)
    scm_train = train.sample(min(config.scm_rows, len(train)), random_state=config.seed)
    _log(
        f"{len(raw)} rows after ProPublica's filters, {len(frame)} African-American or "
        f"Caucasian; {len(train)} training rows ({len(scm_train)} for the SCM fit), "
        f"{len(test)} test rows"
    )
    scm = compas_scm()
    fit_warnings: list[str] = []

    def fit_scm() -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", cf.ConvergenceWarning)
            fitted = scm.fit(
                scm_train,
                chains=config.chains,
                warmup=config.warmup,
                draws=config.draws,
                seed=config.seed,
                progress=False,
            )
        fit_warnings.extend(str(w.message) for w in caught)
        return fitted

    fit = _timed("scm_fit", fit_scm, timings)
    for message in fit_warnings:
        _log(f"warning: {message}")
    fair = cf.FairLearner(
        scm, target=OUTCOME, features="latent", n_samples=config.n_samples,
        scm_fit=fit, seed=config.seed,
    )
    full = cf.full_predictor(scm, OUTCOME, estimator=LogisticRegression(max_iter=1000))
    unaware = cf.unaware_predictor(scm, OUTCOME, estimator=LogisticRegression(max_iter=1000))
    predictors: dict[str, Any] = {"Full": full, "Unaware": unaware, "Fair (U, age)": fair}
    predictors[ORDER_PRESERVING] = cf.OrderPreservingPredictor(full, group=list(PROTECTED))
    for name, predictor in predictors.items():
        _timed(f"train {name}", partial(predictor.fit, train), timings)
    if importlib.util.find_spec("fairlearn") is not None:
        dp = cf.DemographicParityClassifier(
            full, group=list(PROTECTED), random_state=config.seed
        )
        predictors[DP_THRESHOLDS] = _timed(
            f"train {DP_THRESHOLDS}", partial(dp.fit, train, train[OUTCOME]), timings
        )
    else:
        _log(f"fairlearn is not installed: {DP_THRESHOLDS} is left out")
    unlabelled = test.drop(columns=OUTCOME)  # predictions and audit never see the outcome
    y_test = test[OUTCOME].to_numpy()
    probabilities: dict[str, np.ndarray] = {}
    labels: dict[str, np.ndarray] = {}
    metrics_rows = []
    for name, predictor in predictors.items():
        proba = _timed(f"predict {name}", partial(predictor.predict_proba, unlabelled), timings)
        proba = np.asarray(proba)[:, 1]
        probabilities[name] = proba
        labels[name] = (
            np.asarray(predictor.predict(unlabelled)).astype(int)  # randomised thresholds
            if name == DP_THRESHOLDS
            else (proba >= 0.5).astype(int)
        )
        metrics_rows.append(
            {
                "predictor": name,
                "accuracy": float(accuracy_score(y_test, labels[name])),
                "auc": float(roc_auc_score(y_test, proba)),
            }
        )
    rows = unlabelled.sample(min(config.audit_rows, len(unlabelled)), random_state=config.seed)
    rows = rows.sort_index()
    abduction = _timed(
        "abduction of audited rows (one for all predictors)",
        lambda: fit.abduct(
            rows, method="draws", n_samples=config.cf_samples, seed=config.seed
        ),
        timings,
    )
    change_rows = []
    reports: dict[str, Any] = {}
    for name, predictor in predictors.items():
        for response in RESPONSES:
            audit = partial(
                counterfactual_fairness,
                fit,
                rows,
                predictor,
                abduction=abduction,
                seed=config.seed,
                response=response,
            )
            report = _timed(f"counterfactual audit {name} ({response})", audit, timings)
            if response == "probability":
                reports[name] = report
            for r in report.overall.itertuples(index=False):
                change_rows.append(
                    {
                        "predictor": name,
                        "response": "label" if response == "prediction" else "probability",
                        "attribute": r.attribute,
                        "mean_abs_change": r.mean_abs_change,
                        "ci_lower": r.ci_lower,
                        "ci_upper": r.ci_upper,
                        "flip_mean_abs_change": r.flip_mean_abs_change,
                    }
                )
    changes = pd.DataFrame(change_rows)
    reference = reference_levels(fit)
    protected = test[list(PROTECTED)].astype(str)
    group_rows = []
    for name in predictors:
        group = group_metrics(
            y_test, labels[name], protected, reference=reference, intersections=False
        )
        for attribute, level in reference.items():
            other = next(g for g in group.by_group.loc[attribute].index if g != level)
            group_rows.append(
                {
                    "predictor": name,
                    "attribute": attribute,
                    "group": other,
                    "reference": level,
                    "selection_rate_ratio": float(
                        group.ratios.loc[(attribute, other), "predicted_prevalence"]
                    ),
                    "fpr_ratio": float(group.ratios.loc[(attribute, other), "fpr"]),
                    "fnr_ratio": float(group.ratios.loc[(attribute, other), "fnr"]),
                }
            )
    groups = pd.DataFrame(group_rows)
    html_path = _timed(
        "html report",
        lambda: write_report(
            out / "audit.html",
            y_true=y_test,
            y_pred=probabilities,
            protected=protected,
            reference=reference,
            n_bootstrap=config.n_bootstrap,
            seed=config.seed,
            title="COMPAS: fairness audit of Full, Unaware and a counterfactually fair "
            "classifier of two-year recidivism",
            overwrite=True,
            extra_sections=[
                (
                    "Counterfactual fairness of the probabilities (the SCM as the world)",
                    counterfactual_html(reports),
                )
            ],
        ),
        timings,
    )
    total = round(time.perf_counter() - start, 1)
    metrics = pd.DataFrame(metrics_rows)
    results: dict[str, Any] = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "rows": {
            "after_filters": len(raw),
            "two_races": len(frame),
            "train": len(train),
            "scm_fit": len(scm_train),
            "test": len(test),
            "audited": len(rows),
        },
        "age_scaling": scaling,
        "families_note": FAMILY_NOTE,
        "reference_groups": reference,
        "metrics": metrics_rows,
        "counterfactual_change": change_rows,
        "group_audit": group_rows,
        "fit": {
            "backend": fit.backend,
            "chains": config.chains,
            "warmup": config.warmup,
            "draws": config.draws,
            "max_rhat": round(float(fit.diagnostics.max_rhat), 4),
            "min_ess_bulk": round(float(fit.diagnostics.min_ess_bulk), 1),
            "latent_max_rhat": round(float(fit.diagnostics.latent_max_rhat), 4),
            "divergences": int(fit.diagnostics.divergences),
            "warnings": fit_warnings,
        },
        "abduction_engine": abduction.engine,
        "timings_seconds": timings,
        "total_seconds": total,
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
    }
    changes.to_csv(out / "counterfactual_change.csv", index=False)
    groups.to_csv(out / "group_audit.csv", index=False)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=float))
    text = results_markdown(metrics, changes, groups, results)
    (out / "results.md").write_text(text)
    _log(f"total run time {total:.0f} s; report {html_path}; results in {out}")
    logger.info("%s", text)
    return results


def results_markdown(
    metrics: pd.DataFrame, changes: pd.DataFrame, groups: pd.DataFrame, results: dict[str, Any]
) -> str:
    """The results table (accuracy, AUC, counterfactual change, group ratios) in Markdown."""
    pivot = changes.pivot_table(
        index="predictor", columns=["response", "attribute"], values="mean_abs_change",
        sort=False,
    )
    lines = [
        "| predictor | accuracy | AUC | label change do(race) | label change do(sex) "
        "| probability change do(race) | probability change do(sex) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in metrics.itertuples(index=False):
        name = str(row.predictor)
        cells = [
            f"{pivot.loc[name, (response, attribute)]:.3f}"
            for response in ("label", "probability")
            for attribute in PROTECTED
        ]
        lines.append(
            f"| {name} | {row.accuracy:.3f} | {row.auc:.3f} | " + " | ".join(cells) + " |"
        )
    counts = results["rows"]
    lines += [
        "",
        "Counterfactual change: posterior mean of |prediction under do(A = a') - factual "
        f"prediction| over {counts['audited']} unlabelled test rows (the outcome is simulated "
        "in both worlds, never read).",
        "",
        "| predictor | attribute | group / reference | selection-rate ratio | FPR ratio "
        "| FNR ratio |",
        "|---|---|---|---|---|---|",
    ]
    for row in groups.itertuples(index=False):
        lines.append(
            f"| {row.predictor} | {row.attribute} | {row.group} / {row.reference} "
            f"| {row.selection_rate_ratio:.2f} | {row.fpr_ratio:.2f} | {row.fnr_ratio:.2f} |"
        )
    lines += [
        "",
        f"Rows: {counts['train']} train ({counts['scm_fit']} for the SCM fit by NUTS), "
        f"{counts['test']} test. {results['families_note']}",
        "",
        f"Total wall time {results['total_seconds']:.0f} s on {results['machine']['platform']}; "
        "per stage: "
        + ", ".join(f"{k} {v:.1f} s" for k, v in results["timings_seconds"].items())
        + ".",
        "",
    ]
    return "\n".join(lines)


def build_parser(prog: str = "counterfair compas") -> argparse.ArgumentParser:
    """Options of the COMPAS study."""
    p = argparse.ArgumentParser(
        prog=prog,
        description="COMPAS: a counterfactually fair classifier of two-year recidivism "
        "beside Full and Unaware, with accuracy, AUC, counterfactual change under do(race) "
        "and do(sex), a group audit and an HTML report.",
    )
    p.add_argument("--data-dir", default=None, help="folder holding compas-scores-two-years.csv")
    p.add_argument(
        "--out",
        default=None,
        help="output folder (default: results/compas; --quick: a fresh temporary folder)",
    )
    p.add_argument("--quick", action="store_true", help="smoke test: small fit, few rows")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--scm-rows", type=int, default=None, help="training rows of the SCM fit")
    p.add_argument("--audit-rows", type=int, default=None, help="test rows audited")
    return p


def config_from_args(args: argparse.Namespace, out: Path) -> CompasConfig:
    """A :class:`CompasConfig` from parsed options."""
    overrides: dict[str, Any] = {"data_dir": args.data_dir, "out": out, "seed": args.seed}
    if args.scm_rows is not None:
        overrides["scm_rows"] = args.scm_rows
    if args.audit_rows is not None:
        overrides["audit_rows"] = args.audit_rows
    return CompasConfig.quick_mode(**overrides) if args.quick else CompasConfig(**overrides)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the study from command-line options."""
    from counterfair.experiments.arguments import check_data_dir, output_folder

    args = build_parser().parse_args(argv)
    check_data_dir(args.data_dir)
    out = output_folder(args.out, quick=args.quick, study="compas")
    run(config_from_args(args, out))
    return 0
