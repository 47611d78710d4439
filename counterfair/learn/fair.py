"""FairLearning (Kusner et al. 2017, Algorithm 1).

:class:`FairLearner` is a scikit-learn estimator. ``fit`` fits the SCM by NUTS
on the training rows, draws ``m = n_samples`` joint samples of each row's
exogenous inputs (latents, and for :class:`~counterfair.inputs.AdditiveNoise` the
abducted noise of Normal nodes), repeats each row ``m`` times with its draws, and fits the
wrapped estimator on that augmented set together with any observed
non-descendants of the protected attributes. ``predict`` abducts the same inputs
for new rows and returns the mean of the estimator's prediction over the draws.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import accuracy_score, r2_score

from counterfair import errors
from counterfair.counterfactual.action import noise_column
from counterfair.counterfactual.path_features import (
    check_path_options,
    corrected_inputs,
    input_names,
)
from counterfair.counterfactual.paths import (
    check_paths,
    direct_paths,
    mediator_paths,
    shared_prefix,
)
from counterfair.counterfactual.prediction import (
    MULTICLASS_PROBABILITY,
    as_numbers,
    refuse_rows_out,
)
from counterfair.inference.abduct import default_conditioning
from counterfair.inference.abducted_chunks import abduct_chunks
from counterfair.inference.fit import Abduction, Fit
from counterfair.learn import inputs
from counterfair.learn.inputs import FairInputs, Latent
from counterfair.learn.saving import Savable
from counterfair.logs import user_stacklevel
from counterfair.model.families import family_of
from counterfair.model.scm import SCM
from counterfair.model.specs import Observed
from counterfair.rows import chunking, dispatch
from counterfair.rows.validated import Rows

logger = logging.getLogger("counterfair")

LATENT = Latent()
"""The default strategy: the latents plus the observed non-descendants (Fair K)."""

TARGET_NOT_IN_SCM = (
    "target {target!r} is neither a node of the SCM (nodes: {nodes}) nor a column of the "
    "data (columns: {columns}); name a node, or give y= for a target outside the SCM "
    "(the paper's level 3 model)"
)
PROTECTED_TARGET = (
    "target {target!r} is a protected attribute of the SCM; a FairLearner predicts an "
    "outcome, not a protected attribute"
)
LATENT_TARGET = "target {target!r} is a latent node of the SCM; it has no observed values"
FIT_ARGS_SEED = (
    "fit_args contains 'seed' and seed={seed!r} is given too; pass the seed once, as seed="
)

NO_FAIR_FEATURES = (
    "features={features!r} gives no input for target {target!r}: the SCM has no {what}"
)
ALLOW_ATTRIBUTE = (
    "BusinessNecessity needs attribute=: the SCM has {count} protected attributes with descendants "
    "({names}); name the one whose effects are judged"
)
ALLOW_NOT_PROTECTED = (
    "attribute={attribute!r} is not a protected attribute of the SCM; protected: {protected}"
)
ALLOW_MEDIATOR = (
    "mediators= names {node!r}, which is {what}; mediators are observed descendants of "
    "{attribute!r} other than the target {target!r} and its descendants"
)
ALLOW_SHARED = (
    "the direct effect cannot be removed while the indirect one is kept: {node!r} is a "
    "descendant of {attribute!r} but not a mediator, and it causes the mediator "
    "{mediator!r}, so the paths {attribute} -> ... -> {node} -> {mediator} are direct and "
    "mediated at once; name {node!r} a mediator, or allow both DE and IE"
)

ALLOW_SE_OBSERVED = (
    "disallowing SE needs every confounder the learner reads to be a protected attribute "
    "or its descendant (they are held at a reference); {nodes} are observed confounders "
    "with no protected ancestor, whose dependence on {attribute!r} lives in the rows only, "
    "so the learner cannot remove the spurious effect through them: declare them "
    "Protected, or allow SE"
)

DESCENDANT_FEATURE = (
    "feature {node!r} is a descendant of protected attribute {source!r} "
    "(path {path}); a counterfactually fair predictor cannot use it"
)

INVARIANT_ONLY_CONDITION_ON = (
    "invariant_only=False would be ignored: abduction_args gives condition_on={condition_on!r}, "
    "which names the indicators the latents are abducted from; drop one of them"
)
INVARIANT_ONLY_NO_LATENTS = (
    "invariant_only=False would be ignored: features={features!r} reads no latent and no "
    "residual, so nothing is abducted from the indicators; drop invariant_only"
)
LEFT_OUT = (
    "FairLearner({target!r}, features={features!r}): {reasons}, so {what}; "
    "invariant_only=False keeps every indicator"
)
ALL_NON_INVARIANT = (
    "every indicator of latent {latent!r} ({indicators}) measures it with a loading that "
    "differs by a protected attribute or its descendant ({by}): {latent!r} is abducted from "
    "them all, and a predictor built on it cannot be counterfactually fair as a function of "
    "the observables (its abducted value moves when the protected attribute changes and the "
    "row is abducted again); declare an indicator of {latent!r} that measures it alike in "
    "every group"
)


@dataclass(frozen=True)
class InvariancePlan:
    """Which indicators a learner abducts its latents from under ``invariant_only=True``.

    An indicator (an observed child of a latent) whose spec has ``loading_by=`` a
    protected attribute, or a descendant of one, measures its latents differently in each
    group: what it says about a latent changes when a row's group is changed, so a latent
    abducted from it moves with the group even under the true SCM.

    Attributes
    ----------
    left_out : tuple of str
        Non-invariant indicators the latents are not abducted from (and whose residuals
        Fair Add leaves out): each latent they measure has an invariant indicator.
    by : dict
        The ``loading_by`` parent of every non-invariant indicator.
    kept : dict
        Latent -> its indicators, when every one of them is non-invariant (kept, with an
        :class:`~counterfair.errors.InvarianceWarning`).
    """

    left_out: tuple[str, ...] = ()
    by: dict[str, str] = field(default_factory=dict)
    kept: dict[str, tuple[str, ...]] = field(default_factory=dict)


def _group_of_loading(scm: SCM, node: str) -> str | None:
    """``node``'s ``loading_by`` parent when it is protected or a descendant of one."""
    by = getattr(scm.specs[node], "loading_by", None)
    if by is None:
        return None
    if by in scm.protected or scm.path_from_protected(by) is not None:
        return str(by)
    return None


