"""The Bayesian counterpart of a graph's tests: posterior predictive checks of the same
statistics under the fitted SCM.

For ``S`` posterior draws of the fit's parameters, a whole data set is replicated from
the SCM: the protected attributes as observed, each latent afresh from its prior, every
observed node in topological order from its replicated parents (the marginal replication
of :mod:`counterfair.inference.ppc`). Each implication's statistic (the generalised
covariance measure's chi-square, a tetrad's |z|) is computed on every replicated data
set as on the observed one, with the same encoding; the posterior predictive p-value is
the share of replications whose statistic is at least the observed one. Where the
frequentist test asks whether the data are compatible with independence, this asks
whether they are compatible with the fitted SCM's own law: a small value says the fitted
model does not produce data like these in that respect.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from counterfair.inference.fit import Fit
from counterfair.inference.ppc import prior_latents, replicate
from counterfair.model.implications import Implications, Independence, Tetrad

from .graph_tests import TestColumns, independence_test, tetrad_test

__all__ = ["DEFAULT_REPLICATIONS", "ppc_p_values"]

DEFAULT_REPLICATIONS = 100
"""Replicated data sets of the check (at most the fit's draws)."""


def _statistic(columns: TestColumns, statement: Independence | Tetrad) -> float:
    if isinstance(statement, Independence):
        return independence_test(columns, statement.node, statement.others, statement.given)[0]
    return abs(tetrad_test(columns, statement.indicators, statement.given)[0])


def ppc_p_values(
    fit: Fit,
    implications: Implications,
    numeric: frozenset[str],
    *,
    n_draws: int = DEFAULT_REPLICATIONS,
    seed: int | None = None,
) -> np.ndarray:
    """Each implication's posterior predictive p-value under ``fit`` on its training rows
    (independences first, then tetrads, as in :attr:`Implications`)."""
    statements: Sequence[Independence | Tetrad] = [*implications.independences,
                                                   *implications.tetrads]
    if not statements:
        return np.zeros(0)
    n_draws = min(n_draws, fit.params().n)
    seed = fit.seed if seed is None else seed
    abduction = fit.abduct(n_samples=n_draws, seed=seed).without_holes(
        "the posterior predictive falsification"
    )
    rng = np.random.default_rng(seed)
    n_rows = len(abduction.data)
    latents = prior_latents(fit.scm, abduction.n_samples, n_rows, rng)
    replicated = replicate(fit.scm, abduction.params, latents, abduction.codes,
                           abduction.observed, fit.scm.observed, rng, joint=True)
    columns = implications.columns

    def frame(values: dict[str, np.ndarray]) -> TestColumns:
        data = pd.DataFrame({c: values[c] for c in columns})
        return TestColumns(data, numeric, columns)

    observed = frame({**abduction.codes, **abduction.observed})
    reference = np.asarray([_statistic(observed, s) for s in statements])
    exceed = np.zeros(len(statements))
    for draw in range(abduction.n_samples):
        again = frame({**abduction.codes, **{n: v[draw] for n, v in replicated.items()}})
        exceed += np.asarray([_statistic(again, s) for s in statements]) >= reference
    return exceed / abduction.n_samples
