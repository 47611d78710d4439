"""Fairness measures versus SHAP-based measures across data sets, models and mitigations.

A re-run of the comparison study of Cesaro's dissertation (USP 2020) on UCI Adult and
ProPublica COMPAS.  For every *setting* (a data set and its sensitive attribute), every
model (logistic regression, random forest, gradient boosting, SVM) and every scenario
(original training data, reweighing, undersampling with ``d = 0`` and ``d = -1``) a model
is trained and, on held-out rows, these measures are computed:

* statistical parity difference, equal opportunity difference, disparate impact,
* the counterfactual (attribute-flip) measure on the model's decisions,
* consistency (k = 5, without the sensitive attribute) and the generalized entropy index,
* SHAP disparity and the sensitive attribute's importance (mean ``|SHAP|``) with every
  applicable SHAP method: Kernel SHAP for every model, Tree SHAP for the forests and
  boosting, Linear SHAP for logistic regression.

A *case* is one (setting, model, scenario, SHAP method).  Each measure sorts a case into
"equal between groups" (``|value| <= 1e-3``), "favours the privileged" or "favours the
unprivileged"; measures without a direction (consistency, entropy index, importance) only
say "equal" or "unequal", and a comparison with them uses that coarser scale on both
sides.  The agreement tables give, per measure, the share of cases whose class agrees with
SHAP disparity's and with the importance's; the correlation table and heatmap relate the
measures' variations ``|m(original)| - |m(mitigated)|`` across cases.

Run ``python experiments/explanations.py --data-dir DIR --out results/explanations`` (or
``python experiments/explanations.py ...``); ``--quick`` is a smoke test on small
subsamples.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from counterfair.audit import (
    GroupAudit,
    consistency,
    flip_counterfactual,
    generalized_entropy_index,
    shap_disparity,
)
from counterfair.audit.explanations import shap_values
from counterfair.datasets import DATA_ENV_VAR, load_adult, load_compas
from counterfair.learn.reweighing import reweighing_weights, undersample

EQUAL_TOLERANCE = 1e-3
"""A measure within this distance of its fair value classifies a case as "equal"."""

EQUAL = "equal"
FAVOURS_PRIVILEGED = "favours privileged"
FAVOURS_UNPRIVILEGED = "favours unprivileged"
UNEQUAL = "unequal"

MODELS: tuple[str, ...] = ("logistic_regression", "random_forest", "gradient_boosting", "svm")
SCENARIOS: tuple[str, ...] = ("original", "reweighing", "undersampling_d0", "undersampling_d-1")
SETTINGS: tuple[str, ...] = ("adult-sex", "adult-race", "compas-race", "compas-sex")
SHAP_FOR_MODEL: dict[str, tuple[str, ...]] = {
    "logistic_regression": ("kernel", "linear"),
    "random_forest": ("kernel", "tree"),
    "gradient_boosting": ("kernel", "tree"),
    "svm": ("kernel",),
}

DIRECTIONAL: dict[str, float] = {
    "statistical_parity_difference": 0.0,
    "equal_opportunity_difference": 0.0,
    "disparate_impact": 1.0,
    "counterfactual": 0.0,
    "shap_disparity": 0.0,
}
"""Measures with a direction, and their fair value."""

UNDIRECTED: dict[str, float] = {
    "consistency": 1.0,
    "generalized_entropy_index": 0.0,
    "importance": 0.0,
}
"""Measures that only say equal / unequal, and their fair value."""

FAIRNESS_MEASURES: tuple[str, ...] = (
    "statistical_parity_difference",
    "equal_opportunity_difference",
    "disparate_impact",
    "counterfactual",
    "consistency",
    "generalized_entropy_index",
)
"""Measures compared with the two SHAP-based references."""

CESARO_AGREEMENT: dict[str, tuple[float, float]] = {
    "counterfactual": (0.89, 0.88),
    "statistical_parity_difference": (0.38, 0.58),
}
"""Agreement with SHAP disparity and with importance quoted from the dissertation's
headline (the issue text); other rows of her tables are not reproduced here."""

logger = logging.getLogger(f"counterfair.experiments.{Path(__file__).stem}")


@dataclass(frozen=True, kw_only=True)
class StudyConfig:
    """Sizes and settings of the study (defaults: the full run).

    Attributes
    ----------
    data_dir
        Folder with ``adult.data``, ``adult.test`` and ``compas-scores-two-years.csv``.
    settings, models, scenarios
        What to run (subsets of :data:`SETTINGS`, :data:`MODELS`, :data:`SCENARIOS`).
    max_train
        Training rows per setting (subsampled, stratified by sensitive attribute and label).
    svm_max_train
        Training rows for the SVM (its cost grows quadratically).
    n_eval
        Held-out rows on which the measures are computed.
    n_explain
        Rows explained by Tree / Linear SHAP.
    n_kernel
        Rows explained by Kernel SHAP (a subset of those).
    kernel_background, kernel_samples
        Background rows and coalitions per row of Kernel SHAP.
    tree_background
        Background rows of Linear SHAP (Tree SHAP is path-dependent: no background).
    n_estimators
        Trees of the random forest and of gradient boosting.
    n_bootstrap
        Resamples for the intervals in ``cases.csv``.
    seed
        Seed of every random choice.
    """

    data_dir: str | None = None
    settings: tuple[str, ...] = SETTINGS
    models: tuple[str, ...] = MODELS
    scenarios: tuple[str, ...] = SCENARIOS
    max_train: int = 20000
    svm_max_train: int = 3000
    n_eval: int = 5000
    n_explain: int = 1000
    n_kernel: int = 100
    kernel_background: int = 10
    kernel_samples: int = 256
    tree_background: int = 100
    n_estimators: int = 100
    n_bootstrap: int = 100
    seed: int = 0

    @classmethod
    def quick(cls, **overrides: Any) -> StudyConfig:
        """Small subsamples for a smoke test (well under a minute)."""
        base = cls(settings=("adult-sex", "compas-race"), max_train=800, svm_max_train=300,
                   n_eval=300, n_explain=120, n_kernel=8, kernel_background=5,
                   kernel_samples=40, tree_background=20, n_estimators=10, n_bootstrap=0)
        return replace(base, **overrides)


# ------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Setting:
    """A data set with one sensitive attribute coded 1 = privileged, 0 = unprivileged."""

    name: str
    sensitive: str
    privileged_label: str
    favourable_label: str
    train: pd.DataFrame
    test: pd.DataFrame
    features: tuple[str, ...]
    target: str = "y"


def _adult_features(raw: pd.DataFrame) -> pd.DataFrame:
    married = raw["marital-status"].isin(["Married-civ-spouse", "Married-AF-spouse"])
    return pd.DataFrame({
        "age": raw["age"],
        "education_num": raw["education-num"],
        "hours_per_week": raw["hours-per-week"],
        "capital_gain": raw["capital-gain"],
        "capital_loss": raw["capital-loss"],
        "married": married.astype(int),
        "self_employed": raw["workclass"].str.startswith("Self-emp").astype(int),
        "government": raw["workclass"].str.endswith("-gov").astype(int),
        "white_collar": raw["occupation"].isin(
            ["Exec-managerial", "Prof-specialty", "Tech-support", "Sales"]).astype(int),
        "native_us": (raw["native-country"] == "United-States").astype(int),
        "sex": (raw["sex"] == "Male").astype(int),
        "race": (raw["race"] == "White").astype(int),
        "y": raw["income"],
    })


def _compas_features(raw: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "age": raw["age"],
        "priors_count": raw["priors_count"],
        "juv_fel_count": raw["juv_fel_count"],
        "juv_misd_count": raw["juv_misd_count"],
        "juv_other_count": raw["juv_other_count"],
        "felony": (raw["c_charge_degree"] == "F").astype(int),
        "sex": (raw["sex"] == "Female").astype(int),
        "race": (raw["race"] == "Caucasian").astype(int),
        "y": 1 - raw["two_year_recid"],
    })


def load_settings(config: StudyConfig) -> list[Setting]:
    """Build the requested settings (features coded numerically; 1 = privileged)."""
    out = []
    adult = compas = None
    for name in config.settings:
        dataset, sensitive = name.split("-")
        if dataset == "adult":
            if adult is None:
                raw = load_adult(config.data_dir)
                feats = _adult_features(raw)
                adult = (feats[raw["split"] == "train"].reset_index(drop=True),
                         feats[raw["split"] == "test"].reset_index(drop=True))
            train, test = adult
            label = {"sex": "Male", "race": "White"}[sensitive]
            favourable = "income >50K"
        else:
            if compas is None:
                feats = _compas_features(load_compas(config.data_dir))
                tr, te = train_test_split(feats, test_size=0.3, random_state=config.seed,
                                          stratify=feats["race"] * 2 + feats["y"])
                compas = (tr.reset_index(drop=True), te.reset_index(drop=True))
            train, test = compas
            label = {"sex": "Female", "race": "Caucasian"}[sensitive]
            favourable = "no recidivism in two years"
        features = tuple(c for c in train.columns if c != "y")
        out.append(Setting(name=name, sensitive=sensitive, privileged_label=label,
                           favourable_label=favourable,
                           train=_subsample(train, config.max_train, sensitive, config.seed),
                           test=_subsample(test, config.n_eval, sensitive, config.seed),
                           features=features))
    return out


def _subsample(frame: pd.DataFrame, n: int, sensitive: str, seed: int) -> pd.DataFrame:
    if len(frame) <= n:
        return frame
    kept, _ = train_test_split(frame, train_size=n, random_state=seed,
                               stratify=frame[sensitive] * 2 + frame["y"])
    return kept.reset_index(drop=True)


# ---------------------------------------------------------------------------- models


@dataclass
class Fitted:
    """A trained model with the handles the SHAP estimators need."""

    name: str
    model: Any
    proba: Callable[[pd.DataFrame], np.ndarray]
    predict: Callable[[pd.DataFrame], np.ndarray]
    linear: tuple[np.ndarray, float] | None = None


def _make(name: str, config: StudyConfig) -> Any:
    if name == "logistic_regression":
        return Pipeline([("scale", StandardScaler()),
                         ("model", LogisticRegression(max_iter=2000))])
    if name == "random_forest":
        return RandomForestClassifier(n_estimators=config.n_estimators, max_depth=8,
                                      min_samples_leaf=5, random_state=config.seed)
    if name == "gradient_boosting":
        return GradientBoostingClassifier(n_estimators=config.n_estimators, max_depth=3,
                                          random_state=config.seed)
    # Platt scaling on cross-validated decision values (SVC(probability=True) is deprecated)
    return Pipeline([("scale", StandardScaler()),
                     ("model", CalibratedClassifierCV(SVC(random_state=config.seed), cv=3,
                                                      ensemble=False))])


def fit_model(name: str, X: pd.DataFrame, y: np.ndarray, weights: np.ndarray | None,
              config: StudyConfig) -> Fitted:
    """Train one model (SVM on at most ``svm_max_train`` rows)."""
    model = _make(name, config)
    if name == "svm" and len(X) > config.svm_max_train:
        rows = np.random.default_rng(config.seed).choice(len(X), config.svm_max_train,
                                                         replace=False)
        X, y = X.iloc[rows], y[rows]
        weights = None if weights is None else weights[rows]
    values = X.to_numpy(dtype=np.float64)
    if weights is None:
        model.fit(values, y)
    elif isinstance(model, Pipeline):
        model.fit(values, y, model__sample_weight=weights)
    else:
        model.fit(values, y, sample_weight=weights)

    def proba(frame: pd.DataFrame) -> np.ndarray:
        return np.asarray(model.predict_proba(frame.to_numpy(dtype=np.float64))[:, 1])

    def predict(frame: pd.DataFrame) -> np.ndarray:
        return np.asarray(model.predict(frame.to_numpy(dtype=np.float64)), dtype=np.float64)

    linear = None
    if name == "logistic_regression":
        scaler, lr = model.named_steps["scale"], model.named_steps["model"]
        coef = lr.coef_[0] / scaler.scale_
        intercept = float(lr.intercept_[0] - (coef * scaler.mean_).sum())
        linear = (coef, intercept)
    return Fitted(name=name, model=model, proba=proba, predict=predict, linear=linear)


def training_data(setting: Setting, scenario: str,
                  seed: int) -> tuple[pd.DataFrame, np.ndarray, np.ndarray | None]:
    """Features, labels and weights of the training data under one scenario."""
    train = setting.train
    a, y = train[setting.sensitive].to_numpy(), train["y"].to_numpy()
    X = train[list(setting.features)]
    if scenario == "original":
        return X, y, None
    if scenario == "reweighing":
        return X, y, reweighing_weights(a, y).to_numpy()
    d = {"undersampling_d0": 0.0, "undersampling_d-1": -1.0}[scenario]
    rows, _ = undersample(a, y, reference=1, d=d, seed=seed)
    return X.iloc[rows].reset_index(drop=True), y[rows], None


# -------------------------------------------------------------------------- measures


def classify(measure: str, value: float) -> str:
    """The class a measure's value gives a case (see the module docstring)."""
    if not np.isfinite(value):
        return "undefined"
    if measure in DIRECTIONAL:
        gap = value - DIRECTIONAL[measure]
        if abs(gap) <= EQUAL_TOLERANCE:
            return EQUAL
        return FAVOURS_PRIVILEGED if gap < 0 else FAVOURS_UNPRIVILEGED
    gap = abs(value - UNDIRECTED[measure])
    return EQUAL if gap <= EQUAL_TOLERANCE else UNEQUAL


