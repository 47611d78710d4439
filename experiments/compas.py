"""COMPAS: a counterfactually fair recidivism classifier, on ProPublica's data.

The second study on real data (after the law school one). One command runs it::

    python experiments/compas.py --data-dir /path/to/data --out results/compas

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
import sys
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

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")


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


@dataclass(frozen=True)
class _Rows:
    """The study's rows: as loaded, prepared, split and subsampled for the SCM fit."""

    raw: pd.DataFrame
    frame: pd.DataFrame
    scaling: dict[str, float]
    train: pd.DataFrame
    test: pd.DataFrame
    scm_train: pd.DataFrame


@dataclass(frozen=True)
class _Evaluation:
    """Each predictor's test probabilities and labels, and its accuracy and AUC rows."""

    probabilities: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    metrics_rows: list[dict[str, Any]]


@dataclass(frozen=True)
class _CounterfactualAudit:
    """The audited rows, their abduction, the change rows and the probability reports."""

    rows: pd.DataFrame
    abduction: Any
    change_rows: list[dict[str, Any]]
    reports: dict[str, Any]


def run(config: CompasConfig) -> dict[str, Any]:
    """Run the study; write its outputs under ``config.out`` and return the results."""
    start = time.perf_counter()
    timings: dict[str, float] = {}
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    _log(FAMILY_NOTE)
    data = _load_rows(config, timings)
    scm = compas_scm()
    fit, fit_warnings = _fit_scm(scm, data.scm_train, config, timings)
    predictors = _train_predictors(scm, fit, data.train, config, timings)
    unlabelled = data.test.drop(columns=OUTCOME)  # predictions and audit never see the outcome
    y_test = data.test[OUTCOME].to_numpy()
    evaluation = _evaluate(predictors, unlabelled, y_test, timings)
    audit = _counterfactual_audit(fit, unlabelled, predictors, config, timings)
    reference, protected, group_rows = _group_audit(fit, data.test, y_test, evaluation.labels)
    html_path = _write_html_report(
        out, y_test, evaluation.probabilities, protected, reference, audit.reports, config,
        timings,
    )
    total = round(time.perf_counter() - start, 1)
    results = _results(
        config, data, reference, evaluation, audit, group_rows, fit, fit_warnings, timings, total
    )
    text = _write_outputs(out, evaluation, audit, group_rows, results)
    _log(f"total run time {total:.0f} s; report {html_path}; results in {out}")
    logger.info("%s", text)
    return results


def _load_rows(config: CompasConfig, timings: dict[str, float]) -> _Rows:
    """Load the data, keep the study's columns, split them and subsample the SCM's rows."""
    import counterfair as cf

    raw = _timed("load", lambda: cf.datasets.load_compas(config.data_dir), timings)
    frame, scaling = prepare(raw)
    train, test = split(frame, config.test_share, config.seed)
    scm_train = train.sample(min(config.scm_rows, len(train)), random_state=config.seed)
    _log(
        f"{len(raw)} rows after ProPublica's filters, {len(frame)} African-American or "
        f"Caucasian; {len(train)} training rows ({len(scm_train)} for the SCM fit), "
        f"{len(test)} test rows"
    )
    return _Rows(
        raw=raw, frame=frame, scaling=scaling, train=train, test=test, scm_train=scm_train
    )


def _fit_scm(
    scm: Any, scm_train: pd.DataFrame, config: CompasConfig, timings: dict[str, float]
) -> tuple[Any, list[str]]:
    """Fit the SCM by NUTS; return the fit and its convergence warnings (also logged)."""
    import warnings

    import counterfair as cf

    fit_warnings: list[str] = []

    def fit_scm() -> Any:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", cf.errors.ConvergenceWarning)
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
    return fit, fit_warnings


def _train_predictors(
    scm: Any, fit: Any, train: pd.DataFrame, config: CompasConfig, timings: dict[str, float]
) -> dict[str, Any]:
    """Train Full, Unaware, Fair, the order-preserving baseline and (with fairlearn) DP."""
    import counterfair as cf

    fair = cf.FairLearner(
        fit,
        target=OUTCOME,
        features=cf.inputs.Latent(),
        n_samples=config.n_samples,
        seed=config.seed,
    )
    full = cf.full_predictor(scm, OUTCOME, estimator=LogisticRegression(max_iter=1000))
    unaware = cf.unaware_predictor(scm, OUTCOME, estimator=LogisticRegression(max_iter=1000))
    predictors: dict[str, Any] = {"Full": full, "Unaware": unaware, "Fair (U, age)": fair}
    predictors[ORDER_PRESERVING] = cf.OrderPreservingPredictor(full, attribute=list(PROTECTED))
    for name, predictor in predictors.items():
        _timed(f"train {name}", partial(predictor.fit, train), timings)
    if importlib.util.find_spec("fairlearn") is not None:
        dp = cf.DemographicParityClassifier(
            full, attribute=list(PROTECTED), random_state=config.seed
        )
        predictors[DP_THRESHOLDS] = _timed(
            f"train {DP_THRESHOLDS}", partial(dp.fit, train, train[OUTCOME]), timings
        )
    else:
        _log(f"fairlearn is not installed: {DP_THRESHOLDS} is left out")
    return predictors


