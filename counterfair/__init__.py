"""counterfair: Bayesian counterfactual fairness on Stan.

Declare a structural causal model on a networkx DAG, compile it to Stan, sample
latent noise by NUTS (abduction), intervene on protected attributes (action),
propagate counterfactuals (prediction), learn counterfactually fair predictors
(Kusner et al. 2017, Algorithm 1) and audit any predictor.
"""

from counterfair import _quiet as _quiet  # first: hides third-party import noise
from counterfair import audit, datasets, datasets_tabular, models, options
from counterfair._version import __version__
from counterfair.baselines import BaselinePredictor, full_predictor, unaware_predictor
from counterfair.baselines_order import DemographicParityClassifier, OrderPreservingPredictor
from counterfair.datasets import law_school_split, law_school_subsample, load_law_school
from counterfair.datasets_tabular import load_adult, load_compas
from counterfair.discrete import Deterministic, DiscreteNoise
from counterfair.enumeration import DiscreteSCM
from counterfair.errors import (
    ConvergenceWarning,
    DataError,
    FairnessError,
    IdentificationWarning,
    LOOWarning,
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
from counterfair.learning import FairLearner
from counterfair.loo import compare
from counterfair.options import get_options, set_options
from counterfair.posterior import Abduction, Fit
from counterfair.ppc_results import PosteriorPredictiveCheck
from counterfair.prediction import counterfactual_predictions
from counterfair.saving import load
from counterfair.scm import SCM
from counterfair.scm_document import scm_to_dict
from counterfair.scm_file import read_scm, scm_from_dict, write_scm
from counterfair.sensitivity import plot_sensitivity, sensitivity
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
    "DemographicParityClassifier",
    "Deterministic",
    "DiscreteNoise",
    "DiscreteSCM",
    "FairLearner",
    "FairnessError",
    "Fit",
    "IdentificationWarning",
    "LOOWarning",
    "Latent",
    "NegativeBinomial",
    "Normal",
    "OrderPreservingPredictor",
    "Ordinal",
    "Poisson",
    "PosteriorPredictiveCheck",
    "Prior",
    "Protected",
    "SCMError",
    "ScaleWarning",
    "__version__",
    "audit",
    "compare",
    "counterfactual_predictions",
    "datasets",
    "datasets_tabular",
    "full_predictor",
    "get_options",
    "law_school_split",
    "law_school_subsample",
    "load",
    "load_adult",
    "load_compas",
    "load_law_school",
    "models",
    "options",
    "plot_sensitivity",
    "read_scm",
    "scm_from_dict",
    "scm_to_dict",
    "sensitivity",
    "set_options",
    "unaware_predictor",
    "write_scm",
]

from counterfair.multiworld import MultiWorldLearner

__all__ += ["MultiWorldLearner"]

from counterfair.subsample_check import subsample_check  # noqa: E402

__all__ += ["subsample_check"]

from counterfair import dask_groups as dask_groups  # noqa: E402 - the group audits' handlers
from counterfair import dask_rows as dask_rows  # noqa: E402 - registers the Dask handlers
from counterfair.dask_run import WORKER_CONFIG as DASK_WORKER_CONFIG  # noqa: E402
from counterfair.dask_run import WORKER_ENV as DASK_WORKER_ENV  # noqa: E402

__all__ += ["DASK_WORKER_CONFIG", "DASK_WORKER_ENV"]
