"""FairLearning (Kusner et al. 2017, Algorithm 1) and the unfair baselines.

:class:`FairLearner` is a scikit-learn estimator. ``fit`` fits the SCM by NUTS
on the training rows, draws ``m = n_samples`` joint samples of each row's
exogenous inputs (latents, and for ``features="additive_noise"`` the abducted
noise of Normal nodes), repeats each row ``m`` times with its draws, and fits the
wrapped estimator on that augmented set together with any observed
non-descendants of the protected attributes. ``predict`` abducts the same inputs
for new rows and returns the mean of the estimator's prediction over the draws.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone, is_classifier
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import accuracy_score, r2_score

from counterfair import chunking, errors
from counterfair.counterfactual import Coupling, DoValue, check_coupling, noise_column
from counterfair.families import family_of
from counterfair.path_features import (
    check_options,
    corrected_inputs,
    input_names,
    learner_worlds,
)
from counterfair.paths import check_paths
from counterfair.posterior import Abduction, Fit, default_conditioning
from counterfair.rows import Rows, abduct_chunks, slice_do
from counterfair.scm import SCM
from counterfair.specs import Observed, Protected

FeatureSet = Literal["non_descendants", "latent", "additive_noise", "path_specific"]
FEATURE_SETS: tuple[str, ...] = ("non_descendants", "latent", "additive_noise", "path_specific")

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
MULTICLASS_PROBABILITY = (
    "response='probability' compares one number per row, the probability of the positive "
    "class, but {name} has {n} classes {classes}; audit labels (response='prediction', a "
    "change is a different label) or pass a function returning the probability of the "
    "class you mean"
)
FIT_ARGS_SEED = (
    "fit_args contains 'seed' and seed={seed!r} is given too; pass the seed once, as seed="
)

NO_FAIR_FEATURES = (
    "features={features!r} gives no input for target {target!r}: the SCM has no {what}"
)
DESCENDANT_FEATURE = (
    "feature {node!r} is a descendant of protected attribute {source!r} "
    "(path {path}); a counterfactually fair predictor cannot use it"
)


class FairLearner(BaseEstimator):  # type: ignore[misc]
    """A counterfactually fair predictor (Kusner et al. 2017, Algorithm 1).

    Parameters
    ----------
    scm : SCM
        The structural causal model. It may contain the target (e.g. ZFYA with
        the latent K as a parent, the paper's level 2 model) or not (the level 3
        model of UGPA and LSAT).
    target : str
        Column to predict.
    features : {"non_descendants", "latent", "additive_noise"} or list of str
        Fair inputs. ``"non_descendants"`` (level 1): observed non-descendants
        of the protected attributes; ``"latent"`` (level 2, Fair K): the
        latents' posterior draws plus non-descendants; ``"additive_noise"``
        (level 3, Fair Add): the abducted noise of every Normal node other than
        the target, plus latents and non-descendants. A list names nodes
        explicitly; naming a descendant of a protected attribute raises
        :class:`~counterfair.FairnessError`. ``"path_specific"`` (Chiappa,
        2019): the latents and every observed node other than the target (and
        its descendants) with its descendants along ``unfair_paths`` recomputed
        with the protected attribute at ``baseline`` and the abducted noise,
        fair paths keeping the row's own level (:mod:`counterfair.path_features`).
    estimator : scikit-learn estimator, optional
        Default ``LinearRegression()``, or ``LogisticRegression()`` for a
        Bernoulli target.
    n_samples : int
        ``m``, draws of the exogenous inputs per training row.
    condition_on_target : bool
        ``False`` (default, Algorithm 1): training latents are drawn from
        ``P(U | x, a)`` with the parameters at their posterior means.
        ``True`` (the authors' code): training latents come from the joint
        posterior of the SCM fit, which also conditions on the target.
    training_inputs : {"samples", "mean"}
        ``"samples"`` repeats each training row ``m`` times with its draws
        (Algorithm 1); ``"mean"`` uses each row's posterior mean once, as the
        authors' code does.
    fit_args : dict, optional
        Passed to :meth:`SCM.fit` (``chains``, ``warmup``, ``draws``, ...;
        ``progress`` defaults to ``False``). A ``seed`` here is used when
        ``seed`` is not given; two different seeds are an error. Giving
        ``fit_args`` together with ``scm_fit`` is an error (they would be ignored).
    abduction_args : dict, optional
        Passed to :meth:`Fit.abduct` for new rows (``method``, ``chains``, ...).
    scm_fit : Fit, optional
        A fit of ``scm`` to reuse instead of fitting again.
    seed : int, optional
        Seed of the SCM fit, abduction and draws.
    unfair_paths : list of tuple, optional
        With ``features="path_specific"`` only: node tuples ``(A, V, ...)``
        from one protected attribute; every path beginning with one is unfair
        (:mod:`counterfair.paths`).
    baseline : str or float, optional
        With ``features="path_specific"`` only: the level of ``A`` the unfair
        paths see.

    Attributes
    ----------
    scm_fit_ : Fit
        The fitted SCM.
    estimator_ : estimator
        The fitted wrapped estimator.
    feature_names_ : list of str
        Inputs of the wrapped estimator, in order.
    """

    def __init__(
        self,
        scm: SCM | None = None,
        target: str | None = None,
        features: FeatureSet | Sequence[str] = "latent",
        estimator: Any = None,
        n_samples: int = 50,
        condition_on_target: bool = False,
        training_inputs: Literal["samples", "mean"] = "samples",
        fit_args: Mapping[str, Any] | None = None,
        abduction_args: Mapping[str, Any] | None = None,
        scm_fit: Fit | None = None,
        seed: int | None = None,
        unfair_paths: Sequence[Sequence[str]] | None = None,
        baseline: str | float | None = None,
    ) -> None:
        self.scm = scm
        self.target = target
        self.features = features
        self.estimator = estimator
        self.n_samples = n_samples
        self.condition_on_target = condition_on_target
        self.training_inputs = training_inputs
        self.fit_args = fit_args
        self.abduction_args = abduction_args
        self.scm_fit = scm_fit
        self.seed = seed
        self.unfair_paths = unfair_paths
        self.baseline = baseline

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
        if self.scm is None or self.target is None:
            raise ValueError("FairLearner needs an scm and a target")
        scm = self.scm
        target = self.target
        if target in scm.protected:
            raise errors.FairnessError(PROTECTED_TARGET.format(target=target))
        if target in scm.latents:
            raise errors.SCMError(LATENT_TARGET.format(target=target))
        fit_args = dict(self.fit_args or {})
        if "seed" in fit_args and self.seed is not None and fit_args["seed"] != self.seed:
            raise ValueError(FIT_ARGS_SEED.format(seed=self.seed))
        if fit_args and self.scm_fit is not None:
            raise ValueError(
                f"fit_args {sorted(fit_args)} would be ignored: scm_fit is given, so the "
                "SCM is not fitted again; drop fit_args or scm_fit"
            )
        if isinstance(self.features, str) and self.features not in FEATURE_SETS:
            raise ValueError(
                f"features must be one of {FEATURE_SETS} or a list of node names, "
                f"got {self.features!r}"
            )
        check_options(scm, self.features, self.unfair_paths, self.baseline)
        if self.training_inputs not in ("samples", "mean"):
            raise ValueError(
                f"training_inputs must be 'samples' or 'mean', got {self.training_inputs!r}"
            )
        return self.scm

    def _input_plan(self, scm: SCM) -> tuple[list[str], list[str], list[str]]:
        """(latents, Normal nodes whose noise is used, observed non-descendants)."""
        target = str(self.target)
        fair_observed = [n for n in scm.non_descendants() if n != target]
        if not isinstance(self.features, str):
            latents, observed = [], []
            for node in self.features:
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
        if self.features == "path_specific":
            return [], [], input_names(scm, target)
        if self.features == "non_descendants":
            if not fair_observed:
                raise errors.FairnessError(
                    NO_FAIR_FEATURES.format(
                        features=self.features,
                        target=target,
                        what="observed non-descendants of the protected attributes",
                    )
                )
            return [], [], fair_observed
        if self.features == "latent":
            if not scm.latents:
                raise errors.FairnessError(
                    NO_FAIR_FEATURES.format(
                        features=self.features, target=target, what="latent node"
                    )
                )
            return list(scm.latents), [], fair_observed
        noise_nodes = [
            n for n in scm.observed if n != target and scm.equations[n].family.additive_noise
        ]
        if not noise_nodes and not scm.latents:
            raise errors.FairnessError(
                NO_FAIR_FEATURES.format(
                    features=self.features, target=target, what="Normal node besides the target"
                )
            )
        return list(scm.latents), noise_nodes, fair_observed

    def _conditioning(self, scm: SCM) -> list[str]:
        return [n for n in scm.observed if n != self.target]

    def _feature_matrix(self, scm: SCM, abduction: Abduction) -> np.ndarray:
        """Inputs of the wrapped estimator, shape ``(S, N, p)``."""
        if self.features == "path_specific":
            return self._path_inputs(abduction)
        latents, noise_nodes, observed = self._input_plan(scm)
        s, n = abduction.n_samples, len(abduction.data)
        columns = [abduction.latents[name] for name in latents]
        if noise_nodes:
            noise = abduction.noise(scm, noise_nodes)
            columns += [noise[name] for name in noise_nodes]
        columns += [np.broadcast_to(abduction.observed[name], (s, n)) for name in observed]
        return np.stack(columns, axis=-1)

    def _path_inputs(
        self,
        abduction: Abduction,
        world: Mapping[str, np.ndarray] | None = None,
        world_paths: Sequence[tuple[str, ...]] | None = None,
    ) -> np.ndarray:
        scm = self._check_setup()
        checked = check_options(scm, self.features, self.unfair_paths, self.baseline)
        assert checked is not None  # features == "path_specific"
        source, paths = checked
        return corrected_inputs(
            self.scm_fit_,
            abduction,
            target=str(self.target),
            source=source,
            unfair_paths=paths,
            baseline=self.baseline,
            seed=self.seed,
            world=world,
            world_paths=world_paths,
        )

    def path_specific_output(
        self,
        abduction: Abduction,
        *,
        response: Literal["prediction", "probability"] = "prediction",
        world: Mapping[str, np.ndarray] | None = None,
        world_paths: Sequence[Sequence[str]] | None = None,
    ) -> np.ndarray:
        """One output per row and sample (sample-major, as a counterfactual frame) in a world.

        Only for ``features="path_specific"``. ``world`` holds the protected
        codes of the world (default: the rows' own) and ``world_paths`` the
        paths along which ``world`` holds (default: all of them, a total
        intervention); the corrected inputs are recomputed from the abduction's
        latents and noise, so the unit is the same in every world.
        ``response="probability"`` gives the probability of the positive class
        of a classifier; ``"prediction"`` a regressor's prediction or the class
        label (as :func:`predict_output` compares it).
        """
        scm = self._check_setup()
        if self.features != "path_specific":
            raise ValueError(
                f"path_specific_output needs features='path_specific', got {self.features!r}"
            )
        checked = check_options(scm, self.features, self.unfair_paths, self.baseline)
        assert checked is not None
        paths = None if world_paths is None else check_paths(scm, checked[0], world_paths)
        scores = self._predict_inputs(self._path_inputs(abduction, world, paths))
        if self._multiclass():
            if response == "probability":
                raise ValueError(
                    MULTICLASS_PROBABILITY.format(
                        name=type(self).__name__, n=len(self.classes_), classes=list(self.classes_)
                    )
                )
            labels = np.asarray(self.classes_)[np.argmax(scores, axis=-1)]
            return _as_numbers(self, labels.reshape(-1))
        if response == "probability" or not self._is_classifier():
            return np.asarray(scores, dtype=float).reshape(-1)
        labels = np.where(scores >= 0.5, self.classes_[-1], self.classes_[0])
        return _as_numbers(self, labels.reshape(-1))

    def _frame_features(self, scm: SCM, frame: pd.DataFrame) -> np.ndarray | None:
        """Inputs read from a counterfactual frame of this learner's own fit, if present."""
        if not {"world", "sample", "row"} <= set(frame.columns):
            return None  # not a counterfactual frame: abduct the inputs
        if self.features == "path_specific":
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
        if self.scm_fit is not None:
            self.scm_fit_ = self.scm_fit
        else:
            args = {"chains": 4, "warmup": 500, "draws": 500, **(self.fit_args or {})}
            if self.seed is not None:
                args["seed"] = self.seed
            args.setdefault("progress", False)
            self.scm_fit_ = scm.fit(data, **args)
        m = int(self.n_samples)
        if self.condition_on_target or target not in scm.observed:
            if _same_rows(self.scm_fit_.data, data):
                abduction = self.scm_fit_.abduct(None, n_samples=m, seed=self.seed)
            else:
                abduction = self.scm_fit_.abduct(
                    data, n_samples=m, seed=self.seed, **(self.abduction_args or {})
                )
        else:
            abduction = self.scm_fit_.abduct(
                data,
                condition_on=self._conditioning(scm),
                n_samples=m,
                seed=self.seed,
                **(self.abduction_args or {}),
            )
        inputs = self._feature_matrix(scm, abduction)  # (S, N, p)
        if self.training_inputs == "mean":
            design, response = inputs.mean(axis=0), y_values
        else:
            s = inputs.shape[0]
            design = inputs.reshape(-1, inputs.shape[-1])
            response = np.tile(y_values, s)
        base = self.estimator
        if base is None:
            base = LogisticRegression() if self._is_classifier() else LinearRegression()
        self.estimator_ = clone(base).fit(design, response)
        latents, noise_nodes, observed = self._input_plan(scm)
        self.feature_names_ = [*latents, *(noise_column(n) for n in noise_nodes), *observed]
        if self.features == "path_specific":  # latents first, then the corrected nodes
            self.feature_names_ = input_names(scm, target)
        if self._is_classifier():
            self.classes_ = self.estimator_.classes_
        return self

    def _abduct_args(self, scm: SCM, X: pd.DataFrame) -> dict[str, Any]:
        args = {"n_samples": int(self.n_samples), "seed": self.seed, **(self.abduction_args or {})}
        if not scm.latents and args.get("method", "mean") == "mean":
            args["n_samples"] = 1  # inputs are deterministic given the mean parameters
        args["condition_on"] = [n for n in default_conditioning(scm, X) if n != self.target]
        return args

    def _chunk_draws(self, X: pd.DataFrame | Rows) -> Iterator[np.ndarray]:
        """:meth:`predict_draws` chunk by chunk (:func:`counterfair.rows.abduct_chunks`)."""
        scm = self._check_setup()
        rows = Rows.from_frame(X)
        args = self._abduct_args(scm, rows.frame)
        per_row = chunking.bytes_per_row(args["n_samples"], 2 * len(scm.specs))
        for _, abduction in abduct_chunks(self.scm_fit_, rows, bytes_per_row=per_row, **args):
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
        return chunking.concat_rows([d.mean(axis=0) for d in self._chunk_draws(X)], axis=0)

    def predict_draws(self, X: pd.DataFrame | Rows) -> np.ndarray:
        """Predictions for every draw of each row's fair inputs, shape ``(S, N)``.

        For a classifier, the probability of the positive class; for a
        multi-class target (a categorical or ordinal node with more than two
        levels), the probability of every class, shape ``(S, N, K)``.

        Rows are processed in chunks of :func:`counterfair.options.chunk_bytes`
        (abduction, inputs, estimator); with exact abduction (the default where it
        applies) the result is the same for any chunk size. MCMC abduction of new
        rows runs once on all rows and is not chunk-invariant.

        ``X`` may be a :class:`counterfair.rows.Rows` (one partition of a larger
        data set with its global positions): its rows then get the numbers they
        get in the whole data set. So may ``X`` of :meth:`predict` and
        :meth:`predict_proba`.
        """
        return chunking.concat_rows(list(self._chunk_draws(X)), axis=1)

    def predict_abduction(self, abduction: Abduction) -> np.ndarray:
        """Predictions from given joint samples (shared across worlds), shape ``(S, N)``."""
        scm = self._check_setup()
        return self._predict_inputs(self._feature_matrix(scm, abduction))

    def predict(self, X: pd.DataFrame | Rows) -> np.ndarray:
        """Posterior expectation of the prediction for each row (class labels for a classifier).

        When ``X`` is a counterfactual frame (from :meth:`Fit.counterfactual`,
        with ``row``, ``sample`` and ``world`` columns) of this learner's own SCM
        fit, its latent and ``<node>:noise`` columns are used directly, one
        prediction per frame row; otherwise the inputs are abducted for each row
        (a plain latent column in ``X``, such as the true K of simulated data,
        is ignored), chunk by chunk, with the same result for any chunk size
        (see :meth:`predict_draws`).
        """
        scores = self._probabilities(X)
        if self._multiclass():  # the class of highest posterior expected probability
            return np.asarray(self.classes_)[np.argmax(scores, axis=-1)]
        if self._is_classifier():
            return np.where(scores >= 0.5, self.classes_[-1], self.classes_[0])
        return scores

    def predict_proba(self, X: pd.DataFrame | Rows) -> np.ndarray:
        """Class probabilities, averaged over the draws, shape ``(N, n_classes)``.

        Columns follow ``classes_``. Available for classification targets
        (Bernoulli, ordinal and categorical nodes).
        """
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

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Save the fitted predictor to a folder without pickle (read by :func:`counterfair.load`).

        See :mod:`counterfair.learner_store`. ``overwrite`` replaces a non-empty
        ``path`` (refused otherwise). Returns the folder written.
        """
        from counterfair.learner_store import save_learner

        return save_learner(self, path, overwrite=overwrite)


def _same_rows(fitted: pd.DataFrame, data: pd.DataFrame) -> bool:
    """Whether ``data`` holds the rows a fit was made on (then its posterior serves them)."""
    if fitted is data:
        return True
    if fitted.shape[0] != data.shape[0] or not fitted.index.equals(data.index):
        return False
    shared = [c for c in fitted.columns if c in data.columns]
    return bool(fitted[shared].astype(str).equals(data[shared].astype(str)))


# ---------------------------------------------------------------------- baselines
def _design(frame: pd.DataFrame, columns: Sequence[str], categorical: Sequence[str]) -> np.ndarray:
    parts = []
    for column in columns:
        if column in categorical:
            dummies = pd.get_dummies(frame[column], prefix=column, dtype=float)
            parts.append(dummies)
        else:
            parts.append(frame[[column]].astype(float))
    return pd.concat(parts, axis=1).to_numpy()


class BaselinePredictor(BaseEstimator):  # type: ignore[misc]
    """A plain scikit-learn model on chosen columns (protected ones one-hot encoded).

    Parameters
    ----------
    columns : list of str
        Input columns.
    target : str
        Column to predict.
    categorical : list of str
        Columns to one-hot encode (all levels, as the paper's Full model).
    estimator : estimator, optional
        Default ``LinearRegression()``.
    """

    def __init__(
        self,
        columns: Sequence[str] = (),
        target: str = "",
        categorical: Sequence[str] = (),
        estimator: Any = None,
    ) -> None:
        self.columns = columns
        self.target = target
        self.categorical = categorical
        self.estimator = estimator

    def _matrix(self, X: pd.DataFrame) -> np.ndarray:
        frame = X.copy()
        for column in self.categorical:
            levels = self.levels_[column]
            values = frame[column].astype(str)
            unseen = ~values.isin(levels)
            if unseen.any():
                row = frame.index[int(np.argmax(unseen.to_numpy()))]
                raise errors.DataError(
                    errors.UNSEEN_LEVEL.format(
                        node=column, value=values[row], row=row, levels=list(levels)
                    )
                )
            frame[column] = pd.Categorical(values, categories=levels)
        return _design(frame, list(self.columns), list(self.categorical))

    def fit(self, X: pd.DataFrame, y: Any = None) -> BaselinePredictor:
        """Fit the estimator on ``X[columns]``."""
        missing = [c for c in [*self.columns] if c not in X.columns]
        if missing:
            raise errors.DataError(
                errors.MISSING_COLUMN.format(column=missing[0], columns=list(X.columns))
            )
        self.levels_ = {c: sorted(X[c].astype(str).unique()) for c in self.categorical}
        response = X[self.target] if y is None else y
        base = self.estimator if self.estimator is not None else LinearRegression()
        self.estimator_ = clone(base).fit(self._matrix(X), np.asarray(response))
        return self

    def _row_bytes(self) -> float:
        width = len(self.columns) + sum(len(v) for v in self.levels_.values())
        return chunking.bytes_per_row(1, width)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Predictions of the fitted estimator (as floats when numeric; class labels else).

        Rows are processed in chunks of :func:`counterfair.options.chunk_bytes`.
        """
        out = chunking.apply_by_rows(
            lambda part: np.asarray(self.estimator_.predict(self._matrix(part))),
            X,
            bytes_per_row=self._row_bytes(),
        )
        return out.astype(float) if out.dtype.kind in "biuf" else out

    def predict_proba(self, X: pd.DataFrame) -> np.ndarray:
        """Class probabilities of the fitted estimator, shape ``(N, n_classes)``.

        Raises
        ------
        AttributeError
            If the wrapped estimator has no ``predict_proba`` (a regressor).
        """
        if not hasattr(self.estimator_, "predict_proba"):
            raise AttributeError(
                f"{type(self.estimator_).__name__} has no predict_proba; give the baseline "
                "a classifier, e.g. estimator=LogisticRegression()"
            )
        return chunking.apply_by_rows(
            lambda part: np.asarray(self.estimator_.predict_proba(self._matrix(part)), float),
            X,
            bytes_per_row=self._row_bytes(),
        )

    @property
    def classes_(self) -> np.ndarray:
        """Classes of the wrapped classifier."""
        return np.asarray(self.estimator_.classes_)

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Save the fitted predictor to a folder without pickle (read by :func:`counterfair.load`).

        See :mod:`counterfair.learner_store`. ``overwrite`` replaces a non-empty
        ``path`` (refused otherwise). Returns the folder written.
        """
        from counterfair.learner_store import save_learner

        return save_learner(self, path, overwrite=overwrite)


def full_predictor(
    scm: SCM, target: str, estimator: Any = None, exclude: Sequence[str] = ()
) -> BaselinePredictor:
    """The unfair "Full" baseline: every observed column and the protected ones.

    Categorical protected attributes and level-valued (ordinal) nodes are
    one-hot encoded; continuous protected attributes enter as numbers.
    """
    columns = [*scm.protected, *(n for n in scm.observed if n != target and n not in exclude)]
    return BaselinePredictor(columns, target, _categorical_columns(scm, columns), estimator)


def _categorical_columns(scm: SCM, columns: Sequence[str]) -> list[str]:
    """The columns a baseline one-hot encodes: categorical protected and level-valued nodes."""
    out = []
    for column in columns:
        spec = scm.specs[column]
        categorical = isinstance(spec, Protected) and not spec.continuous
        levels = isinstance(spec, Observed) and family_of(spec).n_levels(spec) is not None
        if categorical or levels:
            out.append(column)
    return out


def unaware_predictor(
    scm: SCM, target: str, estimator: Any = None, exclude: Sequence[str] = ()
) -> BaselinePredictor:
    """The "Unaware" baseline: every observed column except the protected ones."""
    columns = [n for n in scm.observed if n != target and n not in exclude]
    return BaselinePredictor(columns, target, _categorical_columns(scm, columns), estimator)


# ---------------------------------------------------------------------- counterfactual predictions
Predictor = Any  # an estimator / pipeline with .predict(DataFrame), or a callable -> array
Response = Literal["prediction", "probability"]
RESPONSES: tuple[str, ...] = ("prediction", "probability")

NO_FEATURE_COLUMN = (
    "predictor {name} was fitted on column {column!r}, which the rows do not have; "
    "columns: {columns}"
)
NO_PREDICT_PROBA = (
    "response='probability' needs a predictor with predict_proba; {name} has none "
    "(pass a function returning probabilities instead)"
)


def _estimator_input(predictor: Any, frame: pd.DataFrame) -> pd.DataFrame:
    """The columns a fitted scikit-learn estimator was trained on (``feature_names_in_``)."""
    names = getattr(predictor, "feature_names_in_", None)
    if names is None:
        return frame
    missing = [str(c) for c in names if c not in frame.columns]
    if missing:
        raise errors.DataError(
            NO_FEATURE_COLUMN.format(
                name=type(predictor).__name__, column=missing[0], columns=list(frame.columns)
            )
        )
    return frame[list(names)]


def predict_output(
    predictor: Predictor, frame: pd.DataFrame, response: Response = "prediction"
) -> np.ndarray:
    """One number per row of ``frame``: a prediction, or the probability of the positive class.

    Parameters
    ----------
    predictor : estimator, pipeline or callable
        A fitted scikit-learn estimator or pipeline (its columns are chosen by
        ``feature_names_in_`` when it has them), a :class:`FairLearner`, a
        baseline, or a function of a DataFrame returning one number per row.
    frame : pandas.DataFrame
        Rows.
    response : {"prediction", "probability"}
        ``"probability"`` calls ``predict_proba`` and keeps the column of the
        last class (the positive class of a binary classifier); a function is
        taken to return probabilities already. A two-column output (a bound
        ``predict_proba``) is reduced to its last column; ``predict_proba``
        with more than two classes is an error (one number per row is compared).
        Predicted labels that are not numbers become their index in the
        predictor's ``classes_``.
    """
    if response not in RESPONSES:
        raise ValueError(f"response must be one of {RESPONSES}, got {response!r}")
    name = type(predictor).__name__
    if response == "probability" and hasattr(predictor, "predict_proba"):
        proba = np.asarray(predictor.predict_proba(_estimator_input(predictor, frame)))
        if proba.ndim == 2 and proba.shape[1] > 2:
            classes = list(getattr(predictor, "classes_", range(proba.shape[1])))
            raise ValueError(
                MULTICLASS_PROBABILITY.format(name=name, n=proba.shape[1], classes=classes)
            )
        return np.asarray(proba[:, -1] if proba.ndim == 2 else proba, dtype=float)
    if hasattr(predictor, "predict"):
        if response == "probability":
            raise TypeError(NO_PREDICT_PROBA.format(name=name))
        labels = np.asarray(predictor.predict(_estimator_input(predictor, frame)))
        return _as_numbers(predictor, labels)
    if callable(predictor):
        owner = getattr(predictor, "__self__", None)  # a bound method of an estimator
        out = np.asarray(predictor(frame))
        if out.ndim == 2 and out.shape[1] > 2:
            classes = list(getattr(owner, "classes_", range(out.shape[1])))
            raise ValueError(
                MULTICLASS_PROBABILITY.format(
                    name=type(owner).__name__ if owner is not None else name,
                    n=out.shape[1],
                    classes=classes,
                )
            )
        if out.ndim == 2:  # a bound predict_proba
            return np.asarray(out[:, -1], dtype=float)
        return _as_numbers(owner if owner is not None else predictor, out)
    raise TypeError(f"predictor must have .predict or be callable, got {name}")


def _as_numbers(predictor: Predictor, labels: np.ndarray) -> np.ndarray:
    """Predictions as floats; class labels that are not numbers become their index in
    ``classes_`` (so that two worlds' labels can be compared)."""
    if labels.dtype.kind in "biuf":
        return labels.astype(float)
    classes = getattr(predictor, "classes_", None)
    if classes is None:
        raise TypeError(
            f"{type(predictor).__name__} predicts non-numeric values and has no classes_; "
            "pass a function returning one number per row"
        )
    lookup = {str(c): i for i, c in enumerate(np.asarray(classes))}
    return np.array([lookup[str(label)] for label in labels], dtype=float)


def multiclass_labels(predictor: Predictor, response: Response) -> bool:
    """Whether the outputs compared are labels of more than two classes (a change is then
    0 or 1: the label differs or not). A bound ``predict_proba`` gives probabilities."""
    owner = getattr(predictor, "__self__", predictor)
    if getattr(predictor, "__name__", "") == "predict_proba":
        return False
    return response == "prediction" and len(getattr(owner, "classes_", ())) > 2


def _predict(predictor: Predictor, frame: pd.DataFrame) -> np.ndarray:
    return predict_output(predictor, frame)


def _shared_learner(predictor: Predictor, fit: Fit) -> bool:
    """Whether the predictor (or the object of a bound method) is a FairLearner of ``fit``."""
    owner = getattr(predictor, "__self__", predictor)
    return isinstance(owner, FairLearner) and getattr(owner, "scm_fit_", None) is fit


def counterfactual_predictions(
    fit: Fit,
    data: pd.DataFrame,
    do: Mapping[str, DoValue],
    predictor: Predictor,
    *,
    n_samples: int = 100,
    seed: int | None = None,
    frame: pd.DataFrame | None = None,
    response: Response = "prediction",
    coupling: Coupling | None = None,
    unfair_paths: Sequence[Sequence[str]] | None = None,
    abduction: Abduction | None = None,
    **abduct_args: Any,
) -> pd.DataFrame:
    """Predictions of any predictor in the factual world and under ``do``, per row and sample.

    Parameters
    ----------
    fit : Fit
        Fitted SCM taken as the true world.
    data : pandas.DataFrame
        Rows (every observed column known).
    do : mapping
        The intervention, as for :meth:`Fit.counterfactual`.
    predictor : estimator or callable
        Anything with ``predict(DataFrame)``, or a function of a DataFrame. A
        :class:`FairLearner` whose SCM fit is ``fit`` reads its inputs (latents,
        abducted noise) from the shared samples, so its predictions do not move.
    n_samples : int
        Joint samples per row.
    seed : int, optional
        Seed of abduction and of the counterfactual draws.
    frame : pandas.DataFrame, optional
        A counterfactual frame from :meth:`Fit.counterfactual` to reuse; giving
        ``abduct_args`` with it is an error, as they would be ignored.
    response : {"prediction", "probability"}
        What to compare: predictions, or the probability of the positive class
        (see :func:`predict_output`). A :class:`FairLearner` of ``fit`` (or its
        bound ``predict`` / ``predict_proba``) reads its inputs from the shared
        samples in both worlds.
    coupling : {"monotone", "redraw"}, optional
        Coupling of discrete nodes across worlds (:meth:`Fit.counterfactual`;
        default ``"monotone"``). With ``frame=``, the frame's own coupling
        (``frame.attrs["coupling"]``); giving another one is an error.
    unfair_paths : list of tuple, optional
        A path-specific intervention (:mod:`counterfair.paths`): only paths
        beginning with one of these tuples see ``do``'s level. Not with ``frame=``
        (the frame says its own paths).
    abduction : Abduction, optional
        The joint samples of the rows (those the frame was computed from, with
        ``frame=``). A path-specific :class:`FairLearner` of ``fit`` recomputes
        its corrected inputs from them in each world and needs them with
        ``frame=``; without ``frame=`` they are reused instead of abducting.

    Returns
    -------
    pandas.DataFrame
        Columns ``row``, ``sample``, ``factual``, ``counterfactual``, ``change``
        (counterfactual minus factual; for labels of more than two classes,
        which are class indices here, 1 where the label differs and 0 where it
        does not) and the factual protected attributes.
    """
    if coupling is not None:
        check_coupling(coupling)
    if frame is None:
        parts = list(
            iter_counterfactual_predictions(
                fit,
                data,
                do,
                predictor,
                n_samples=n_samples,
                seed=seed,
                response=response,
                coupling=coupling,
                unfair_paths=unfair_paths,
                abduction=abduction,
                **abduct_args,
            )
        )
        return merge_prediction_chunks(parts, do)
    if unfair_paths is not None:
        raise ValueError(
            "unfair_paths= is ignored when frame= is given: the frame holds its own paths "
            "(fit.counterfactual(..., unfair_paths=...))"
        )
    elif abduct_args:
        raise TypeError(
            f"abduction arguments {sorted(abduct_args)} are ignored when frame= is given"
        )
    elif coupling is not None and coupling != frame.attrs.get("coupling", coupling):
        raise ValueError(
            f"coupling={coupling!r} but the frame was computed with "
            f"coupling={frame.attrs['coupling']!r}; drop coupling= or recompute the frame"
        )
    return _frame_predictions(fit, frame, do, predictor, response, abduction)


def _is_path_learner(predictor: Predictor, fit: Fit) -> bool:
    return _shared_learner(predictor, fit) and (
        getattr(getattr(predictor, "__self__", predictor), "features", None) == "path_specific"
    )


def _frame_predictions(
    fit: Fit,
    frame: pd.DataFrame,
    do: Mapping[str, DoValue],
    predictor: Predictor,
    response: Response,
    abduction: Abduction | None,
) -> pd.DataFrame:
    """The predictions frame of :func:`counterfactual_predictions` from a counterfactual frame."""
    path_learner = _is_path_learner(predictor, fit)
    factual = frame[frame["world"] == "factual"].reset_index(drop=True)
    counter = frame[frame["world"] == "counterfactual"].reset_index(drop=True)
    if path_learner:
        before, after = learner_worlds(predictor, fit, frame, abduction, response)
    elif _shared_learner(predictor, fit):
        before = predict_output(predictor, factual, response)
        after = predict_output(predictor, counter, response)
    else:
        drop: Callable[[pd.DataFrame], pd.DataFrame] = lambda f: f.drop(  # noqa: E731
            columns=[c for c in f.columns if c.endswith(":noise") or c in fit.scm.latents]
        )
        before = predict_output(predictor, drop(factual), response)
        after = predict_output(predictor, drop(counter), response)
    out = pd.DataFrame(
        {
            "row": factual["row"].to_numpy(),
            "sample": factual["sample"].to_numpy(),
            "factual": before,
            "counterfactual": after,
            "change": (
                (after != before).astype(float)
                if multiclass_labels(predictor, response)
                else after - before
            ),
        }
    )
    for node in fit.scm.protected:
        out[node] = factual[node].to_numpy()
    out.attrs["do"] = frame.attrs.get("do", dict(do))
    return out


def counterfactual_predictions_chunk(
    fit: Fit,
    rows: Rows | None,
    do: Mapping[str, DoValue],
    predictor: Predictor,
    *,
    n_samples: int = 100,
    seed: int | None = None,
    response: Response = "prediction",
    coupling: Coupling | None = None,
    unfair_paths: Sequence[Sequence[str]] | None = None,
    abduction: Abduction | None = None,
    **abduct_args: Any,
) -> pd.DataFrame:
    """:func:`counterfactual_predictions` of one chunk of rows, with a ``position`` column.

    Parameters
    ----------
    rows : Rows or None
        The chunk's rows and their global positions (:class:`counterfair.rows.Rows`);
        ``None`` with ``abduction`` given (the chunk's joint samples).
    do : mapping
        The intervention for these rows (per-row values already cut to the chunk,
        :func:`counterfair.rows.slice_do`).
    n_samples, seed, response, coupling, unfair_paths, abduct_args
        As in :func:`counterfactual_predictions`.
    abduction : Abduction, optional
        The chunk's joint samples (e.g. cut from an MCMC abduction of all rows).

    Returns
    -------
    pandas.DataFrame
        The columns of :func:`counterfactual_predictions` and ``position``, the
        row's global position. The values do not depend on how rows are chunked:
        every draw is keyed by the seed and the position.
    """
    if abduction is None:
        abduction = fit.abduct(rows, n_samples=n_samples, seed=seed, **abduct_args)
    frame = fit.counterfactual(
        None,
        do,
        n_samples=n_samples,
        seed=seed,
        coupling=coupling if coupling is not None else "monotone",
        abduction=abduction,
        unfair_paths=unfair_paths,
    )
    out = _frame_predictions(fit, frame, do, predictor, response, abduction)
    out["position"] = np.tile(abduction.row_positions, abduction.n_samples)
    return out


def iter_counterfactual_predictions(
    fit: Fit,
    data: pd.DataFrame | Rows | None,
    do: Mapping[str, DoValue],
    predictor: Predictor,
    *,
    n_samples: int = 100,
    seed: int | None = None,
    response: Response = "prediction",
    coupling: Coupling | None = None,
    unfair_paths: Sequence[Sequence[str]] | None = None,
    abduction: Abduction | None = None,
    **abduct_args: Any,
) -> Iterator[pd.DataFrame]:
    """Per-chunk frames of :func:`counterfactual_predictions_chunk`, in row order.

    Rows are cut into chunks of :func:`counterfair.options.chunk_bytes` of working
    memory; exact abduction runs per chunk, MCMC abduction (and a given
    ``abduction``) once for all rows and is then cut (not chunk-invariant for MCMC,
    see :meth:`Fit.abduct`). Each frame is sample-major within its chunk and has a
    ``position`` column.
    """
    if coupling is not None:
        check_coupling(coupling)
    rows = None if data is None else Rows.from_frame(data)
    n_rows = len(fit.data) if rows is None else len(rows)
    if abduction is not None:
        n_rows = len(abduction.data)
    per_row = chunking.bytes_per_row(n_samples, 8 * len(fit.scm.specs))
    for where, chunk in abduct_chunks(
        fit,
        None if abduction is not None else rows,
        bytes_per_row=per_row,
        abduction=abduction,
        n_samples=n_samples,
        seed=seed,
        **abduct_args,
    ):
        yield counterfactual_predictions_chunk(
            fit,
            None,
            slice_do(do, where, n_rows),
            predictor,
            n_samples=n_samples,
            seed=seed,
            response=response,
            coupling=coupling,
            unfair_paths=unfair_paths,
            abduction=chunk,
        )


def merge_prediction_chunks(parts: Sequence[pd.DataFrame], do: Mapping[str, Any]) -> pd.DataFrame:
    """The frame of :func:`counterfactual_predictions` from its per-chunk frames.

    Rows are ordered by sample, then global position (as one call on all rows
    orders them), and the ``position`` column is dropped.
    """
    joined = pd.concat(list(parts), ignore_index=True) if len(parts) > 1 else parts[0]
    order = np.lexsort((joined["position"].to_numpy(), joined["sample"].to_numpy()))
    out = joined.iloc[order].drop(columns="position").reset_index(drop=True)
    out.attrs["do"] = parts[0].attrs.get("do", dict(do))
    if len(parts) > 1:
        out.attrs["do"] = {
            k: (v if isinstance(v, str) or np.ndim(v) == 0 else list(np.asarray(v)))
            for k, v in do.items()
        }
    return out
