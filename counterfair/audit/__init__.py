"""Group-fairness audit of any predictor.

* :func:`group_metrics` -- per-group classification measures, disparities to a reference
  group, parity verdicts (four-fifths rule) and bootstrap intervals (:class:`GroupReport`).
* :func:`regression_metrics` -- the same for real-valued outcomes (:class:`RegressionReport`).
* :func:`compare_slices` -- differences between two confusion matrices
  (:class:`ConfusionCounts`).
* :func:`disparate_impact` -- favourable-rate ratio in percent (:class:`DisparateImpact`).
* :func:`dependence_measures` and friends -- lift, TVD, (conditional) mutual information,
  G-test, with interval-based verdicts (:class:`DependenceReport`).
* :func:`counterfactual_fairness` -- causal change of a predictor's output under
  ``do(A = a')`` with a fitted SCM, beside the naive flip test (:class:`CounterfactualReport`).
* :func:`write_report` -- self-contained HTML report.
"""

from .bootstrap import bootstrap, bootstrap_interval, percentile_interval
from .classification import (
    COUNT_COLUMNS,
    PARITY_CRITERIA,
    RATE_METRICS,
    GroupReport,
    binary_decisions,
    group_metrics,
)
from .counterfactual import CounterfactualReport, counterfactual_fairness, counterfactual_html
from .dependence import (
    DEPENDENCE_MEASURES,
    DependenceReport,
    GTest,
    conditional_mutual_information,
    contingency_table,
    dependence_measures,
    g_test,
    mutual_information,
    normalized_mutual_information,
    selection_difference,
    selection_lift,
    total_variation_distance,
)
from .impact import DisparateImpact, disparate_impact
from .plotting import disparity_figure, figure_to_base64
from .regression import REGRESSION_METRICS, RegressionReport, regression_metrics
from .report import regression_html, render_report, write_report
from .slices import SLICE_MEASURES, ConfusionCounts, compare_slices

__all__ = [
    "COUNT_COLUMNS",
    "DEPENDENCE_MEASURES",
    "PARITY_CRITERIA",
    "RATE_METRICS",
    "REGRESSION_METRICS",
    "SLICE_MEASURES",
    "ConfusionCounts",
    "CounterfactualReport",
    "DependenceReport",
    "DisparateImpact",
    "GTest",
    "GroupReport",
    "RegressionReport",
    "binary_decisions",
    "bootstrap",
    "bootstrap_interval",
    "compare_slices",
    "conditional_mutual_information",
    "contingency_table",
    "counterfactual_fairness",
    "counterfactual_html",
    "dependence_measures",
    "disparate_impact",
    "disparity_figure",
    "figure_to_base64",
    "g_test",
    "group_metrics",
    "mutual_information",
    "normalized_mutual_information",
    "percentile_interval",
    "regression_html",
    "regression_metrics",
    "render_report",
    "selection_difference",
    "selection_lift",
    "total_variation_distance",
    "write_report",
]
