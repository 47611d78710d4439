"""A predictor that says nothing is named (issue 30): the one-line warning of
``counterfair learn`` from held-out scores, and the warnings at the top of a report."""

from __future__ import annotations

import numpy as np
import pandas as pd

from counterfair.audit import GroupAudit
from counterfair.audit.report import CONSTANT_PREDICTOR, render_report
from counterfair.learn.held_out import HeldOutScores, usefulness_warning


def scores(predictor: dict[str, float], baseline: dict[str, float],
           task: str = "classification") -> HeldOutScores:
    table = pd.DataFrame([predictor, baseline], index=["predictor", "baseline"])
    return HeldOutScores(table=table, task=task, folds=5, n_rows=100,  # type: ignore[arg-type]
                         baseline="majority class 'no'", positive="yes")


def test_constant_and_no_better_is_a_constant_predictor() -> None:
    found = scores({"accuracy": 0.88, "AUC": 0.5, "Brier": 0.106},
                   {"accuracy": 0.88, "AUC": 0.5, "Brier": 0.105})
    assert found.no_better()
    line = usefulness_warning(found, np.repeat("no", 100), np.full(100, 0.12))
    assert line is not None and line.startswith("warning: constant predictor: every "
                                                "prediction is 'no'")
    assert "\n" not in line


def test_constant_labels_with_informative_probabilities() -> None:
    found = scores({"accuracy": 0.88, "AUC": 0.69, "Brier": 0.100},
                   {"accuracy": 0.88, "AUC": 0.5, "Brier": 0.105})
    assert not found.no_better()
    line = usefulness_warning(found, np.repeat("no", 100), np.linspace(0.01, 0.4, 100))
    assert line is not None and "only the probabilities vary" in line and "AUC 0.690" in line


def test_varying_predictions_no_better_than_baseline_and_a_useful_one() -> None:
    worse = scores({"RMSE": 1.2, "R2": -0.1}, {"RMSE": 1.1, "R2": 0.0}, task="regression")
    line = usefulness_warning(worse, np.linspace(0, 1, 100))
    assert line == ("warning: the predictor does no better than the baseline on held-out "
                    "rows (RMSE 1.2000 vs 1.1000)")
    better = scores({"RMSE": 0.8, "R2": 0.4}, {"RMSE": 1.1, "R2": 0.0}, task="regression")
    assert usefulness_warning(better, np.linspace(0, 1, 100)) is None
    assert "RMSE" in str(better) and "predictor" in str(better)


def test_report_warns_at_the_top_of_a_constant_predictor() -> None:
    y = np.array([0, 1, 0, 1, 0, 0, 1, 0])
    groups = pd.DataFrame({"race": list("aabbaabb")})
    html = render_report(
        GroupAudit(y, {"constant": np.zeros(8), "score": y * 0.8 + 0.1}, groups),
        warnings=["from learn: says nothing"],
    )
    top = html[: html.index('<section id="findings">')]
    assert "<strong>Warning:</strong> from learn: says nothing" in top
    assert CONSTANT_PREDICTOR.format(name="constant", value=0.0) in top
    assert "score: every prediction" not in top


def test_a_gain_within_chance_is_no_better_and_one_beyond_it_is_better() -> None:
    """"Better" is beyond 3.09 standard errors of the paired per-row loss difference."""
    table = pd.DataFrame([{"accuracy": 0.88, "AUC": 0.56, "Brier": 0.1053},
                          {"accuracy": 0.88, "AUC": 0.5, "Brier": 0.1056}],
                         index=["predictor", "baseline"])

    def with_gain(gain: float, se: float) -> HeldOutScores:
        return HeldOutScores(table=table, task="classification", folds=3, n_rows=300,
                             baseline="majority class 'no'", positive="yes",
                             loss_gain=gain, loss_gain_se=se)

    assert with_gain(0.0003, 0.001).no_better()  # the table alone would call it better
    assert with_gain(0.0030, 0.001).no_better()  # 3 se: still within chance
    assert not with_gain(0.0032, 0.001).no_better()
    assert with_gain(-0.01, 0.001).no_better()


def test_the_gain_of_pure_noise_is_within_chance_and_of_the_truth_beyond_it() -> None:
    """The gain and its se from per-row losses: noise probabilities gain nothing beyond
    chance, the true probabilities of a strong signal do (held_out's own _gain)."""
    from _seeds import shifted

    from counterfair.learn.held_out import GAIN_Z, _gain

    rng = np.random.default_rng(shifted(12))
    n = 2000
    signal = rng.normal(size=n)
    p_true = 1.0 / (1.0 + np.exp(-(-1.5 + 2.0 * signal)))
    y = (rng.random(n) < p_true).astype(float)
    base = np.full(n, y.mean())
    noise = np.clip(base + rng.normal(0.0, 0.01, n), 0.0, 1.0)
    gain, se = _gain((noise - y) ** 2, (base - y) ** 2)
    assert gain <= GAIN_Z * se
    gain, se = _gain((p_true - y) ** 2, (base - y) ** 2)
    assert gain > GAIN_Z * se
    difference = (base - y) ** 2 - (p_true - y) ** 2
    assert se == np.std(difference, ddof=1) / np.sqrt(n)
