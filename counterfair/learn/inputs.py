"""The fair inputs of a :class:`~counterfair.FairLearner`: one object per strategy.

A learner reads its estimator's inputs through one of these frozen settings objects
(``FairLearner(fit, target=..., features=cf.inputs.Latent())``); each one carries the
options that belong to it and is checked once, when it is made:

- :class:`NonDescendants`: the observed non-descendants of the protected attributes
  (Kusner et al. 2017, level 1);
- :class:`Latent`: the latents' posterior draws plus the non-descendants (level 2,
  "Fair K");
- :class:`AdditiveNoise`: the abducted noise of every additive-noise node other than
  the target, plus the latents and non-descendants (level 3, "Fair Add");
- :class:`Nodes`: nodes named one by one (latents and non-descendants only);
- :class:`PathSpecific`: every observed node, with its descendants along the unfair
  paths recomputed at a baseline level (Chiappa 2019);
- :class:`BusinessNecessity`: path-specific inputs whose unfair paths are derived from
  the effects a user allows (Plečko and Bareinboim 2024).

Every strategy also says how training rows get their inputs: ``training="samples"``
repeats each row once per draw (Algorithm 1), ``"mean"`` uses each row's posterior mean
once (the authors' code); ``condition_on_target=True`` draws the training latents from
the SCM fit's joint posterior, which also conditions on the target (the authors' code),
instead of ``P(U | x, a)`` at the posterior means of the parameters.

:func:`to_document` and :func:`from_document` give the plain JSON form a saved learner
folder keeps (:mod:`counterfair.io.learner_folder`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

EFFECTS: tuple[str, ...] = ("DE", "IE", "SE")
"""The effects of a decomposition a business-necessity learner may allow (``allow=``)."""

TRAINING = ("samples", "mean")


def _flag(owner: str, name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{owner}({name}=...) must be True or False, got {value!r}")


def _names(owner: str, option: str, value: object) -> tuple[str, ...]:
    """A tuple of node names from a name or a sequence of them."""
    names = (value,) if isinstance(value, str) else tuple(value)  # type: ignore[arg-type]
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"{owner}({option}=...) takes node names, got {name!r}")
    return names


@dataclass(frozen=True, kw_only=True)
class FairInputs:
    """What every strategy has: how the training rows get their inputs.

    Parameters
    ----------
    training : {"samples", "mean"}
        ``"samples"`` (Algorithm 1): each training row once per draw of its inputs;
        ``"mean"``: each row once, with its posterior mean inputs.
    condition_on_target : bool
        ``False`` (Algorithm 1): training latents are drawn from ``P(U | x, a)``
        with the parameters at their posterior means; ``True``: from the joint
        posterior of the SCM fit, which also conditions on the target.
    """

    kind: ClassVar[str] = ""
    reads_latents: ClassVar[bool] = True
    training: Literal["samples", "mean"] = "samples"
    condition_on_target: bool = False

    def __post_init__(self) -> None:
        owner = type(self).__name__
        if self.training not in TRAINING:
            raise ValueError(
                f"{owner}(training=...) must be 'samples' or 'mean', got {self.training!r}"
            )
        _flag(owner, "condition_on_target", self.condition_on_target)

    @property
    def invariant_indicators(self) -> bool:
        """Whether latents are abducted from measurement-invariant indicators only."""
        return bool(getattr(self, "invariant_only", False))


@dataclass(frozen=True, kw_only=True)
class _Invariant(FairInputs):
    """A strategy that reads latents: ``invariant_only`` chooses their indicators.

    ``invariant_only=True`` (default) leaves out an indicator of a latent whose loading
    differs by a protected attribute or its descendant (``loading_by=``): the latents
    are abducted from the invariant indicators only, in training and prediction alike,
    and Fair Add leaves out that indicator's residual. A latent all of whose indicators
    are non-invariant keeps them, with an :class:`~counterfair.errors.InvarianceWarning`.
    ``False`` abducts from every indicator.
    """

    invariant_only: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        _flag(type(self).__name__, "invariant_only", self.invariant_only)


@dataclass(frozen=True, kw_only=True)
class NonDescendants(FairInputs):
    """The observed non-descendants of the protected attributes (level 1)."""

    kind: ClassVar[str] = "non_descendants"
    reads_latents: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class Latent(_Invariant):
    """The latents' posterior draws plus the observed non-descendants (level 2, Fair K)."""

    kind: ClassVar[str] = "latent"


@dataclass(frozen=True, kw_only=True)
class AdditiveNoise(_Invariant):
    """The abducted noise of every additive-noise node other than the target, plus the
    latents and observed non-descendants (level 3, Fair Add)."""

    kind: ClassVar[str] = "additive_noise"


