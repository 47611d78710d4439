"""Warn when a node's scale makes counterfair's unit-scale default priors informative.

counterfair's default priors assume data of roughly unit scale: Normal(0, 1) on
every intercept (``prior_intercept``), weight and latent loading
(``prior_weights``), and inverse-gamma(1, 1) on a Normal node's residual
variance (``prior_variance``). counterfair does **not** rescale data
internally (every coefficient, counterfactual and abducted noise stays on the
data's own scale); it checks the scales once per fit, before sampling, and
emits one :class:`~counterfair.errors.ScaleWarning` per offending node. The
check reads the priors actually on the node's spec, so a model given explicit
priors that fit its scale does not warn.

A **Normal node** with observed mean ``m`` and sd ``s`` warns when

* ``|m - loc| > MEAN_LIMIT * scale`` of its intercept prior (the intercept is
  roughly the node's mean: with Normal(0, 1), a mean beyond 10 is 10 prior sds
  out);
* ``s > SD_HIGH * scale`` of its weights prior, when it has parents (its
  weights and loadings are in its own units: an sd of 50 needs coefficients of
  order 50 against Normal(0, 1));
* ``s < SD_LOW * sqrt(b / a)`` of its inverse-gamma(a, b) variance prior, when
  sigma is learned (inverse-gamma(1, 1) has probability ``exp(-100)`` below a
  variance of 0.01, so it pulls a residual sd under 0.1 upwards).

A **continuous parent** (a Normal node or a continuous protected attribute)
with sd ``s`` warns when ``1 / s > SD_HIGH * scale`` of a child's weights prior:
the child's coefficient on it is of order ``1 / s`` per unit of the child.

Counts, binary and level-valued nodes are not checked: their links put them on
a unit scale (log mean, log odds). The law school data (UGPA mean 3.2, sd 0.4;
ZFYA standardised; LSAT Poisson) and standardised columns do not warn; the
paper's level 3 SCM, whose Normal LSAT has a mean of about 36, would with the
default priors, so the shipped model gives LSAT priors on that scale
(:func:`counterfair.datasets.law_school_models.raw_lsat`).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from counterfair.errors import ScaleWarning
from counterfair.logs import in_words, user_stacklevel
from counterfair.model.specs import Observed, Prior, Protected
from counterfair.rows.validated import Rows

if TYPE_CHECKING:
    from counterfair.model.scm import SCM

MEAN_LIMIT = 10.0
"""Largest ``|mean - loc|`` of a Normal node, in sds of its intercept prior."""

SD_HIGH = 10.0
"""Largest sd of a Normal node with parents, in sds of its weights prior (also: largest
coefficient ``1 / sd`` a continuous parent needs, in sds of its child's weights prior)."""

SD_LOW = 0.1
"""Smallest sd of a Normal node with a learned sigma, as a share of ``sqrt(b / a)`` of its
inverse-gamma(a, b) variance prior."""

FIX = (
    "counterfair's default priors assume unit-scale data: standardise the column, e.g. "
    "df[{node!r}] = (df[{node!r}] - df[{node!r}].mean()) / df[{node!r}].std(), "
    "or give {where} explicit priors that fit its scale ({how})"
)
"""The remedy every scale warning ends with."""
FIX_FILE = (
    "counterfair's default priors assume unit-scale data: standardise the column in the "
    "CSV file, or give the node priors on its scale in the SCM file, e.g. {node}: "
    "{{family: normal, prior_intercept: {{family: normal, args: [{mean}, {sd}]}}, "
    "prior_weights: {{family: normal, args: [0, {sd}]}}, ...}}"
)
FIX_FILE_PARENT = (
    "counterfair's default priors assume unit-scale data: standardise the column in the "
    "CSV file, or give each child priors that fit it in the SCM file (prior_weights: "
    "{family: normal, args: [0, S]} on the child, S a plausible effect of one unit)"
)
"""The same remedies in SCM-file keys, from the command line."""


def yaml_number(value: float) -> str:
    """``value`` to 3 significant digits, written so that YAML reads a number: YAML 1.1
    (PyYAML) reads ``1e+03`` as a string, ``1.0e+03`` as a float."""
    text = f"{value:.3g}"
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


@dataclass(frozen=True)
class ScaleProblem:
    """A node whose scale makes one or more of the priors informative.

    Attributes
    ----------
    node : str
        The node.
    mean, sd : float
        Its observed mean and standard deviation.
    reasons : tuple of str
        One plain-language sentence per prior made informative.
    remedy : str
        How to fix it.
    """

    node: str
    mean: float
    sd: float
    reasons: tuple[str, ...]
    remedy: str

    def message(self) -> str:
        """The warning text: node, mean and sd, the priors concerned, the fix."""
        return (
            f"node {self.node!r} has mean {self.mean:.4g} and sd {self.sd:.4g}: "
            + "; ".join(self.reasons)
            + ". "
            + self.remedy
        )


def location_scale(prior: Prior) -> tuple[float, float] | None:
    """Location and scale of a location-scale prior (normal, cauchy, student_t), else None."""
    if prior.family in ("normal", "cauchy"):
        return prior.args[0], prior.args[1]
    if prior.family == "student_t":
        return prior.args[1], prior.args[2]
    return None


def variance_scale(prior: Prior) -> float | None:
    """``sqrt(b / a)`` of an inverse-gamma(a, b) variance prior (a typical sd), else None."""
    if prior.family == "inv_gamma":
        return math.sqrt(prior.args[1] / prior.args[0])
    return None


def _own_reasons(scm: SCM, node: str, mean: float, sd: float) -> list[str]:
    """Priors of a Normal node's own equation that its mean and sd make informative."""
    eq = scm.equations[node]
    spec = eq.spec
    reasons = []
    intercept = location_scale(spec.prior_intercept)
    if eq.intercept and intercept is not None:
        loc, scale = intercept
        if abs(mean - loc) > MEAN_LIMIT * scale:
            reasons.append(
                f"its mean is {abs(mean - loc) / scale:.0f} prior sds from the intercept "
                f"prior {spec.prior_intercept.stan()} of {eq.intercept}"
            )
    weights = location_scale(spec.prior_weights)
    coefficients = [
        *(t.param for t in eq.protected),
        *(t.param for t in eq.observed),
        *(t.param for t in eq.latent),
    ]
    if coefficients and weights is not None and sd > SD_HIGH * weights[1]:
        reasons.append(
            f"its coefficients ({', '.join(coefficients)}) are in its units, of order its sd, "
            f"against the weights prior {spec.prior_weights.stan()}"
        )
    prior_variance = getattr(spec, "prior_variance", None)
    if eq.variance and eq.sigma_fixed is None and isinstance(prior_variance, Prior):
        typical = variance_scale(prior_variance)
        if typical is not None and sd < SD_LOW * typical:
            reasons.append(
                f"its variance {sd**2:.3g} is where the variance prior {prior_variance.stan()} "
                f"of {eq.variance} has almost no mass, so the prior pulls {eq.sigma} up"
            )
    return reasons


def _child_reasons(scm: SCM, node: str, sd: float) -> list[str]:
    """Weights priors of the node's children that its small sd makes informative."""
    reasons = []
    for child in scm.children(node):
        spec = scm.specs[child]
        if not isinstance(spec, Observed):
            continue
        weights = location_scale(spec.prior_weights)
        if weights is None or sd <= 0:
            continue
        if 1.0 / sd > SD_HIGH * weights[1]:
            reasons.append(
                f"child {child!r}'s coefficient beta_{child}_{node} is of order 1 / sd = "
                f"{1.0 / sd:.3g} per unit of {child!r}, against the weights prior "
                f"{spec.prior_weights.stan()}"
            )
    return reasons


def check_scales(scm: SCM, values: Mapping[str, np.ndarray]) -> list[ScaleProblem]:
    """Every Normal node and continuous protected attribute whose scale makes a prior informative.

    Parameters
    ----------
    scm : SCM
        The model (its specs hold the priors).
    values : mapping
        Values of the nodes by name, shape ``(N,)``: the Normal nodes and the
        continuous protected attributes (other nodes are ignored; missing ones
        are skipped).

    Returns
    -------
    list of ScaleProblem
        One per offending node, in graph order (empty when every scale is fine).
    """
    problems = []
    for node in scm.nodes:
        spec = scm.specs[node]
        if node not in values:
            continue
        normal = isinstance(spec, Observed) and scm.equations[node].family.additive_noise
        continuous = isinstance(spec, Protected) and spec.continuous
        if not (normal or continuous):
            continue
        column = np.asarray(values[node], dtype=float)
        if column.shape[0] < 2:
            continue
        mean, sd = float(column.mean()), float(column.std(ddof=1))
        reasons = _own_reasons(scm, node, mean, sd) if normal else []
        reasons += _child_reasons(scm, node, sd)
        if not reasons:
            continue
        if normal:
            how = "prior_intercept=, prior_weights=, prior_variance= of cf.Normal"
            where = "the spec"
        else:
            how = "prior_weights= of each child's spec"
            where = "its children"
        remedy = in_words(
            FIX.format(node=node, where=where, how=how),
            FIX_FILE.format(node=node, mean=yaml_number(mean), sd=yaml_number(sd))
            if normal else FIX_FILE_PARENT,
        )
        problems.append(ScaleProblem(node, mean, sd, tuple(reasons), remedy))
    return problems


def scale_values(scm: SCM, data: Rows | pd.DataFrame) -> dict[str, np.ndarray]:
    """Values of the nodes :func:`check_scales` looks at.

    From checked rows, their parsed values (no column is read again); from a frame
    (as the tests give), its columns as numbers.
    """
    out: dict[str, np.ndarray] = {}
    if isinstance(data, Rows):
        present = set(data.present())
        for node in scm.nodes:
            spec = scm.specs[node]
            if isinstance(spec, Protected) and spec.continuous and node in data.codes:
                out[node] = np.asarray(data.codes[node], dtype=float)
            elif node in present and scm.equations[node].family.additive_noise:
                values = data.values([node], holes=True)[node]
                hole = data.holes.get(node)  # missing="model": the values held only
                out[node] = values if hole is None else values[~hole]
        return out
    for node in scm.nodes:
        spec = scm.specs[node]
        if node not in data.columns:
            continue
        if isinstance(spec, Protected) and spec.continuous:
            out[node] = pd.to_numeric(data[node], errors="coerce").to_numpy(dtype=float)
        elif isinstance(spec, Observed) and scm.equations[node].family.additive_noise:
            out[node] = data[node].to_numpy(dtype=float)
    return out


def warn_on_scales(
    scm: SCM, data: Rows | pd.DataFrame, stacklevel: int | None = None
) -> list[ScaleProblem]:
    """Emit one :class:`~counterfair.errors.ScaleWarning` per offending node; return them.

    Called once per fit by :func:`counterfair.inference.sampling.fit_scm` after the data
    were validated.
    """
    problems = check_scales(scm, scale_values(scm, data))
    for problem in problems:
        level = user_stacklevel() if stacklevel is None else stacklevel
        warnings.warn(problem.message(), ScaleWarning, stacklevel=level)
    return problems
