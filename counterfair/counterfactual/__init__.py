"""Counterfactuals: action (``do``), worlds, path-specific effects, every predictor's
counterfactual predictions and the sensitivity of an audit to the SCM's assumptions."""

from counterfair.counterfactual.action import (
    COUPLINGS,
    DEFAULT_COUPLING,
    WORLD_COUNTERFACTUAL,
    WORLD_FACTUAL,
    check_coupling,
    coupled_noise,
)
from counterfair.counterfactual.frames import counterfactual_frame, interventional_frame

__all__ = [
    "COUPLINGS",
    "DEFAULT_COUPLING",
    "WORLD_COUNTERFACTUAL",
    "WORLD_FACTUAL",
    "check_coupling",
    "counterfactual_frame",
    "coupled_noise",
    "interventional_frame",
]
