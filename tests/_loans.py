"""A small simulated loan-decision data set as a user's CSV comes: yes/no outcomes,
string groups, a credit history coded 1 to 6, and its SCM file without any level list.

Shared by tests/test_data_levels.py, tests/test_cli_learn_scores.py and tests/test_fuzz.py,
so that their Stan fits compile one program.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from _seeds import shifted

SCM_YAML = """\
nodes:
  race: {family: protected}
  K: {family: latent}
  income: {family: normal, parents: [race, K]}
  history: {family: ordinal, parents: [race, K]}
  purpose: {family: categorical, parents: [race]}
  deny: {family: bernoulli, parents: [race, K]}
"""
"""The SCM file of the loans data: no levels anywhere (they are read from the rows)."""


def loans(
    n: int = 300, *, seed: int = shifted(0), deny_rate: float = 0.15, k_effect: float = -0.8
) -> pd.DataFrame:
    """``n`` loan applications: ``race`` (black/white), ``income`` (a number),
    ``history`` (1..6), ``purpose`` (home/other/refi) and ``deny`` (no/yes).

    ``k_effect`` is the effect of the latent creditworthiness on the log odds of a
    denial (0: the decision is noise given race, and a fair predictor from the
    latent can say nothing).
    """
    rng = np.random.default_rng(seed)
    race = rng.choice(["black", "white"], n, p=[0.3, 0.7])
    black = (race == "black").astype(float)
    k = rng.normal(size=n)
    income = 0.8 * k - 0.4 * black + rng.normal(0.0, 0.6, n)
    history = np.clip(np.round(3 + 1.2 * k - 0.5 * black + rng.normal(0, 0.7, n)), 1, 6)
    logit = np.log(deny_rate / (1 - deny_rate)) + 0.5 * black + k_effect * k
    deny = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    purpose = rng.choice(["home", "refi", "other"], n)
    return pd.DataFrame({
        "race": race, "income": income.round(3), "history": history.astype(int),
        "purpose": purpose, "deny": deny,
    })