def invariance_plan(scm: SCM, target: str | None = None) -> InvariancePlan:
    """The non-invariant indicators of ``scm``'s latents a fair learner leaves out.

    ``target`` (never an input of the learner's predictions) is not counted as an
    indicator. An indicator is left out when every latent it measures keeps at least one
    invariant indicator; a latent all of whose indicators are non-invariant keeps them
    (:attr:`InvariancePlan.kept`).
    """
    by: dict[str, str] = {}
    variant: set[str] = set()
    kept: dict[str, tuple[str, ...]] = {}
    for latent in scm.latents:
        indicators = [c for c in scm.children(latent) if c in scm.observed and c != target]
        grouped = [c for c in indicators if _group_of_loading(scm, c) is not None]
        for node in grouped:
            by[node] = str(_group_of_loading(scm, node))
        if grouped and len(grouped) == len(indicators):
            kept[latent] = tuple(grouped)
        variant.update(grouped)
    needed = {node for nodes in kept.values() for node in nodes}
    left_out = tuple(n for n in scm.observed if n in variant and n not in needed)
    return InvariancePlan(left_out=left_out, by=by, kept=kept)


class FairLearner(Savable, BaseEstimator):  # type: ignore[misc]
    """A counterfactually fair predictor (Kusner et al. 2017, Algorithm 1).

    Parameters
    ----------
    model : Fit or SCM
        The structural causal model: a :class:`~counterfair.Fit` of it, reused, or an
        :class:`~counterfair.SCM`, fitted by NUTS on the training rows at :meth:`fit`
        (with ``fit_args``). It may contain the target (e.g. ZFYA with the latent K as
        a parent, the paper's level 2 model) or not (the level 3 model of UGPA and
        LSAT).
    target : str
        Column to predict.
    features : strategy of :mod:`counterfair.inputs`, or list of str
        The fair inputs and how training rows get them: ``cf.inputs.Latent()``
        (default; level 2, Fair K), ``cf.inputs.NonDescendants()`` (level 1),
        ``cf.inputs.AdditiveNoise()`` (level 3, Fair Add),
        ``cf.inputs.PathSpecific(unfair_paths=, baseline=)`` (Chiappa 2019),
        ``cf.inputs.BusinessNecessity(allow=, baseline=)`` (Plečko and Bareinboim
        2024) or ``cf.inputs.Nodes([...])``; a plain list of node names is
        ``Nodes(list)``. Naming a descendant of a protected attribute raises
        :class:`~counterfair.errors.FairnessError`.
    estimator : scikit-learn estimator, optional
        Default ``LinearRegression()``, or ``LogisticRegression()`` for a
        Bernoulli target.
    n_samples : int
        ``m``, draws of the exogenous inputs per training row and per new row.
    seed : int, optional
        Seed of the SCM fit, abduction and draws.
    fit_args : dict, optional
        With an SCM only: passed to :meth:`SCM.fit` (``chains``, ``warmup``,
        ``draws``, ...; ``progress`` defaults to ``False``). A ``seed`` here is used
        when ``seed`` is not given; two different seeds are an error. With a Fit it
        raises (the SCM is not fitted again).
    abduction_args : dict, optional
        Passed to :meth:`Fit.abduct` for new rows (``method``, ``engine``, e.g.
        ``engine=MCMCAbduction(chains=4)`` of :mod:`counterfair.inference.abduct`, ...);
        ``condition_on`` chooses the indicators the latents are abducted from, in
        training and prediction alike (e.g. only those that measure a latent alike in
        every group: :func:`counterfair.invariance_check`); it wins over the
        strategy's ``invariant_only``.

    Attributes
    ----------
    scm_fit_ : Fit
        The fitted SCM.
    estimator_ : estimator
        The fitted wrapped estimator.
    feature_names_ : list of str
        Inputs of the wrapped estimator, in order.
    reference_ : dict
        With a disallowed spurious effect: the reference code of each confounder.
    """

    def __init__(
        self,
        model: Fit | SCM | None = None,
        *,
        target: str | None = None,
        features: FairInputs | Sequence[str] = LATENT,
        estimator: Any = None,
        n_samples: int = 50,
        seed: int | None = None,
        fit_args: Mapping[str, Any] | None = None,
        abduction_args: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model
        self.target = target
        self.features = features
        self.estimator = estimator
        self.n_samples = n_samples
        self.seed = seed
        self.fit_args = fit_args
        self.abduction_args = abduction_args

    @property
    def scm(self) -> SCM | None:
        """The learner's SCM (``model``'s own when ``model`` is a Fit)."""
        return self.model.scm if isinstance(self.model, Fit) else self.model

    def _given_fit(self) -> Fit | None:
        return self.model if isinstance(self.model, Fit) else None

    def _strategy(self) -> FairInputs:
        return inputs.checked(self.features)

    def _kind(self) -> str:
        return self._strategy().kind

    # ------------------------------------------------------------------ scikit-learn
    def _is_classifier(self) -> bool:
        if self.scm is not None and self.target in self.scm.specs:
            spec = self.scm.specs[self.target]
            return isinstance(spec, Observed) and family_of(spec).task == "classifier"
        return self.estimator is not None and bool(is_classifier(self.estimator))

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import ClassifierTags, RegressorTags

        tags = super().__sklearn_tags__()
        if self._is_classifier():
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        tags.non_deterministic = True
        return tags

    # ------------------------------------------------------------------ inputs
    def _check_setup(self) -> SCM:
        scm = self.scm
        if scm is None or self.target is None:
            raise ValueError("FairLearner needs a model (an SCM or its Fit) and a target")
        if not isinstance(scm, SCM):
            raise ValueError(
                f"FairLearner's model must be an SCM or a Fit, got {type(self.model).__name__}"
            )
        target = self.target
        if target in scm.protected:
            raise errors.FairnessError(PROTECTED_TARGET.format(target=target))
        if target in scm.latents:
            raise errors.SCMError(LATENT_TARGET.format(target=target))
        fit_args = dict(self.fit_args or {})
        if "seed" in fit_args and self.seed is not None and fit_args["seed"] != self.seed:
            raise ValueError(FIT_ARGS_SEED.format(seed=self.seed))
        if fit_args and self._given_fit() is not None:
            raise ValueError(
                f"fit_args {sorted(fit_args)} would be ignored: the model is a Fit, so the "
                "SCM is not fitted again; drop fit_args or give the SCM"
            )
        self._paths(scm)
        self._check_invariant_only(scm)
        return scm

    def _check_invariant_only(self, scm: SCM) -> None:
        strategy = self._strategy()
        if not strategy.reads_latents or strategy.invariant_indicators:
            return
        given = dict(self.abduction_args or {})
        if "condition_on" in given:
            raise ValueError(
                INVARIANT_ONLY_CONDITION_ON.format(condition_on=given["condition_on"])
            )
        if not self._reads_latents(scm):
            raise ValueError(INVARIANT_ONLY_NO_LATENTS.format(features=self.features))

    def _reads_latents(self, scm: SCM) -> bool:
        """Whether the inputs depend on the abducted latents (so on what they are abducted from)."""
        strategy = self._strategy()
        if isinstance(strategy, inputs.Nodes):
            return any(node in scm.latents for node in strategy.names)
        return strategy.reads_latents

    def _invariance(self, scm: SCM) -> InvariancePlan:
        """What ``invariant_only`` leaves out (nothing when off, when the user gives
        ``condition_on``, or when the inputs read no latent)."""
        if (
            not self._strategy().invariant_indicators
            or "condition_on" in (self.abduction_args or {})
            or not scm.latents
            or not self._reads_latents(scm)
        ):
            return InvariancePlan()
        return invariance_plan(scm, self.target)

    def _report_invariance(self, scm: SCM) -> None:
        """One log line naming the indicators left out; a warning per latent that has no
        invariant indicator."""
        plan = self._invariance(scm)
        for latent, nodes in plan.kept.items():
            warnings.warn(
                ALL_NON_INVARIANT.format(
                    latent=latent,
                    indicators=", ".join(map(repr, nodes)),
                    by=", ".join(f"{n}: loading_by={plan.by[n]!r}" for n in nodes),
                ),
                errors.InvarianceWarning,
                stacklevel=user_stacklevel(),
            )
        if not plan.left_out:
            return
        reasons = "; ".join(
            f"{node!r} measures "
            + ", ".join(repr(u) for u in scm.latents if u in scm.parents(node))
            + f" with a loading that differs by {plan.by[node]!r} (loading_by=)"
            for node in plan.left_out
        )
        names = ", ".join(map(repr, plan.left_out))
        what = f"the latents are not abducted from {names}"
        residuals = [n for n in plan.left_out if n in self._noise_candidates(scm)]
        if self._kind() == "additive_noise" and residuals:
            what += f" and the residual of {', '.join(map(repr, residuals))} is left out"
        logger.info(
            LEFT_OUT.format(
                target=self.target, features=self.features, reasons=reasons, what=what
            )
        )

    def _noise_candidates(self, scm: SCM) -> list[str]:
        """Observed nodes with additive noise other than the target (Fair Add's residuals)."""
        return [
            n for n in scm.observed
            if n != self.target and scm.equations[n].family.additive_noise
        ]

    def _paths(self, scm: SCM) -> tuple[str, tuple[tuple[str, ...], ...]] | None:
        """The protected attribute and the unfair paths of a path-specific learner: given
        (:class:`~counterfair.inputs.PathSpecific`) or derived from the allowed effects
        (:class:`~counterfair.inputs.BusinessNecessity`); ``None`` for other strategies."""
        strategy = self._strategy()
        if isinstance(strategy, inputs.PathSpecific):
            return check_path_options(scm, strategy.unfair_paths, strategy.baseline)
        if not isinstance(strategy, inputs.BusinessNecessity):
            return None
        allowed = strategy.allow
        attribute = self._attribute(scm)
        target = str(self.target)
        mediators = self._mediators(scm, attribute, target)
        paths: list[tuple[str, ...]] = []
        if "DE" not in allowed:
            ends = input_names(scm, target)
            direct = direct_paths(scm, attribute, mediators, ends)
            if "IE" in allowed and (shared := shared_prefix(scm, direct, mediators)):
                raise errors.SCMError(
                    ALLOW_SHARED.format(node=shared[0], mediator=shared[1], attribute=attribute)
                )
            paths += direct
        if "IE" not in allowed:
            paths += mediator_paths(scm, attribute, mediators)
        return attribute, tuple(paths)

    def _baseline(self) -> Any:
        """The level the unfair paths of a path-specific strategy see."""
        return getattr(self._strategy(), "baseline", None)

    def _attribute(self, scm: SCM) -> str:
        attribute = getattr(self._strategy(), "attribute", None)
        if attribute is not None:
            if attribute not in scm.protected:
                raise errors.SCMError(
                    ALLOW_NOT_PROTECTED.format(attribute=attribute, protected=list(scm.protected))
                )
            return str(attribute)
        causing = [p for p in scm.protected if scm.descendants(p)]
        if len(causing) != 1:
            raise ValueError(ALLOW_ATTRIBUTE.format(count=len(causing), names=causing))
        return causing[0]

    def _mediators(self, scm: SCM, attribute: str, target: str) -> tuple[str, ...]:
        after = scm.descendants(target) | {target} if target in scm.specs else {target}
        caused = scm.descendants(attribute)
        given = getattr(self._strategy(), "mediators", None)
        if given is None:
            return tuple(n for n in scm.observed if n in caused and n not in after)
        names = list(given)
        for node in names:
            what = None
            if node not in scm.observed:
                what = "not an observed node of the SCM"
            elif node not in caused:
                what = f"not a descendant of {attribute!r}"
            elif node in after:
                what = "the target or one of its descendants"
            if what is not None:
                raise errors.SCMError(
                    ALLOW_MEDIATOR.format(node=node, what=what, attribute=attribute, target=target)
                )
        return tuple(n for n in scm.observed if n in set(names))

    def _confounder_reference(self, scm: SCM, X: pd.DataFrame) -> dict[str, Any]:
        """The reference code of each protected confounder, when SE is disallowed."""
        strategy = self._strategy()
        if not isinstance(strategy, inputs.BusinessNecessity) or "SE" in strategy.allow:
            return {}
        attribute = self._attribute(scm)
        others = [p for p in scm.protected if p != attribute]
        held = scm.descendants(others) if others else frozenset()
        free = [
            n for n in input_names(scm, str(self.target))
            if n in scm.observed and n not in scm.descendants(attribute) and n not in held
        ]
        if free:  # an observed root (or a child of latents only) the rows may tie to X
            raise ValueError(ALLOW_SE_OBSERVED.format(nodes=free, attribute=attribute))
        fit = self.scm_fit_
        reference: dict[str, Any] = {}
        for z in scm.protected:
            if z == attribute:
                continue
            if fit.encoding.is_continuous(z):
                reference[z] = float(pd.to_numeric(X[z]).mean())
            else:
                level = str(X[z].astype(str).value_counts().index[0])
                reference[z] = int(fit.encoding.code(z, [level])[0])
        return reference

    def _input_plan(self, scm: SCM) -> tuple[list[str], list[str], list[str]]:
        """(latents, Normal nodes whose noise is used, observed non-descendants)."""
        target = str(self.target)
        fair_observed = [n for n in scm.non_descendants() if n != target]
        strategy = self._strategy()
        kind = strategy.kind
        if isinstance(strategy, inputs.Nodes):
            latents, observed = [], []
            for node in strategy.names:
                if node in scm.latents:
                    latents.append(node)
                    continue
                path = scm.path_from_protected(node)
                if path is not None or node in scm.protected:
                    source = path[0] if path else node
                    raise errors.FairnessError(
                        DESCENDANT_FEATURE.format(
                            node=node, source=source, path=" -> ".join(path or [node])
                        )
                    )
                observed.append(node)
            return latents, [], observed
        if kind == "path_specific":
            return [], [], input_names(scm, target)
        if kind == "non_descendants":
            if not fair_observed:
                raise errors.FairnessError(
                    NO_FAIR_FEATURES.format(
                        features=self.features,
                        target=target,
                        what="observed non-descendants of the protected attributes",
                    )
                )
            return [], [], fair_observed
        if kind == "latent":
            if not scm.latents:
                raise errors.FairnessError(
                    NO_FAIR_FEATURES.format(
                        features=self.features, target=target, what="latent node"
                    )
                )
            return list(scm.latents), [], fair_observed
        left_out = set(self._invariance(scm).left_out)
        noise_nodes = [n for n in self._noise_candidates(scm) if n not in left_out]
        if not noise_nodes and not scm.latents:
            raise errors.FairnessError(
                NO_FAIR_FEATURES.format(
                    features=self.features, target=target, what="Normal node besides the target"
                )
            )
        return list(scm.latents), noise_nodes, fair_observed

    def _conditioning(self, scm: SCM) -> list[str]:
        """Training conditioning (Algorithm 1): every observed node but the target and the
        indicators ``invariant_only`` leaves out."""
        left_out = set(self._invariance(scm).left_out)
        return [n for n in scm.observed if n != self.target and n not in left_out]

    def _feature_matrix(self, scm: SCM, abduction: Abduction) -> np.ndarray:
        """Inputs of the wrapped estimator, shape ``(S, N, p)``."""
        if self._kind() == "path_specific":
            return self._path_inputs(abduction)
        latents, noise_nodes, observed = self._input_plan(scm)
        s, n = abduction.n_samples, len(abduction.data)
        columns = [abduction.latents[name] for name in latents]
        if noise_nodes:
            # the fitted SCM: its terms carry what they learned from the training rows
            noise = abduction.noise(self.scm_fit_.scm, noise_nodes)
            columns += [noise[name] for name in noise_nodes]
        columns += [np.broadcast_to(abduction.observed[name], (s, n)) for name in observed]
        return np.stack(columns, axis=-1)

    def _path_inputs(
        self,
        abduction: Abduction,
        world: Mapping[str, np.ndarray] | None = None,
        world_paths: Sequence[tuple[str, ...]] | None = None,
        rest: np.ndarray | None = None,
    ) -> np.ndarray:
        scm = self._check_setup()
        checked = self._paths(scm)
        assert checked is not None  # a path-specific strategy
        source, paths = checked
        reference = getattr(self, "reference_", {})
        if reference:  # the spurious effect is disallowed: Z at its reference
            n = len(abduction.data)
            world = {**(world or {}), **{z: np.full(n, c) for z, c in reference.items()}}
        return corrected_inputs(
            self.scm_fit_,
            abduction,
            target=str(self.target),
            source=source,
            unfair_paths=paths,
            baseline=self._baseline(),
            seed=self.seed,
            world=world,
            world_paths=world_paths,
            rest=rest,
        )

    def path_specific_output(
        self,
        abduction: Abduction,
        *,
        response: Literal["prediction", "probability"] = "prediction",
        world: Mapping[str, np.ndarray] | None = None,
        world_paths: Sequence[Sequence[str]] | None = None,
        rest: np.ndarray | None = None,
    ) -> np.ndarray:
        """One output per row and sample (sample-major, as a counterfactual frame) in a world.

        Only for ``features="path_specific"``. ``world`` holds the protected
        codes of the world (default: the rows' own) and ``world_paths`` the
        paths along which ``world`` holds (default: all of them, a total
        intervention); with ``world_paths``, ``rest`` holds the codes the other fair
        paths see (default: the rows' own). The corrected inputs are recomputed from
        the abduction's latents and noise, so the unit is the same in every world.
        ``response="probability"`` gives the probability of the positive class
        of a classifier; ``"prediction"`` a regressor's prediction or the class
        label (as :func:`predict_output` compares it).
        """
        scm = self._check_setup()
        if self._kind() != "path_specific":
            raise ValueError(
                "path_specific_output needs features=cf.inputs.PathSpecific(...) or "
                f"cf.inputs.BusinessNecessity(...), got {self.features!r}"
            )
        checked = self._paths(scm)
        assert checked is not None
        paths = None if world_paths is None else check_paths(scm, checked[0], world_paths)
        scores = self._predict_inputs(self._path_inputs(abduction, world, paths, rest))
        if self._multiclass():
            if response == "probability":
                raise ValueError(
                    MULTICLASS_PROBABILITY.format(
                        name=type(self).__name__, n=len(self.classes_), classes=list(self.classes_)
                    )
                )
            labels = np.asarray(self.classes_)[np.argmax(scores, axis=-1)]
            return as_numbers(self, labels.reshape(-1))
        if response == "probability" or not self._is_classifier():
            return np.asarray(scores, dtype=float).reshape(-1)
        labels = np.where(scores >= 0.5, self.classes_[-1], self.classes_[0])
        return as_numbers(self, labels.reshape(-1))

    def _frame_features(self, scm: SCM, frame: pd.DataFrame) -> np.ndarray | None:
        """Inputs read from a counterfactual frame of this learner's own fit, if present."""
        if not isinstance(frame, pd.DataFrame):
            raise errors.DataError(errors.NOT_A_DATAFRAME.format(type=type(frame).__name__))
        if not {"world", "sample", "row"} <= set(frame.columns):
            return None  # not a counterfactual frame: abduct the inputs
        if self._kind() == "path_specific":
            return None  # recomputed from the abduction (path_specific_output)
        latents, noise_nodes, observed = self._input_plan(scm)
        names = [*latents, *(noise_column(n) for n in noise_nodes), *observed]
        if not all(name in frame.columns for name in names):
            return None
        return frame[names].to_numpy(dtype=float)

    # ------------------------------------------------------------------ fit / predict
    def fit(self, X: pd.DataFrame, y: Any = None) -> FairLearner:
        """Fit the SCM (unless ``scm_fit`` is given) and the wrapped estimator.

        Parameters
        ----------
        X : pandas.DataFrame
            Training rows with every protected and observed column of the SCM.
        y : array-like, optional
            Target values; default ``X[target]``.
        """
        scm = self._check_setup()
        if not isinstance(X, pd.DataFrame):
            raise errors.DataError(errors.NOT_A_DATAFRAME.format(type=type(X).__name__))
        target = str(self.target)
        if y is None:
            if target not in X.columns and target not in scm.specs:
                raise errors.SCMError(
                    TARGET_NOT_IN_SCM.format(
                        target=target, nodes=sorted(scm.specs), columns=list(X.columns)
                    )
                )
            if target not in X.columns:
                raise errors.DataError(
                    errors.MISSING_COLUMN.format(column=target, columns=list(X.columns))
                )
            y = X[target]
        y_values = np.asarray(y)
        if y_values.shape[0] != len(X):
            raise errors.DataError(f"y has {y_values.shape[0]} values for {len(X)} rows of X")
        self._input_plan(scm)  # validates features before any MCMC
        data = X if target in X.columns else X.assign(**{target: y_values})
        given = self._given_fit()
        if given is not None:
            self.scm_fit_ = given
        else:
            args = {"chains": 4, "warmup": 500, "draws": 500, **(self.fit_args or {})}
            if self.seed is not None:
                args["seed"] = self.seed
            args.setdefault("progress", False)
            self.scm_fit_ = scm.fit(data, **args)
        self.reference_ = self._confounder_reference(scm, X)
        m = int(self.n_samples)
        self._report_invariance(scm)
        left_out = set(self._invariance(scm).left_out)
        strategy = self._strategy()
        if strategy.condition_on_target or target not in scm.observed:
            if left_out:  # the fit's posterior conditions on every indicator: abduct again
                extra = dict(self.abduction_args or {})
                abduction = self.scm_fit_.abduct(
                    data,
                    condition_on=[
                        n for n in default_conditioning(scm, data) if n not in left_out
                    ],
                    n_samples=m,
                    seed=self.seed,
                    **extra,
                )
            elif _same_rows(self.scm_fit_.data, data):
                abduction = self.scm_fit_.abduct(None, n_samples=m, seed=self.seed)
            else:
                abduction = self.scm_fit_.abduct(
                    data, n_samples=m, seed=self.seed, **(self.abduction_args or {})
                )
        else:
            extra = dict(self.abduction_args or {})
            abduction = self.scm_fit_.abduct(
                data,
                condition_on=extra.pop("condition_on", self._conditioning(scm)),
                n_samples=m,
                seed=self.seed,
                **extra,
            )
        inputs = self._feature_matrix(scm, abduction)  # (S, N, p)
        s = inputs.shape[0]
        responses = _filled_target(self.scm_fit_, abduction, target, y_values)  # (S, N)
        if strategy.training == "mean":
            if responses is not None and self._is_classifier():
                raise errors.DataError(MEAN_INPUTS_WITH_HOLES.format(target=target))
            response = y_values if responses is None else responses.mean(axis=0)
            design = inputs.mean(axis=0)
        else:
            design = inputs.reshape(-1, inputs.shape[-1])
            response = np.tile(y_values, s) if responses is None else responses.reshape(-1)
        base = self.estimator
        if base is None:
            base = LogisticRegression() if self._is_classifier() else LinearRegression()
        self.estimator_ = clone(base).fit(design, response)
        latents, noise_nodes, observed = self._input_plan(scm)
        self.feature_names_ = [*latents, *(noise_column(n) for n in noise_nodes), *observed]
        if strategy.kind == "path_specific":  # latents first, then the corrected nodes
            self.feature_names_ = input_names(scm, target)
        if self._is_classifier():
            self.classes_ = self.estimator_.classes_
        return self

    def _abduct_args(self, scm: SCM, X: pd.DataFrame) -> dict[str, Any]:
        args = {"n_samples": int(self.n_samples), "seed": self.seed, **(self.abduction_args or {})}
        if not scm.latents and args.get("method", "mean") == "mean":
            args["n_samples"] = 1  # inputs are deterministic given the mean parameters
        if "condition_on" not in args:  # the user's choice of indicators is kept
            left_out = set(self._invariance(scm).left_out)
            args["condition_on"] = [
                n for n in default_conditioning(scm, X)
                if n != self.target and n not in left_out
            ]
        return args

    def _chunk_draws(self, X: pd.DataFrame | Rows) -> Iterator[np.ndarray]:
        """:meth:`predict_draws` chunk by chunk (:mod:`counterfair.inference.abducted_chunks`)."""
        scm = self._check_setup()
        fit = self.scm_fit_
        rows = fit.rows_of(X)
        args = self._abduct_args(scm, rows.frame)
        for _, abduction in abduct_chunks(fit, rows, **args):
            yield self._predict_inputs(self._feature_matrix(scm, abduction))

    def _multiclass(self) -> bool:
        return self._is_classifier() and len(getattr(self, "classes_", ())) > 2

    def _predict_inputs(self, inputs: np.ndarray) -> np.ndarray:
        flat = inputs.reshape(-1, inputs.shape[-1])
        if self._multiclass():
            proba = np.asarray(self.estimator_.predict_proba(flat), dtype=float)
            return proba.reshape(*inputs.shape[:-1], proba.shape[-1])
        if self._is_classifier():
            out = self.estimator_.predict_proba(flat)[:, 1]
        else:
            out = self.estimator_.predict(flat)
        return np.asarray(out, dtype=float).reshape(inputs.shape[:-1])

    def _probabilities(self, X: pd.DataFrame | Rows) -> np.ndarray:
        """Class probabilities per row, averaged over the draws: ``(N,)`` binary, ``(N, K)``."""
        scm = self._check_setup()
        direct = None if isinstance(X, Rows) else self._frame_features(scm, X)
        if direct is not None:
            return self._predict_inputs(direct[None, :, :])[0]
        return chunking.concat_rows(
            [chunking.sample_mean(d) for d in self._chunk_draws(X)], axis=0
        )

    def predict_draws(self, X: pd.DataFrame | Rows) -> np.ndarray:
        """Predictions for every draw of each row's fair inputs, shape ``(S, N)``.

        For a classifier, the probability of the positive class; for a
        multi-class target (a categorical or ordinal node with more than two
        levels), the probability of every class, shape ``(S, N, K)``.

        Rows are processed in chunks of :func:`counterfair.options.chunk_bytes`
        (abduction, inputs, estimator); with exact abduction (the default where it
        applies) the result is the same for any chunk size. MCMC abduction of new
        rows runs once on all rows and is not chunk-invariant.

        ``X`` may be a :class:`counterfair.rows.validated.Rows` (one partition of a larger
        data set with its global positions): its rows then get the numbers they
        get in the whole data set. So may ``X`` of :meth:`predict` and
        :meth:`predict_proba`.
        """
        return chunking.concat_rows(list(self._chunk_draws(X)), axis=1)

    def predict_abduction(self, abduction: Abduction) -> np.ndarray:
        """Predictions from given joint samples (shared across worlds), shape ``(S, N)``."""
        scm = self._check_setup()
        return self._predict_inputs(self._feature_matrix(scm, abduction))

    def predict(
        self,
        X: pd.DataFrame | Rows,
        *,
        rows_out: str | os.PathLike[str] | None = None,
        overwrite: bool = False,
    ) -> np.ndarray:
        """Posterior expectation of the prediction for each row (class labels for a classifier).

        When ``X`` is a counterfactual frame (from :meth:`Fit.counterfactual`,
        with ``row``, ``sample`` and ``world`` columns) of this learner's own SCM
        fit, its latent and ``<node>:noise`` columns are used directly, one
        prediction per frame row; otherwise the inputs are abducted for each row
        (a plain latent column in ``X``, such as the true K of simulated data,
        is ignored), chunk by chunk, with the same result for any chunk size
        (see :meth:`predict_draws`). A Dask DataFrame is predicted partition by
        partition (:mod:`counterfair.dask.row_calls`) and gives the same NumPy array;
        with ``rows_out=`` a folder, the predictions are written there as parquet
        partitions (columns ``row``, ``position``, ``prediction``; a non-empty folder
        is replaced only with ``overwrite=True``) and a Dask frame reading them is
        returned.
        """
        if (handler := dispatch.handler_for("FairLearner.predict", X)) is not None:
            return handler(self, X, rows_out=rows_out, overwrite=overwrite)
        refuse_rows_out(rows_out, overwrite)
        scores = self._probabilities(X)
        if self._multiclass():  # the class of highest posterior expected probability
            return np.asarray(self.classes_)[np.argmax(scores, axis=-1)]
        if self._is_classifier():
            return np.where(scores >= 0.5, self.classes_[-1], self.classes_[0])
        return scores

    def predict_proba(self, X: pd.DataFrame | Rows) -> np.ndarray:
        """Class probabilities, averaged over the draws, shape ``(N, n_classes)``.

        Columns follow ``classes_``. Available for classification targets
        (Bernoulli, ordinal and categorical nodes). A Dask DataFrame is predicted
        partition by partition (:mod:`counterfair.dask.row_calls`).
        """
        if (handler := dispatch.handler_for("FairLearner.predict_proba", X)) is not None:
            return handler(self, X)
        if not self._is_classifier():
            raise AttributeError(
                "predict_proba is available for a classification target only "
                "(a Bernoulli, ordinal or categorical node)"
            )
        scores = self._probabilities(X)
        if self._multiclass():
            return np.asarray(scores)
        return np.column_stack([1.0 - scores, scores])

    def score(self, X: pd.DataFrame, y: Any = None) -> float:
        """R^2 for a regressor, accuracy for a classifier."""
        truth = np.asarray(X[str(self.target)] if y is None else y)
        predicted = self.predict(X)
        if self._is_classifier():
            return float(accuracy_score(truth, predicted))
        return float(r2_score(truth, predicted))


MEAN_INPUTS_WITH_HOLES = (
    "training='mean' gives each row one label, but {target!r} is missing in some "
    "rows and drawn per sample (missing='model'): use training_inputs='samples'"
)
"""Refusal of a classifier trained on mean inputs when its target has missing values."""


def _filled_target(
    fit: Fit, abduction: Abduction, target: str, y: np.ndarray
) -> np.ndarray | None:
    """The target per sample, ``(S, N)``, where the rows miss it (a fit of
    ``missing="model"``): each sample's draw in the target's own labels (multiple
    imputation); None when every row holds it."""
    mask = abduction.holes.get(target)
    if mask is None or not np.asarray(mask).any():
        return None
    drawn = np.asarray(abduction.observed[target])  # (S, N), level codes or values
    labels = getattr(fit.scm.specs[target], "labels", None)
    numeric = np.asarray(y).dtype.kind in "biuf"  # the rows hold numbers, not labels
    out = np.array(np.broadcast_to(y, drawn.shape), dtype=float if numeric else object)
    filled = drawn[:, mask]
    if labels:  # a labelled node: its level codes back to the labels the rows hold
        filled = np.asarray(labels, dtype=float if numeric else object)[filled.astype(int)]
    out[:, mask] = filled
    return out


def _same_rows(fitted: pd.DataFrame, data: pd.DataFrame) -> bool:
    """Whether ``data`` holds the rows a fit was made on (then its posterior serves them)."""
    if fitted is data:
        return True
    if fitted.shape[0] != data.shape[0] or not fitted.index.equals(data.index):
        return False
    shared = [c for c in fitted.columns if c in data.columns]
    return bool(fitted[shared].astype(str).equals(data[shared].astype(str)))