@dataclass(frozen=True)
class Nodes(_Invariant):
    """Inputs named one by one: latents and observed non-descendants of the protected
    attributes (naming a descendant raises :class:`~counterfair.errors.FairnessError` at fit).

    ``Nodes(["K", "age"])``.
    """

    kind: ClassVar[str] = "nodes"
    names: Sequence[str]

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", _names("Nodes", "names", self.names))
        if not self.names:
            raise ValueError("Nodes() needs at least one node name")
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class PathSpecific(_Invariant):
    """Path-specific inputs (Chiappa 2019).

    The latents and every observed node other than the target (and its descendants),
    with its descendants along ``unfair_paths`` recomputed with the protected attribute
    at ``baseline`` and the abducted noise; fair paths keep the row's own level
    (:mod:`counterfair.counterfactual.path_features`).

    Parameters
    ----------
    unfair_paths : sequence of tuple of str
        Node tuples ``(A, V, ...)`` from one protected attribute; every path that
        begins with one is unfair (:mod:`counterfair.counterfactual.paths`).
    baseline : str or float
        The level of ``A`` the unfair paths see.
    """

    kind: ClassVar[str] = "path_specific"
    unfair_paths: Sequence[Sequence[str]]
    baseline: str | float

    def __post_init__(self) -> None:
        paths = self.unfair_paths
        if isinstance(paths, str) or not isinstance(paths, Sequence) or not paths:
            raise ValueError(
                "PathSpecific(unfair_paths=...) takes a non-empty list of node tuples "
                f"(A, V, ...), got {paths!r}"
            )
        checked = tuple(_names("PathSpecific", "unfair_paths", p) for p in paths)
        object.__setattr__(self, "unfair_paths", checked)
        if self.baseline is None:
            raise ValueError("PathSpecific needs baseline=: the level the unfair paths see")
        super().__post_init__()


@dataclass(frozen=True, kw_only=True)
class BusinessNecessity(_Invariant):
    """Fair by business necessity (Plečko and Bareinboim 2024).

    The effects of ``attribute`` on the prediction a user accepts are kept; the others
    are removed. A disallowed direct effect makes the paths from ``attribute`` that touch
    no mediator unfair, a disallowed indirect effect the paths into the mediators
    (:func:`counterfair.counterfactual.paths.mediator_paths`); both see ``baseline``. A
    disallowed spurious effect sets every other protected attribute (the confounders
    ``Z``) to a reference -- the most frequent level, or the mean of a continuous one, in
    the training rows -- in the inputs of every row. :func:`counterfair.audit.decompose`
    of the learner shows each disallowed effect at 0 within Monte Carlo error.

    Parameters
    ----------
    allow : sequence of {"DE", "IE", "SE"}
        The effects kept (``("IE",)`` keeps the mediated effect only; ``()`` none).
    baseline : str or float
        The level ``x0`` of ``attribute`` the disallowed paths see.
    attribute : str, optional
        The protected attribute ``X`` (default: the only protected attribute with
        descendants).
    mediators : sequence of str, optional
        ``W`` (default: the observed descendants of ``attribute`` other than the target
        and its descendants, as :func:`counterfair.audit.decompose` takes them).
    """

    kind: ClassVar[str] = "path_specific"
    allow: Sequence[str]
    baseline: str | float
    attribute: str | None = None
    mediators: Sequence[str] | None = None

    def __post_init__(self) -> None:
        allowed = _names("BusinessNecessity", "allow", self.allow)
        for effect in allowed:
            if effect not in EFFECTS:
                raise ValueError(
                    f"BusinessNecessity(allow=...) names {effect!r}, which is not an "
                    f"effect; effects: {list(EFFECTS)}"
                )
        object.__setattr__(self, "allow", allowed)
        if self.mediators is not None:
            mediators = _names("BusinessNecessity", "mediators", self.mediators)
            object.__setattr__(self, "mediators", mediators)
        if self.baseline is None:
            raise ValueError(
                "BusinessNecessity needs baseline=: the level x0 of the attribute the "
                "disallowed paths see"
            )
        super().__post_init__()


STRATEGIES: dict[str, type[FairInputs]] = {
    cls.__name__: cls
    for cls in (NonDescendants, Latent, AdditiveNoise, Nodes, PathSpecific, BusinessNecessity)
}


def checked(features: object) -> FairInputs:
    """``features`` as a strategy: a strategy is kept, a list of names becomes :class:`Nodes`."""
    if isinstance(features, FairInputs):
        return features
    if isinstance(features, Sequence) and not isinstance(features, str):
        return Nodes(tuple(features))
    raise ValueError(
        "features= takes a strategy of counterfair.inputs (NonDescendants(), Latent(), "
        "AdditiveNoise(), Nodes([...]), PathSpecific(unfair_paths=, baseline=), "
        f"BusinessNecessity(allow=, baseline=)) or a list of node names, got {features!r}"
    )


def to_document(strategy: FairInputs) -> dict[str, Any]:
    """The JSON form of a strategy: its class name and its fields."""
    fields = {f.name: getattr(strategy, f.name) for f in dataclasses.fields(strategy)}
    plain = {
        name: [list(v) if isinstance(v, tuple) else v for v in value]
        if isinstance(value, tuple) else value
        for name, value in fields.items()
    }
    return {"strategy": type(strategy).__name__, **plain}


def from_document(document: Mapping[str, Any]) -> FairInputs:
    """The strategy :func:`to_document` wrote."""
    fields = dict(document)
    name = fields.pop("strategy", None)
    if name not in STRATEGIES:
        raise ValueError(
            f"unknown fair-input strategy {name!r}; strategies: {sorted(STRATEGIES)}"
        )
    cls = STRATEGIES[name]
    if "unfair_paths" in fields:
        fields["unfair_paths"] = tuple(tuple(p) for p in fields["unfair_paths"])
    for key in ("names", "allow", "mediators"):
        if fields.get(key) is not None:
            fields[key] = tuple(fields[key])
    return cls(**fields)


__all__ = [
    "AdditiveNoise",
    "BusinessNecessity",
    "FairInputs",
    "Latent",
    "Nodes",
    "NonDescendants",
    "PathSpecific",
]
