"""counterfair: Bayesian counterfactual fairness on Stan.

Declare a structural causal model on a networkx DAG, compile it to Stan, sample
latent noise by NUTS (abduction), intervene on protected attributes (action),
propagate counterfactuals (prediction), learn counterfactually fair predictors
(Kusner et al. 2017, Algorithm 1) and audit any predictor.

The package is a pipeline of subpackages, one per stage (``ARCHITECTURE.md``):
:mod:`counterfair.model`, :mod:`counterfair.rows`, :mod:`counterfair.stan`,
:mod:`counterfair.inference`, :mod:`counterfair.counterfactual`,
:mod:`counterfair.learn`, :mod:`counterfair.audit`, :mod:`counterfair.io`,
:mod:`counterfair.dask`, :mod:`counterfair.datasets`, :mod:`counterfair.cli` and
:mod:`experiments`. ``import counterfair`` loads none of them: each public
name below is imported on first use (the Scientific Python lazy-loading convention,
SPEC 1), so the package and its command line start fast. ``counterfair/__init__.pyi``
lists the same names for type checkers and editors.
"""

from __future__ import annotations

import importlib
from typing import Any

from counterfair import _quiet as _quiet  # hides third-party import noise
from counterfair._version import __version__ as __version__

_ATTRIBUTES: dict[str, str] = {
    # the model: declaring an SCM
    "SCM": "counterfair.model.scm",
    "Latent": "counterfair.model.specs",
    "Prior": "counterfair.model.specs",
    "Protected": "counterfair.model.specs",
    "Bernoulli": "counterfair.model.families",
    "Categorical": "counterfair.model.families",
    "NegativeBinomial": "counterfair.model.families",
    "Normal": "counterfair.model.families",
    "Ordinal": "counterfair.model.families",
    "Poisson": "counterfair.model.families",
    "GroupEffect": "counterfair.model.terms",
    "Interaction": "counterfair.model.terms",
    "Smooth": "counterfair.model.terms",
    "Deterministic": "counterfair.model.discrete",
    "DiscreteNoise": "counterfair.model.discrete",
    "DiscreteSCM": "counterfair.model.enumeration",
    # options (the base; the error types are in counterfair.errors)
    "get_options": "counterfair.options",
    "set_options": "counterfair.options",
    # inference
    "Abduction": "counterfair.inference.abduction_result",
    "Fit": "counterfair.inference.fit",
    "compare": "counterfair.inference.loo",
    "invariance_check": "counterfair.inference.invariance",
    "loo_pit": "counterfair.inference.loo_pit",
    "subsample_check": "counterfair.inference.subsample_check",
    # checking the graph itself against the data
    "falsify": "counterfair.audit.falsification",
    # counterfactuals
    "counterfactual_predictions": "counterfair.counterfactual.prediction",
    "sensitivity": "counterfair.counterfactual.sensitivity",
    # learners
    "BaselinePredictor": "counterfair.learn.baselines",
    "full_predictor": "counterfair.learn.baselines",
    "unaware_predictor": "counterfair.learn.baselines",
    "DemographicParityClassifier": "counterfair.learn.noncausal",
    "OrderPreservingPredictor": "counterfair.learn.noncausal",
    "FairLearner": "counterfair.learn.fair",
    "MultiWorldLearner": "counterfair.learn.multiworld",
    # files
    "load": "counterfair.io.load",
    "read_scm": "counterfair.io.scm_file",
    "write_scm": "counterfair.io.scm_file",
}

_MODULES: dict[str, str] = {
    "audit": "counterfair.audit",
    "datasets": "counterfair.datasets",
    "errors": "counterfair.errors",
    "inputs": "counterfair.learn.inputs",
    "options": "counterfair.options",
}

_UNLISTED = frozenset({"options"})
"""Modules importable as attributes (``cf.options``) but not public names: the options
are read and set by ``get_options`` / ``set_options``. ``__version__`` is not listed either."""

__all__ = sorted(name for name in [*_ATTRIBUTES, *_MODULES] if name not in _UNLISTED)


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and keep the name here."""
    if name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    elif name in _ATTRIBUTES:
        module, _, attribute = _ATTRIBUTES[name].partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
    else:
        raise AttributeError(f"module 'counterfair' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
