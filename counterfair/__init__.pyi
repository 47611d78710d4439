"""Types of the names ``counterfair`` loads on first use, for type checkers and editors.

``import counterfair`` imports none of these modules: ``counterfair/__init__.py`` imports
each public name's module on first use (its tables ``_ATTRIBUTES`` and ``_MODULES``, read
by its module ``__getattr__``). Static tools cannot follow that, so this stub imports every
name explicitly from its module. Keep it in step with the tables: ``tests/test_startup.py``
checks that both name the same set.
"""

from counterfair import audit as audit
from counterfair import datasets as datasets
from counterfair import errors as errors
from counterfair import options as options
from counterfair._version import __version__ as __version__
from counterfair.audit.falsification import falsify as falsify
from counterfair.counterfactual.prediction import (
    counterfactual_predictions as counterfactual_predictions,
)
from counterfair.counterfactual.sensitivity import sensitivity as sensitivity
from counterfair.inference.abduction_result import Abduction as Abduction
from counterfair.inference.fit import Fit as Fit
from counterfair.inference.invariance import invariance_check as invariance_check
from counterfair.inference.loo import compare as compare
from counterfair.inference.loo_pit import loo_pit as loo_pit
from counterfair.inference.subsample_check import subsample_check as subsample_check
from counterfair.io.load import load as load
from counterfair.io.scm_file import read_scm as read_scm
from counterfair.io.scm_file import write_scm as write_scm
from counterfair.learn import inputs as inputs
from counterfair.learn.baselines import BaselinePredictor as BaselinePredictor
from counterfair.learn.baselines import full_predictor as full_predictor
from counterfair.learn.baselines import unaware_predictor as unaware_predictor
from counterfair.learn.fair import FairLearner as FairLearner
from counterfair.learn.multiworld import MultiWorldLearner as MultiWorldLearner
from counterfair.learn.noncausal import DemographicParityClassifier as DemographicParityClassifier
from counterfair.learn.noncausal import OrderPreservingPredictor as OrderPreservingPredictor
from counterfair.model.discrete import Deterministic as Deterministic
from counterfair.model.discrete import DiscreteNoise as DiscreteNoise
from counterfair.model.enumeration import DiscreteSCM as DiscreteSCM
from counterfair.model.families import Bernoulli as Bernoulli
from counterfair.model.families import Categorical as Categorical
from counterfair.model.families import NegativeBinomial as NegativeBinomial
from counterfair.model.families import Normal as Normal
from counterfair.model.families import Ordinal as Ordinal
from counterfair.model.families import Poisson as Poisson
from counterfair.model.scm import SCM as SCM
from counterfair.model.specs import Latent as Latent
from counterfair.model.specs import Prior as Prior
from counterfair.model.specs import Protected as Protected
from counterfair.model.terms import GroupEffect as GroupEffect
from counterfair.model.terms import Interaction as Interaction
from counterfair.model.terms import Smooth as Smooth
from counterfair.options import get_options as get_options
from counterfair.options import set_options as set_options

__all__ = [
    "SCM",
    "Abduction",
    "BaselinePredictor",
    "Bernoulli",
    "Categorical",
    "DemographicParityClassifier",
    "Deterministic",
    "DiscreteNoise",
    "DiscreteSCM",
    "FairLearner",
    "Fit",
    "GroupEffect",
    "Interaction",
    "Latent",
    "MultiWorldLearner",
    "NegativeBinomial",
    "Normal",
    "OrderPreservingPredictor",
    "Ordinal",
    "Poisson",
    "Prior",
    "Protected",
    "Smooth",
    "audit",
    "compare",
    "counterfactual_predictions",
    "datasets",
    "errors",
    "falsify",
    "full_predictor",
    "get_options",
    "inputs",
    "invariance_check",
    "load",
    "loo_pit",
    "read_scm",
    "sensitivity",
    "set_options",
    "subsample_check",
    "unaware_predictor",
    "write_scm",
]