def distance_from_fair(measure: str, value: float) -> float:
    """``|m|`` of the variations: the distance of a value from the measure's fair value."""
    fair = DIRECTIONAL.get(measure, UNDIRECTED.get(measure, 0.0))
    return abs(value - fair)


def agrees(measure_class: str, reference_class: str) -> bool:
    """Whether two classes agree (on the equal / unequal scale if either lacks direction)."""
    if UNEQUAL in (measure_class, reference_class):
        return (measure_class == EQUAL) == (reference_class == EQUAL)
    return measure_class == reference_class


def _sample_rows(a: np.ndarray, n: int, seed: int) -> np.ndarray:
    """At most ``n`` positions stratified by the sensitive attribute."""
    if a.size <= n:
        return np.arange(a.size)
    rows, _ = train_test_split(np.arange(a.size), train_size=n, random_state=seed, stratify=a)
    return np.sort(rows)


def evaluate(setting: Setting, fitted: Fitted, config: StudyConfig) -> list[dict[str, Any]]:
    """All measures of one trained model, one record per SHAP method."""
    test = setting.test
    X = test[list(setting.features)]
    y = test["y"].to_numpy()
    a = test[setting.sensitive].to_numpy()
    decisions = fitted.predict(X)
    group = GroupAudit(
        y, decisions, a, n_bootstrap=config.n_bootstrap, seed=config.seed,
    ).two_group(reference=1)
    flip = flip_counterfactual(fitted.predict, X, attribute=setting.sensitive, privileged=1,
                               unprivileged=0, n_bootstrap=config.n_bootstrap,
                               seed=config.seed)
    base: dict[str, Any] = {
        "accuracy": float((decisions == y).mean()),
        "counterfactual": flip.mean,
        "counterfactual_lower": flip.lower,
        "counterfactual_upper": flip.upper,
        "consistency": consistency(X, decisions, exclude=[setting.sensitive]),
        "generalized_entropy_index": generalized_entropy_index(y, decisions).total,
    }
    for measure, row in group.iterrows():
        base[str(measure)] = float(row["estimate"])
        base[f"{measure}_lower"] = float(row["lower"])
        base[f"{measure}_upper"] = float(row["upper"])

    explain_rows = _sample_rows(a, config.n_explain, config.seed)
    kernel_rows = explain_rows[_sample_rows(a[explain_rows], config.n_kernel, config.seed)]
    train_X = setting.train[list(setting.features)]
    records = []
    for method in SHAP_FOR_MODEL[fitted.name]:
        rows = kernel_rows if method == "kernel" else explain_rows
        size = config.kernel_background if method == "kernel" else config.tree_background
        background = train_X.sample(n=min(size, len(train_X)), random_state=config.seed)
        started = time.perf_counter()
        if method == "kernel":
            result = shap_values(X.iloc[rows], method="kernel", background=background,
                                 predict=fitted.proba, n_samples=config.kernel_samples,
                                 seed=config.seed)
        elif method == "tree":
            result = shap_values(X.iloc[rows], method="tree", background=None,
                                 model=fitted.model)
        else:
            result = shap_values(X.iloc[rows], method="linear", background=background,
                                 model=fitted.linear)
        seconds = time.perf_counter() - started
        disparity = shap_disparity(result.values, a[rows], attribute=setting.sensitive,
                                   privileged=1, n_bootstrap=config.n_bootstrap,
                                   seed=config.seed)
        records.append({**base, "shap_method": method, "shap_rows": len(rows),
                        "shap_seconds": seconds,
                        "shap_disparity": disparity.disparity,
                        "shap_disparity_lower": disparity.disparity_lower,
                        "shap_disparity_upper": disparity.disparity_upper,
                        "importance": disparity.importance,
                        "importance_rank": disparity.rank,
                        "n_features": len(setting.features)})
    return records


