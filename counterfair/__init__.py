"""counterfair: Bayesian counterfactual fairness on Stan.

Declare a structural causal model on a networkx DAG, compile it to Stan, sample
latent noise by NUTS (abduction), intervene on protected attributes (action),
propagate counterfactuals (prediction), learn counterfactually fair predictors
(Kusner et al. 2017, Algorithm 1) and audit any predictor.
"""

from counterfair._version import __version__
from counterfair.errors import ConvergenceWarning, DataError, FairnessError, SCMError
from counterfair.posterior import Abduction, Fit
from counterfair.scm import SCM
from counterfair.specs import (
    SPEC_KEY,
    Bernoulli,
    Latent,
    Normal,
    Poisson,
    Prior,
    Protected,
)

__all__ = [
    "SCM",
    "SPEC_KEY",
    "Abduction",
    "Bernoulli",
    "ConvergenceWarning",
    "DataError",
    "FairnessError",
    "Fit",
    "Latent",
    "Normal",
    "Poisson",
    "Prior",
    "Protected",
    "SCMError",
    "__version__",
]