def _evaluate(
    predictors: dict[str, Any],
    unlabelled: pd.DataFrame,
    y_test: np.ndarray,
    timings: dict[str, float],
) -> _Evaluation:
    """Each predictor's test probabilities and labels, scored by accuracy and AUC."""
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
    return _Evaluation(probabilities=probabilities, labels=labels, metrics_rows=metrics_rows)


def _counterfactual_audit(
    fit: Any,
    unlabelled: pd.DataFrame,
    predictors: dict[str, Any],
    config: CompasConfig,
    timings: dict[str, float],
) -> _CounterfactualAudit:
    """Audit every predictor's labels and probabilities under do(race) and do(sex).

    The audited test rows are abducted once, for all predictors and responses.
    """
    from counterfair.audit import AuditSettings, counterfactual_fairness

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
                settings=AuditSettings(seed=config.seed, response=response),
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
    return _CounterfactualAudit(
        rows=rows, abduction=abduction, change_rows=change_rows, reports=reports
    )


def _group_audit(
    fit: Any, test: pd.DataFrame, y_test: np.ndarray, labels: dict[str, np.ndarray]
) -> tuple[dict[str, str], pd.DataFrame, list[dict[str, Any]]]:
    """Selection-rate, FPR and FNR ratios of each predictor's labels, per attribute.

    Returns the reference groups, the test rows' protected columns and one row per
    predictor and attribute (the other group against the reference).
    """
    from counterfair.audit import GroupAudit, reference_levels

    reference = reference_levels(fit)
    protected = test[list(PROTECTED)].astype(str)
    group_rows = []
    for name in labels:
        group = GroupAudit(
            y_test, labels[name], protected, intersections=False, reference=reference,
        ).metrics()
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
    return reference, protected, group_rows


def _write_html_report(
    out: Path,
    y_test: np.ndarray,
    probabilities: dict[str, np.ndarray],
    protected: pd.DataFrame,
    reference: dict[str, str],
    reports: dict[str, Any],
    config: CompasConfig,
    timings: dict[str, float],
) -> Any:
    """Write ``audit.html`` (group audit and counterfactual section); return its path."""
    from counterfair.audit import GroupAudit, write_report
    from counterfair.audit.causal_report import counterfactual_html

    return _timed(
        "html report",
        lambda: write_report(
            out / "audit.html",
            GroupAudit(
                y_test, probabilities, protected, reference=reference,
                n_bootstrap=config.n_bootstrap, seed=config.seed,
            ),
            title="COMPAS: fairness audit of Full, Unaware and a counterfactually fair "
            "classifier of two-year recidivism",
            extra_sections=[
                (
                    "Counterfactual fairness of the probabilities (the SCM as the world)",
                    counterfactual_html(reports),
                )
            ],
            overwrite=True,
        ),
        timings,
    )


def _results(
    config: CompasConfig,
    data: _Rows,
    reference: dict[str, str],
    evaluation: _Evaluation,
    audit: _CounterfactualAudit,
    group_rows: list[dict[str, Any]],
    fit: Any,
    fit_warnings: list[str],
    timings: dict[str, float],
    total: float,
) -> dict[str, Any]:
    """The study's results, JSON-ready (settings, sizes, tables, diagnostics, timings)."""
    return {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "rows": {
            "after_filters": len(data.raw),
            "two_races": len(data.frame),
            "train": len(data.train),
            "scm_fit": len(data.scm_train),
            "test": len(data.test),
            "audited": len(audit.rows),
        },
        "age_scaling": data.scaling,
        "families_note": FAMILY_NOTE,
        "reference_groups": reference,
        "metrics": evaluation.metrics_rows,
        "counterfactual_change": audit.change_rows,
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
        "abduction_engine": audit.abduction.engine,
        "timings_seconds": timings,
        "total_seconds": total,
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
    }


def _write_outputs(
    out: Path,
    evaluation: _Evaluation,
    audit: _CounterfactualAudit,
    group_rows: list[dict[str, Any]],
    results: dict[str, Any],
) -> str:
    """Write ``counterfactual_change.csv``, ``group_audit.csv``, ``results.json`` and
    ``results.md``; return the Markdown."""
    changes = pd.DataFrame(audit.change_rows)
    groups = pd.DataFrame(group_rows)
    changes.to_csv(out / "counterfactual_change.csv", index=False)
    groups.to_csv(out / "group_audit.csv", index=False)
    (out / "results.json").write_text(json.dumps(results, indent=2, default=float))
    text = results_markdown(pd.DataFrame(evaluation.metrics_rows), changes, groups, results)
    (out / "results.md").write_text(text)
    return text


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


def build_parser(prog: str = "python experiments/compas.py") -> argparse.ArgumentParser:
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
    from experiments.arguments import check_data_dir, output_folder

    args = build_parser().parse_args(argv)
    check_data_dir(args.data_dir)
    out = output_folder(args.out, quick=args.quick, study="compas")
    run(config_from_args(args, out))
    return 0


if __name__ == "__main__":  # python experiments/compas.py [options]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.arguments import run_script

    raise SystemExit(run_script(main))