# ---------------------------------------------------------------------------- tables


def agreement_tables(cases: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Share of cases in which each measure's class agrees with the two SHAP references.

    Returns
    -------
    tuple of pandas.DataFrame
        Overall (rows: measures; columns ``vs_shap_disparity``, ``vs_importance``,
        ``cases``) and by SHAP method (columns MultiIndex ``(reference, method)``).
    """
    rows = {}
    by_method = {}
    for measure in FAIRNESS_MEASURES:
        hits = {}
        for reference in ("shap_disparity", "importance"):
            hits[reference] = [
                agrees(classify(measure, float(m)), classify(reference, float(r)))
                for m, r in zip(cases[measure], cases[reference], strict=True)
            ]
        frame = pd.DataFrame(hits)
        frame["shap_method"] = cases["shap_method"].to_numpy()
        rows[measure] = {"vs_shap_disparity": frame["shap_disparity"].mean(),
                         "vs_importance": frame["importance"].mean(), "cases": len(frame)}
        grouped = frame.groupby("shap_method")[["shap_disparity", "importance"]].mean()
        by_method[measure] = {(ref, method): grouped.loc[method, ref]
                              for ref in ("shap_disparity", "importance")
                              for method in grouped.index}
    overall = pd.DataFrame(rows).T.rename_axis("measure")
    overall["cases"] = overall["cases"].astype(int)
    method_table = pd.DataFrame(by_method).T.rename_axis("measure")
    method_table.columns = pd.MultiIndex.from_tuples(
        [(f"vs_{ref}", method) for ref, method in method_table.columns],
        names=["reference", "shap_method"])
    return overall, method_table


def variations(cases: pd.DataFrame) -> pd.DataFrame:
    """``|m(original)| - |m(mitigated)|`` per (setting, model, SHAP method, mitigation).

    ``|m|`` is the distance from the measure's fair value (``|1 - DI|`` for disparate
    impact, ``1 - consistency`` for consistency); positive variations mean that the
    mitigation moved the measure towards fairness.
    """
    measures = [*FAIRNESS_MEASURES, "shap_disparity", "importance"]
    keys = ["setting", "model", "shap_method"]
    distance = cases[[*keys, "scenario"]].copy()
    for m in measures:
        distance[m] = [distance_from_fair(m, float(v)) for v in cases[m]]
    original = distance[distance["scenario"] == "original"].set_index(keys)[measures]
    out = []
    for scenario in distance["scenario"].unique():
        if scenario == "original":
            continue
        mitigated = distance[distance["scenario"] == scenario].set_index(keys)[measures]
        delta = (original - mitigated).dropna(how="all").reset_index()
        delta.insert(3, "mitigation", scenario)
        out.append(delta)
    if not out:
        return pd.DataFrame(columns=[*keys, "mitigation", *measures])
    return pd.concat(out, ignore_index=True)


def correlation_table(variation: pd.DataFrame) -> pd.DataFrame:
    """Pearson correlations between the measures' variations (NaN for constant columns)."""
    measures = [*FAIRNESS_MEASURES, "shap_disparity", "importance"]
    values = variation[measures].astype(float)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # constant columns: NaN on purpose
        return values.corr(method="pearson")


