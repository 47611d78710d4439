"""counterfair: Bayesian counterfactual fairness on Stan.

Declare a structural causal model on a networkx DAG, compile it to Stan, sample
latent noise by NUTS (abduction), intervene on protected attributes (action),
propagate counterfactuals (prediction), learn counterfactually fair predictors
(Kusner et al. 2017, Algorithm 1) and audit any predictor.
"""

from counterfair import _quiet as _quiet  # first: hides third-party import noise
from counterfair import audit, datasets, datasets_tabular, models
from counterfair._version import __version__
from counterfair.datasets import law_school_split, law_school_subsample, load_law_school
from counterfair.datasets_tabular import load_adult, load_compas
from counterfair.errors import (
    ConvergenceWarning,
    DataError,
    FairnessError,
    ScaleWarning,
    SCMError,
)
from counterfair.families import (
    Bernoulli,
    Categorical,
    NegativeBinomial,
    Normal,
    Ordinal,
    Poisson,
)
from counterfair.learning import (
    BaselinePredictor,
    FairLearner,
    counterfactual_predictions,
    full_predictor,
    unaware_predictor,
)
from counterfair.posterior import Abduction, Fit
from counterfair.ppc_results import PosteriorPredictiveCheck
from counterfair.scm import SCM
from counterfair.specs import SPEC_KEY, Latent, Prior, Protected

__all__ = [
    "SCM",
    "SPEC_KEY",
    "Abduction",
    "BaselinePredictor",
    "Bernoulli",
    "Categorical",
    "ConvergenceWarning",
    "DataError",
    "FairLearner",
    "FairnessError",
    "Fit",
    "Latent",
    "NegativeBinomial",
    "Normal",
    "Ordinal",
    "Poisson",
    "PosteriorPredictiveCheck",
    "Prior",
    "Protected",
    "SCMError",
    "ScaleWarning",
    "__version__",
    "audit",
    "counterfactual_predictions",
    "datasets",
    "datasets_tabular",
    "full_predictor",
    "law_school_split",
    "law_school_subsample",
    "load_adult",
    "load_compas",
    "load_law_school",
    "models",
    "unaware_predictor",
]

from counterfair.multiworld import MultiWorldLearner

__all__ += ["MultiWorldLearner"]
