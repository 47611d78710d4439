"""Group-fairness audit of any predictor.

* :class:`GroupAudit` -- the group audit of a predictor, data and settings given once
  (task, groups, references, intervals), its measures as methods: ``.metrics()``
  (per-group measures, disparities to a reference group, parity verdicts by the
  four-fifths rule and intervals, :class:`GroupReport`; for ``task=Regression()`` the
  same for real outcomes, :class:`RegressionReport`), ``.disparate_impact()``
  (favourable-rate ratio in percent, :class:`DisparateImpact`), ``.two_group()``
  (statistical parity / equal opportunity differences and disparate impact, ``<= tau``
  is unfair, against the reference group) and ``.class_balance()`` (balance for the
  positive and negative class).
* :func:`compare_slices` -- differences between two confusion matrices
  (:class:`ConfusionCounts`).
* :func:`dependence_measures` and friends -- lift, TVD, (conditional) mutual information,
  G-test, with interval-based verdicts (:class:`DependenceReport`).
* :func:`counterfactual_fairness` -- causal change of a predictor's output under
  ``do(A = a')`` with a fitted SCM, beside the naive flip test (:class:`CounterfactualReport`);
  its options are one :class:`AuditSettings`.
* :func:`decompose` -- where a disparity comes from: total variation split into direct,
  indirect and spurious effects, x-specific and general (Plečko and Bareinboim), with
  posterior intervals (:class:`Decomposition`); its sampling is one
  :class:`DecompositionSettings`.
* :func:`fit_sfm` -- the same terms from the Standard Fairness Model's roles alone
  (no SCM, no mechanism for any mediator): the outcome's and the attribute's
  regressions fitted in Stan once (as its :class:`SFMSettings` say), and the
  :class:`~counterfair.audit.sfm_fit.SFMFit` it returns decomposes the gap with a
  Bayesian bootstrap of the rows (``.decompose()``), splits its spurious effect by
  confounder and its indirect effect by mediator (``.split()``, an
  :class:`EffectSplit`) and builds on the same fits a prediction fair by business
  necessity (``.predictor()``: it carries only the effects the user allows).
* :func:`flip_counterfactual`, :func:`consistency` (its interval:
  ``individual.consistency_interval``),
  :func:`generalized_entropy_index` --
  individual measures: attribute flip without an SCM, k-NN consistency, GE index with
  its between/within decomposition (:class:`EntropyIndex`).
* :func:`shap_disparity` -- SHAP-based discrimination measures (Kernel, Tree, Linear
  SHAP via ``shap``; the raw values behind it: ``explanations.shap_values``).
* :func:`find_subpopulations` -- FairTest-style search for affected subpopulations
  (the tree and the tests as :class:`SubpopulationSettings` say).
* :class:`GroupSpec`, :func:`monitor_disparate_impact`, :func:`perturbation_check` --
  monitor-style groups (values / ranges) and the perturbation check without an SCM.
* ``ci_method=`` of the group audits -- exact bootstrap, chunked Poisson bootstrap
  (memory O(groups x resamples)) or analytic intervals (Wilson, delta method).
* :func:`write_report` -- self-contained HTML report: a summary table per predictor, one
  plain-language line per criterion, explanation-based measures and subpopulations.
"""

# The entry points are the public names (``__all__``, below). Their result types
# (``GroupReport``, ``CounterfactualReport``, ``Decomposition``, ...) and the single
# measures behind :func:`dependence_measures` (``mutual_information``, ``g_test``, ...)
# live in their modules (``counterfair.audit.classification``, ``.causal_report``,
# ``.decomposition_result``, ``.dependence``, ...), where the API reference documents
# them, as are the helpers ``plotting.disparity_figure`` (a figure) and
# ``explanations.shap_values`` (the raw SHAP values). ``reference_levels`` (the reference
# level of each protected attribute of a fit, for ``reference=``) is a helper too: an
# attribute of the package, not in ``__all__``. Pre-processing mitigation (reweighing,
# undersampling) is with the learners: :mod:`counterfair.learn.reweighing`.
from ._groups import reference_levels as reference_levels
from .causal import AuditSettings, counterfactual_fairness
from .decomposition import DecompositionSettings, decompose
from .dependence import dependence_measures
from .explanations import shap_disparity
from .group_audit import GroupAudit
from .individual import consistency, flip_counterfactual, generalized_entropy_index
from .monitors import GroupSpec, monitor_disparate_impact, perturbation_check
from .report import write_report
from .sfm_fit import SFMSettings, fit_sfm
from .slices import compare_slices
from .subpopulations import SubpopulationSettings, find_subpopulations

__all__ = [
    "AuditSettings",
    "DecompositionSettings",
    "GroupAudit",
    "GroupSpec",
    "SFMSettings",
    "SubpopulationSettings",
    "compare_slices",
    "consistency",
    "counterfactual_fairness",
    "decompose",
    "dependence_measures",
    "find_subpopulations",
    "fit_sfm",
    "flip_counterfactual",
    "generalized_entropy_index",
    "monitor_disparate_impact",
    "perturbation_check",
    "shap_disparity",
    "write_report",
]