def _markdown(frame: pd.DataFrame, digits: int = 2) -> str:
    """A pipe table without the optional ``tabulate`` dependency."""
    flat = frame.copy()
    if isinstance(flat.columns, pd.MultiIndex):
        flat.columns = [" ".join(map(str, c)) for c in flat.columns]
    header = [str(flat.index.name or ""), *map(str, flat.columns)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for index, row in flat.iterrows():
        cells = []
        for value in row:
            if isinstance(value, float | np.floating):
                cells.append("n/a" if np.isnan(value) else f"{value:.{digits}f}")
            else:
                cells.append(str(value))
        lines.append("| " + " | ".join([str(index), *cells]) + " |")
    return "\n".join(lines)


def comparison_table(overall: pd.DataFrame) -> pd.DataFrame:
    """Our agreement beside the dissertation's headline numbers."""
    out = overall[["vs_shap_disparity", "vs_importance"]].copy()
    out["cesaro_vs_shap_disparity"] = [CESARO_AGREEMENT.get(m, (np.nan, np.nan))[0]
                                       for m in out.index]
    out["cesaro_vs_importance"] = [CESARO_AGREEMENT.get(m, (np.nan, np.nan))[1]
                                   for m in out.index]
    return out


def heatmap(correlation: pd.DataFrame, path: Path) -> None:
    """Write the correlation heatmap as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [c.replace("_", " ") for c in correlation.columns]
    fig, ax = plt.subplots(figsize=(8, 7))
    image = ax.imshow(correlation.to_numpy(dtype=float), cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    for i in range(len(labels)):
        for j in range(len(labels)):
            value = correlation.iloc[i, j]
            if np.isfinite(value):
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(image, ax=ax, shrink=0.8, label="Pearson correlation")
    ax.set_title("Correlation of variations |m(original)| - |m(mitigated)|")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ------------------------------------------------------------------------------- run


def _log(message: str) -> None:
    logger.info("explanations %s: %s", time.strftime("%H:%M:%S"), message)


def run(config: StudyConfig, out: Path, *, log: Callable[[str], None] = _log) -> dict[str, Any]:
    """Run the study and write its outputs into ``out``.

    Returns
    -------
    dict
        ``cases`` (DataFrame), ``agreement``, ``agreement_by_method``, ``correlation``,
        ``seconds`` (wall time) and ``files`` (written paths).
    """
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    records = []
    for setting in load_settings(config):
        log(f"{setting.name}: {len(setting.train)} training rows, {len(setting.test)} "
            f"evaluation rows, {len(setting.features)} features")
        for scenario in config.scenarios:
            X, y, weights = training_data(setting, scenario, config.seed)
            for model in config.models:
                tick = time.perf_counter()
                fitted = fit_model(model, X, y, weights, config)
                for record in evaluate(setting, fitted, config):
                    records.append({"setting": setting.name, "model": model,
                                    "scenario": scenario, "train_rows": len(X), **record})
                log(f"  {scenario:18s} {model:20s} {time.perf_counter() - tick:6.1f} s")
    cases = pd.DataFrame(records)
    for measure in (*FAIRNESS_MEASURES, "shap_disparity", "importance"):
        cases[f"{measure}_class"] = [classify(measure, float(v)) for v in cases[measure]]
    overall, by_method = agreement_tables(cases)
    variation = variations(cases)
    correlation = correlation_table(variation)
    comparison = comparison_table(overall)
    seconds = time.perf_counter() - started

    files = {
        "cases.csv": cases.to_csv(index=False),
        "agreement.csv": overall.to_csv(),
        "agreement_by_method.csv": by_method.to_csv(),
        "variations.csv": variation.to_csv(index=False),
        "correlation.csv": correlation.to_csv(),
    }
    for name, text in files.items():
        (out / name).write_text(text, encoding="utf-8")
    markdown = "\n\n".join([
        "## Agreement with SHAP disparity and with the attribute's importance",
        _markdown(comparison),
        "## Agreement by SHAP method",
        _markdown(by_method),
        "## Correlation of variations |m(original)| - |m(mitigated)|",
        _markdown(correlation),
    ])
    (out / "tables.md").write_text(markdown + "\n", encoding="utf-8")
    heatmap(correlation, out / "correlation.png")
    meta = {"config": asdict(config), "cases": len(cases), "wall_seconds": seconds,
            "python": platform.python_version(), "cpu_count": os.cpu_count()}
    (out / "run.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    written = sorted(str(p) for p in out.iterdir())
    log(f"{len(cases)} cases in {seconds:.1f} s; outputs in {out}")
    return {"cases": cases, "agreement": overall, "agreement_by_method": by_method,
            "correlation": correlation, "comparison": comparison, "seconds": seconds,
            "files": written}


_LABELS = {
    "adult": {"sex": ("Female", "Male"), "race": ("non-White", "White")},
    "compas": {"sex": ("Male", "Female"), "race": ("non-Caucasian", "Caucasian")},
}
"""Group names of the 0/1 codes (0: unprivileged, 1: privileged) per data set."""

REPORT_MODELS: tuple[tuple[str, str], ...] = (("logistic_regression", "linear"),
                                              ("gradient_boosting", "tree"))
"""Models audited in the example report, with the SHAP method used for each."""


def write_example_report(config: StudyConfig, path: Path, *, setting_name: str = "compas-race",
                         n_bootstrap: int = 200) -> Path:
    """Audit report of two models trained on the original data of one setting.

    The report has the group audit (summary table, verdicts, intervals), the
    explanation-based measures (SHAP disparity / importance / rank, the flip measure,
    consistency, generalized entropy) and the subpopulations whose decisions depend on
    the sensitive attribute (FairTest-style search over the non-sensitive features).
    """
    from counterfair.audit import SubpopulationSettings, find_subpopulations, write_report
    from counterfair.audit.explanations import ExplanationAudit

    setting = next(s for s in load_settings(replace(config, settings=(setting_name,))))
    dataset = setting_name.split("-")[0]
    test = setting.test
    X = test[list(setting.features)]
    y = test["y"].to_numpy()
    protected = pd.DataFrame({
        name: np.where(test[name] == 1, labels[1], labels[0])
        for name, labels in _LABELS[dataset].items()
    })
    train_X, train_y, _ = training_data(setting, "original", config.seed)
    decisions: dict[str, np.ndarray] = {}
    audits: dict[str, ExplanationAudit] = {}
    a = test[setting.sensitive].to_numpy()
    rows = _sample_rows(a, config.n_explain, config.seed)
    for model_name, method in REPORT_MODELS:
        fitted = fit_model(model_name, train_X, train_y, None, config)
        decisions[model_name] = fitted.predict(X)
        background = train_X.sample(n=min(config.tree_background, len(train_X)),
                                    random_state=config.seed)
        result = shap_values(X.iloc[rows], method=method,  # type: ignore[arg-type]
                             background=None if method == "tree" else background,
                             model=fitted.model if method == "tree" else fitted.linear)
        audits[model_name] = ExplanationAudit(
            shap=shap_disparity(result.values, a[rows], attribute=setting.sensitive,
                                privileged=1, n_bootstrap=n_bootstrap, seed=config.seed),
            flip=flip_counterfactual(fitted.predict, X, attribute=setting.sensitive,
                                     privileged=1, unprivileged=0, n_bootstrap=n_bootstrap,
                                     seed=config.seed),
            consistency=consistency(X, decisions[model_name], exclude=[setting.sensitive]),
            entropy=generalized_entropy_index(y, decisions[model_name],
                                              protected=protected[setting.sensitive],
                                              n_bootstrap=n_bootstrap, seed=config.seed),
            shap_method=f"{method} SHAP on {len(rows)} rows")
    users = X.drop(columns=[setting.sensitive])
    last = REPORT_MODELS[-1][0]
    unprivileged, privileged = _LABELS[dataset][setting.sensitive]
    subpopulations = find_subpopulations(
        users, protected[setting.sensitive], decisions[last].astype(int),
        protected_group=unprivileged,
        settings=SubpopulationSettings(max_depth=3, n_bootstrap=n_bootstrap, seed=config.seed),
    )
    return write_report(
        path,
        GroupAudit(
            y, decisions, protected,
            reference={name: labels[1] for name, labels in _LABELS[dataset].items()},
            n_bootstrap=n_bootstrap, seed=config.seed,
        ),
        title=f"{setting_name}: audit of two models (favourable: {setting.favourable_label})",
        explanations=audits, subpopulations=subpopulations, overwrite=True,
        extra_sections=[("About the subpopulations",
                         f"<p>Searched over the features other than {setting.sensitive} on "
                         f"the decisions of {last}; protected group: {unprivileged} "
                         f"(vs {privileged}), outcome: favourable decision.</p>")],
    )


def build_parser() -> argparse.ArgumentParser:
    """Argument parser of the ``explanations`` command."""
    parser = argparse.ArgumentParser(
        prog="python experiments/explanations.py",
        description="Fairness measures vs SHAP-based measures on Adult and COMPAS "
                    "(Cesaro 2020): agreement tables and correlation heatmap.")
    parser.add_argument("--data-dir", default=None,
                        help=f"folder with adult.data, adult.test and "
                             f"compas-scores-two-years.csv (default: ${DATA_ENV_VAR})")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test on small subsamples (well under a minute)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(None if argv is None else list(argv))
    data_dir = args.data_dir or os.environ.get(DATA_ENV_VAR)
    if not data_dir:
        parser.error(f"--data-dir is required when ${DATA_ENV_VAR} is not set")
    factory = StudyConfig.quick if args.quick else StudyConfig
    config = factory(data_dir=data_dir, seed=args.seed)
    try:
        result = run(config, Path(args.out))
        report = write_example_report(config, Path(args.out) / "audit_compas_race.html",
                                      n_bootstrap=20 if args.quick else 200)
    except FileNotFoundError as error:
        logger.error("explanations: %s", error)
        return 2
    logger.info("%s", _markdown(result["comparison"]))
    logger.info("example audit report: %s", report)
    return 0


if __name__ == "__main__":  # python experiments/explanations.py [options]
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from experiments.arguments import run_script

    raise SystemExit(run_script(main))
