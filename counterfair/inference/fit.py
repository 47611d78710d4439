"""A fitted SCM: posterior draws of parameters and latents, and abduction for new rows."""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import arviz as az
import numpy as np
import pandas as pd

from counterfair.inference import abduct
from counterfair.inference.abduction_result import Abduction as Abduction
from counterfair.inference.abduction_result import AbductionEngineUsed as AbductionEngineUsed
from counterfair.inference.diagnostics import Diagnostics
from counterfair.inference.ppc import posterior_predictive_check
from counterfair.inference.ppc_result import PosteriorPredictiveCheck
from counterfair.inference.quadrature_nodes import QuadratureRule
from counterfair.model.encoding import Encoding
from counterfair.model.params import ParamDraws
from counterfair.rows import dispatch
from counterfair.rows.validated import Rows
from counterfair.stan.laplace_start import LaplaceStart
from counterfair.stan.warm_start import WarmStart

logger = logging.getLogger(__name__)

if TYPE_CHECKING:  # types only: SCM.fit delegates down to this module's importers
    from counterfair.counterfactual.frames import Coupling, DoValue
    from counterfair.inference.loo_pit import LooPit
    from counterfair.model.scm import SCM

AbductionMethod = Literal["mean", "draws"]
AbductionEngine = abduct.AbductionEngine




@dataclass
class Fit:
    """An SCM fitted by NUTS (or, with ``method="pathfinder"``, by Pathfinder).

    Attributes
    ----------
    scm : SCM
        The model.
    idata : arviz.InferenceData
        Posterior of the structural parameters and of every training row's
        latents (dims ``row``), and the sampler statistics.
    encoding : Encoding
        Levels of the protected attributes, fixed at fit time.
    data : pandas.DataFrame
        The training rows.
    seconds : float
        Wall time of compilation and sampling.
    backend : str
        The Stan interface used.
    seed : int or None
        The seed of the fit.
    diagnostics : Diagnostics
        R-hat, ESS and divergences.
    method : {"nuts", "pathfinder"}
        How the posterior was obtained: NUTS, or Pathfinder's approximate draws
        kept as one chain (:mod:`counterfair.inference.pathfinder`).
    subsample : dict or None
        When NUTS ran on a stratified subsample (``SCM.fit(subsample=...)`` or
        more rows than ``max_rows``): ``size``, ``total``, ``strata`` (the
        columns), ``n_strata`` and ``reason``; ``data`` then holds the subsample
        only, and the other rows are abducted as new rows with :meth:`abduct`.
    integrated : tuple of str
        Latents integrated out of the fit program (``SCM.fit(latents=...)``): NUTS
        sampled the parameters only, and each training row's latents were drawn
        exactly per posterior draw (:mod:`counterfair.stan.integrated`).
    quadrature : QuadratureRule or None
        The Gauss-Hermite rule of an integrated fit and how it was chosen
        (:mod:`counterfair.inference.quadrature_nodes`).
    missing : dict or None
        With ``SCM.fit(missing="drop")``, what was dropped: ``policy``, ``rows`` (given),
        ``dropped`` (incomplete rows left out) and ``columns`` (missing values per
        column). With ``missing="model"``: ``policy``, ``rows``, ``incomplete`` (rows
        with a missing value), ``columns`` and ``plan`` (node -> ``"omit"`` or
        ``"sample"``, :attr:`holes`). ``None`` when every row given was fitted complete
        (:mod:`counterfair.rows.missing`).
    """

    scm: SCM
    idata: az.InferenceData
    encoding: Encoding
    data: pd.DataFrame
    seconds: float
    backend: str
    seed: int | None
    diagnostics: Diagnostics
    _backend_name: str = field(default="auto", repr=False)
    warm_start: WarmStart | LaplaceStart | None = None
    subsample: dict[str, Any] | None = None
    method: str = "nuts"
    integrated: tuple[str, ...] = ()
    quadrature: QuadratureRule | None = None
    missing: dict[str, Any] | None = None
    _rows: Rows | None = field(default=None, repr=False, compare=False)

    @property
    def rows(self) -> Rows:
        """The training rows as checked at their door (:meth:`Rows.check`), once."""
        if self._rows is None:  # a fit read back from a folder: its rows are checked here
            missing = "model" if self.holes else "error"
            rows = Rows.check(self.data, self.scm, self.encoding, missing=missing)
            object.__setattr__(self, "_rows", rows)
        assert self._rows is not None
        return self._rows

    # ------------------------------------------------------------------ saving
    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Save the fit to a folder, without pickle; read it back with :func:`counterfair.load`.

        The folder holds the SCM as JSON, the posterior as netCDF, the training
        rows, the Stan program and a manifest with the sha256 of every file
        (:mod:`counterfair.io.fit_folder`). A loaded fit abducts new rows, builds
        counterfactuals and audits without Stan wherever exact abduction applies.

        Parameters
        ----------
        path : str or path-like
            The folder to write; it is written to a temporary sibling and renamed.
        overwrite : bool
            Replace ``path`` if it exists and is not empty (refused otherwise).

        Returns
        -------
        pathlib.Path
            The folder written.
        """

        from counterfair.io.fit_folder import save_fit  # the io stage: a delegate

        return save_fit(self, path, overwrite=overwrite)

    # ------------------------------------------------------------------ posterior
    def summary(self, **kwargs: Any) -> pd.DataFrame:
        """``arviz.summary`` of the structural parameters (R-hat, ESS, intervals).

        The number of divergent transitions is in ``fit.diagnostics.divergences``
        and is attached to the returned frame as ``attrs["divergences"]``.
        """
        table = az.summary(self.idata, var_names=self.scm.parameter_names(), **kwargs)
        table.attrs["divergences"] = self.diagnostics.divergences
        return table

    def rows_of(self, data: pd.DataFrame | Rows, *, positions: np.ndarray | None = None) -> Rows:
        """``data`` through the rows' door under this fit's encoding.

        The fit's own training rows (:attr:`data` or :attr:`rows`) come as they were
        checked. For a fit of ``missing="model"`` rows may hold missing values of observed
        nodes (:attr:`Rows.holes`): the training rows' are drawn from the fit's posterior,
        other rows' from the posterior given what each row holds
        (:mod:`counterfair.inference.missing_rows`); other fits refuse them, naming the
        columns. ``positions``: the rows' global positions (default ``0..N-1``).
        """
        if self.holes and positions is None and (data is self.data or data is self._rows):
            return self.rows
        return Rows.check(
            data, self.scm, self.encoding, positions=positions, missing=abduct.rows_policy(self)
        )

    @property
    def holes(self) -> dict[str, str]:
        """``missing="model"``'s plan: node -> ``"omit"`` (left out of its likelihood where
        missing) or ``"sample"`` (missing values sampled, ``<node>_mis`` in the posterior);
        empty for a fit of complete rows."""
        record = self.missing or {}
        return dict(record.get("plan", {})) if record.get("policy") == "model" else {}

    def loo(self, **options: Any) -> pd.DataFrame:
        """PSIS-LOO with each row's latents integrated out (:func:`counterfair.inference.loo.loo`).

        ``options``: ``method`` (``"quadrature"`` or ``"importance"``), ``nodes``,
        ``n_draws``, ``seed``. Returns a one-row frame with ``elpd_loo``, ``se``,
        ``p_loo``, ``n_bad_k`` and ``integration``.
        """
        from counterfair.inference.loo import loo

        return loo(self, **options)

    def loo_pit(
        self,
        *,
        nodes: Sequence[str] | str | None = None,
        seed: int | None = None,
        n_bins: int = 5,
    ) -> LooPit:
        """LOO-PIT of every observed node (:func:`counterfair.inference.loo_pit.loo_pit`).

        Each value's probability integral transform under its leave-one-out predictive:
        uniform when the model predicts held-out values well; ``.table`` has the
        Kolmogorov-Smirnov distance per node, ``.groups`` per protected group and bin
        of a continuous parent (``n_bins``), ``.plot()`` the ECDF against the uniform.
        """
        from counterfair.inference.loo_pit import loo_pit

        return loo_pit(self, nodes=nodes, seed=seed, n_bins=n_bins)

    def params(self) -> ParamDraws:
        """Every posterior draw of the structural parameters (chains stacked)."""
        return ParamDraws.from_posterior(self.idata.posterior, self.scm.parameter_names())


    # ------------------------------------------------------------------ model checking
    def ppc(
        self,
        n_draws: int | Literal["all"] | None = None,
        *,
        seed: int | None = None,
        nodes: Sequence[str] | str | None = None,
        replication: Literal["conditional", "marginal"] = "conditional",
        groups: bool = True,
        n_bins: int = 5,
    ) -> PosteriorPredictiveCheck:
        """Posterior predictive check of every observed node on the training rows.

        For ``n_draws`` joint posterior draws of the parameters and of the
        training rows' latents, each node is redrawn from its family given the
        rows' protected attributes, the latent draws and the **observed** values
        of its observed parents (conditional, one-step replication: a misfit
        shows at the node whose family is wrong). Its statistics (mean and
        variance; share of zeros for counts and 0/1 nodes; share of each level
        for ordinal and categorical nodes) on the data are compared with their
        replicated distribution. See :mod:`counterfair.inference.ppc`.

        Parameters
        ----------
        n_draws : int, "all" or None
            Replications: a number (at most the fit's number of draws),
            ``"all"`` (one per posterior draw), or None (default: 200, or every
            draw when the fit has fewer).
        seed : int, optional
            Seed of the choice of draws and of the replications (default: the
            fit's seed).
        nodes : str or sequence of str, optional
            Observed nodes to check (default: all of them).
        replication : {"conditional", "marginal"}
            ``"conditional"`` (default) as above. ``"marginal"``: latents drawn
            afresh from their priors and every node replicated from its
            replicated parents (the model as a generator of new individuals with
            these protected attributes). Each row's latent absorbs part of a
            child's misfit in the conditional check (a Poisson child of a
            latent is overdispersed); the marginal check does not let it.
        groups : bool
            Also compute each node's statistics per level of every protected
            attribute, per quantile bin of a continuous protected attribute and
            of each continuous observed parent (conditional replication), and
            the covariance of each pair of a latent's Normal indicators overall
            and per protected group: a straight line where the truth bends, or
            a loading that differs by group, shows there even when the overall
            mean and variance fit. Rows ``by``/``group`` of the table.
        n_bins : int
            Quantile bins of a continuous parent or protected attribute.

        Returns
        -------
        PosteriorPredictiveCheck
            ``.table`` (tidy, one row per node and statistic, with the
            replicated 90 % interval, a posterior predictive p-value and an
            ``outside_90`` flag), ``.plot()`` (one ``az.plot_ppc`` panel per
            node), ``.to_csv(path)``; ``print(check)`` shows the table.

        Raises
        ------
        SCMError
            If ``nodes`` names something other than an observed node.
        ValueError
            If ``n_draws`` is not a positive integer or exceeds the fit's draws,
            or ``replication`` is unknown.

        Examples
        --------
        >>> check = fit.ppc(nodes=["LSAT"])  # doctest: +SKIP
        >>> check.statistic("LSAT", "variance")["outside_90"]  # doctest: +SKIP
        """

        return posterior_predictive_check(
            self,
            n_draws=n_draws,
            seed=seed,
            nodes=nodes,
            replication=replication,
            groups=groups,
            n_bins=n_bins,
        )

    # ------------------------------------------------------------------ abduction
    def abduct(
        self,
        data: pd.DataFrame | Rows | None = None,
        *,
        condition_on: Collection[str] | None = None,
        method: AbductionMethod = "mean",
        n_samples: int | None = None,
        n_param_draws: int = 20,
        engine: AbductionEngine = "auto",
        seed: int | None = None,
        positions: np.ndarray | None = None,
    ) -> Abduction:
        """Sample latents (and pair them with parameters) for rows.

        New rows abducted exactly (``engine`` ``"exact"``, the default where it
        applies) are processed in chunks of :func:`counterfair.options.chunk_bytes`
        of working memory, with random draws keyed by the seed and each row's
        global position: the result is the same for any chunk size
        (``cf.set_options(chunk_bytes=...)``). MCMC abduction of new rows runs
        one Stan program on all the rows at once and is not chunk-invariant:
        a row's draws depend on the other rows given with it.

        Parameters
        ----------
        data : pandas.DataFrame or Rows, optional
            Rows to abduct (a :class:`~counterfair.rows.validated.Rows` carries its global
            positions and is not validated again). ``None`` means the training rows: with
            ``condition_on=None`` and ``engine="auto"`` their latents come from
            the joint posterior of the fit itself (``engine`` ``"fit"`` on the
            result); otherwise they are abducted like new rows.
        condition_on : collection of str, optional
            Observed nodes that condition the latents. Default: the latents'
            children present in ``data`` (:func:`default_conditioning`), so rows
            without the outcome are abducted from the columns they have. Leave
            the outcome out to follow Kusner et al.'s Algorithm 1,
            ``U ~ P(U | x, a)``; naming a node that is not in ``data`` raises
            :class:`~counterfair.errors.DataError`.
        method : {"mean", "draws"}
            ``"mean"``: parameters fixed at their posterior means, as the paper
            does; ``"draws"``: integrate over ``n_param_draws`` posterior draws.
        n_samples : int, optional
            Number of joint samples to return (default: all that were drawn;
            exact abduction draws 200 per parameter set).
        n_param_draws : int
            Parameter draws to integrate over with ``method="draws"``.
        engine : {"auto", "exact", "mcmc"} or MCMCAbduction
            ``"exact"``: the latents' posterior given each parameter set on a
            grid per row (:mod:`counterfair.inference.exact_abduction`), for one-dimensional
            latents independent given the data; ``"mcmc"``: the Stan abduction
            program with its default settings; an
            :class:`~counterfair.inference.abduct.MCMCAbduction` (``chains``,
            ``warmup``, ``draws``, ``progress``): the program with these settings;
            ``"auto"``: exact when it applies, else the program with its defaults.
        seed : int, optional
            Random seed (defaults to the fit's seed).
        positions : numpy.ndarray, optional
            Global 0-based positions of the rows in the whole data set (default
            ``0..N-1``): give them when abducting one chunk or partition of a
            larger data set, so its draws are those of the rows in the whole.

        Returns
        -------
        Abduction
            Its ``engine`` attribute says which engine produced the latents.

        Raises
        ------
        ValueError
            If ``engine="exact"`` is asked for an SCM it does not apply to (the
            message names the node that prevents it); or if ``method`` or ``engine``
            is unknown.
        """
        return abduct.abduct(
            self, data, condition_on=condition_on, method=method, n_samples=n_samples,
            n_param_draws=n_param_draws, engine=engine, seed=seed, positions=positions,
        )

    def abduction_is_exact(
        self,
        data: pd.DataFrame | Rows,
        *,
        condition_on: Collection[str] | None = None,
        engine: AbductionEngine = "auto",
        **_: Any,
    ) -> bool:
        """Whether :meth:`abduct` of these new rows with these options runs chunk by chunk.

        True for exact abduction and for an SCM without latents (the result does not
        depend on the chunking); False when it would run the MCMC abduction program.
        Other options of :meth:`abduct` are accepted and ignored.
        """
        return abduct.abduction_is_exact(self, data, condition_on=condition_on, engine=engine)

    def latents(self, data: pd.DataFrame | None = None, **kwargs: Any) -> dict[str, np.ndarray]:
        """Posterior draws of every latent for rows, shape ``(S, N)`` per latent.

        With ``data=None`` the draws of the training rows from the fit; otherwise
        abduction for new rows (see :meth:`abduct` for the options). A Dask
        DataFrame is abducted partition by partition (:mod:`counterfair.dask.row_calls`).
        """
        if (handler := dispatch.handler_for("Fit.latents", data)) is not None:
            return handler(self, data, **kwargs)
        return self.abduct(data, **kwargs).latents

    # ------------------------------------------------------------------ counterfactuals
    def counterfactual(
        self,
        data: pd.DataFrame | None,
        do: Mapping[str, DoValue],
        *,
        n_samples: int | None = 100,
        seed: int | None = None,
        abduction: Abduction | None = None,
        coupling: Coupling = "monotone",
        unfair_paths: Sequence[Sequence[str]] | None = None,
        **abduct_args: Any,
    ) -> pd.DataFrame:
        """Counterfactual values of every node under ``do(...)``, per row and sample.

        ``do`` sets protected attributes and/or observed nodes (one value for
        every row, or one per row). ``coupling`` says how a discrete node whose
        parents changed shares its noise with the factual world: ``"monotone"``
        (default; inverse-CDF coupling, Gumbel-max for a categorical node) or
        ``"redraw"`` (a fresh draw); an unknown name raises ValueError.

        See :func:`counterfair.counterfactual.frames.counterfactual_frame` for the
        semantics and the layout of the returned long DataFrame.

        ``unfair_paths`` (node tuples starting at the one protected attribute of
        ``do``) makes it a path-specific counterfactual: only paths beginning
        with one of the tuples see the new level, see
        :mod:`counterfair.counterfactual.paths`; ``[]`` gives the factual world.

        Without ``abduction=``, rows are processed in chunks of
        :func:`counterfair.options.chunk_bytes` (abduction, then the worlds), and
        every draw is keyed by the seed and the row's position: the frame is the
        same for any chunk size, except with MCMC abduction of new rows, which is
        run once on all the rows (see :meth:`abduct`).
        """

        from counterfair.counterfactual.frames import counterfactual  # a delegate

        return counterfactual(
            self, data, do, n_samples=n_samples, seed=seed, abduction=abduction,
            coupling=coupling, unfair_paths=unfair_paths, **abduct_args,
        )

    def interventional(
        self,
        n: int,
        do: Mapping[str, str | float],
        *,
        n_samples: int = 100,
        seed: int | None = None,
    ) -> pd.DataFrame:
        """Population-level samples under ``do(...)`` (protected or observed nodes).

        See :func:`counterfair.counterfactual.frames.interventional_frame`.
        """

        from counterfair.counterfactual.frames import interventional_frame  # a delegate

        return interventional_frame(self, n, do, n_samples=n_samples, seed=seed)
