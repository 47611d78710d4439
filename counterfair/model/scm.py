"""The structural causal model: a validated networkx DAG whose nodes carry specs."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import networkx as nx
import pandas as pd

from counterfair import errors
from counterfair.model import checks as validation
from counterfair.model import identification
from counterfair.model.discrete import Deterministic, DiscreteNoise
from counterfair.model.enumeration import DiscreteSCM
from counterfair.model.equation import LatentTerm, NodeEquation, ObservedTerm, ProtectedTerm
from counterfair.model.families import family_of
from counterfair.model.simulate import simulate
from counterfair.model.specs import SPEC_KEY, Latent, NodeSpec, Observed, Protected
from counterfair.model.terms import equation_terms, learn_terms
from counterfair.options import DEFAULT_MAX_ROWS

if TYPE_CHECKING:  # the return type of the fit delegate below
    from counterfair.inference.sampling import Fit

Coding = Literal["reference", "onehot"]


def _all_finite(graph: object) -> bool:
    """Whether ``graph`` is a non-empty DiGraph whose every node has a finite discrete spec."""
    if not isinstance(graph, nx.DiGraph) or graph.number_of_nodes() == 0:
        return False
    return all(
        isinstance(attrs.get(SPEC_KEY), DiscreteNoise | Deterministic)
        for _, attrs in graph.nodes(data=True)
    )


class SCM:
    """A structural causal model for counterfactual fairness.

    A graph whose nodes are all :class:`~counterfair.DiscreteNoise` and
    :class:`~counterfair.Deterministic` gives a :class:`~counterfair.DiscreteSCM`,
    whose ``query`` is exact (enumeration of the noise).

    Parameters
    ----------
    graph : networkx.DiGraph
        The causal DAG. Every node carries a spec under the attribute ``"spec"``:
        :class:`~counterfair.Protected`, :class:`~counterfair.Latent`,
        or an observed family (:class:`~counterfair.Normal`,
        :class:`~counterfair.Poisson`, :class:`~counterfair.Bernoulli`,
        :class:`~counterfair.NegativeBinomial`, :class:`~counterfair.Ordinal`).
    coding : {"reference", "onehot"}
        How protected parents enter a linear predictor: ``"reference"`` (default)
        gives every non-reference level an effect relative to the reference level;
        ``"onehot"`` gives every level an effect, as in Kusner et al. (2017), which
        is not identified beside an intercept.

    Raises
    ------
    SCMError
        If the graph has a cycle, a node has no spec or an unknown one, a protected
        or latent node has a parent, a latent has no child, a node name cannot be
        used in Stan, or there is no protected node.

    Examples
    --------
    >>> import networkx as nx, counterfair as cf
    >>> g = nx.DiGraph()
    >>> g.add_node("A", spec=cf.Protected())
    >>> g.add_node("U", spec=cf.Latent())
    >>> g.add_node("X", spec=cf.Normal())
    >>> g.add_edges_from([("A", "X"), ("U", "X")])
    >>> cf.SCM(g).observed
    ('X',)
    """

    def __new__(cls, graph: nx.DiGraph | None = None, *args: Any, **kwargs: Any) -> Any:
        """A graph whose nodes are all finite (DiscreteNoise / Deterministic) is a DiscreteSCM.

        ``cf.SCM(g).query(...)`` then answers exactly by enumeration
        (:class:`~counterfair.DiscreteSCM`); ``coding`` does not apply to it and is
        refused. Any other graph builds the Stan pipeline's ``SCM``.
        """
        if _all_finite(graph):
            if args or kwargs:
                raise errors.SCMError(
                    "coding applies to SCMs with Protected parents of linear predictors; "
                    "a finite discrete SCM (every node DiscreteNoise or Deterministic) "
                    f"takes no option, got {sorted(kwargs) or list(args)}"
                )
            return DiscreteSCM(graph)
        return super().__new__(cls)

    def __init__(self, graph: nx.DiGraph, *, coding: Coding = "reference") -> None:
        if coding not in ("reference", "onehot"):
            raise errors.SCMError(errors.BAD_CODING.format(coding=coding))
        validation.validate_graph_type(graph)
        validation.validate_acyclic(graph)
        specs = validation.validate_specs(graph)
        validation.validate_node_names(graph.nodes)
        validation.validate_roots(graph, specs)
        self._graph: nx.DiGraph = graph.copy()
        self._specs: dict[str, NodeSpec] = specs
        self.coding: Coding = coding
        position = {node: i for i, node in enumerate(graph.nodes)}
        self._order: tuple[str, ...] = tuple(
            nx.lexicographical_topological_sort(graph, key=lambda n: position[n])
        )
        self._position = position
        self.equations: dict[str, NodeEquation] = self._build_equations()
        identification.warn(self)

    # ------------------------------------------------------------------ structure
    @property
    def graph(self) -> nx.DiGraph:
        """A copy of the causal graph."""
        return self._graph.copy()

    @property
    def specs(self) -> dict[str, NodeSpec]:
        """The spec of every node."""
        return dict(self._specs)

    @property
    def nodes(self) -> tuple[str, ...]:
        """All nodes in a topological order (graph order among ties)."""
        return self._order

    @property
    def protected(self) -> tuple[str, ...]:
        """Protected attributes, in graph order."""
        return tuple(n for n in self._order if isinstance(self._specs[n], Protected))

    @property
    def latents(self) -> tuple[str, ...]:
        """Latent exogenous nodes, in graph order."""
        return tuple(n for n in self._order if isinstance(self._specs[n], Latent))

    @property
    def observed(self) -> tuple[str, ...]:
        """Observed nodes, in topological order."""
        return tuple(n for n in self._order if isinstance(self._specs[n], Observed))

    def parents(self, node: str) -> tuple[str, ...]:
        """Parents of ``node`` in graph order."""
        self._check_node(node)
        return tuple(sorted(self._graph.predecessors(node), key=self._position.__getitem__))

    def children(self, node: str) -> tuple[str, ...]:
        """Children of ``node`` in graph order."""
        self._check_node(node)
        return tuple(sorted(self._graph.successors(node), key=self._position.__getitem__))

    def descendants(self, nodes: str | Iterable[str] | None = None) -> frozenset[str]:
        """Strict descendants of ``nodes`` (default: of every protected attribute)."""
        sources = self._sources(nodes)
        found: set[str] = set()
        for source in sources:
            found |= nx.descendants(self._graph, source)
        return frozenset(found)

    def non_descendants(self, nodes: str | Iterable[str] | None = None) -> tuple[str, ...]:
        """Observed nodes that are not descendants of ``nodes`` (default: protected ones).

        These are the observed inputs a counterfactually fair predictor may use.
        """
        desc = self.descendants(nodes)
        return tuple(n for n in self.observed if n not in desc)

    def path_from_protected(self, node: str) -> list[str] | None:
        """A directed path from some protected attribute to ``node``, or None."""
        self._check_node(node)
        for source in self.protected:
            if source != node and nx.has_path(self._graph, source, node):
                return [str(n) for n in nx.shortest_path(self._graph, source, node)]
        return None

    def identification(self) -> pd.DataFrame:
        """Latents that are not identified or only weakly, with the reason and a remedy.

        The rules (children's moments against loadings, a single child, two latents
        with the same children, the sign convention) are in
        :mod:`counterfair.model.identification`; building the SCM warns
        (:class:`~counterfair.errors.IdentificationWarning`) for each row.

        Returns
        -------
        pandas.DataFrame
            Columns ``latent``, ``problem``, ``reason``, ``remedy``; empty when none.
        """
        return identification.findings(self)

    def learned(self, values: Mapping[str, Any]) -> SCM:
        """This SCM with what its terms learn from training rows filled in.

        Each smooth term without a given range takes its parent's minimum and
        maximum in ``values`` (training values of the parents by node: observed
        values, and a continuous protected attribute's values), so that its knots
        apply unchanged to new and counterfactual rows (:mod:`counterfair.model.terms`).
        Returns ``self`` when nothing is left to learn.
        """
        updates: dict[str, NodeSpec] = {}
        for node in self.observed:
            spec = self._specs[node]
            new = learn_terms(spec, node, values)
            if new is not spec:
                updates[node] = new
        if not updates:
            return self
        with warnings.catch_warnings():  # said once, when the user built the SCM
            warnings.simplefilter("ignore", errors.IdentificationWarning)
            return self.with_specs(updates)

    def with_specs(self, specs: Mapping[str, NodeSpec]) -> SCM:
        """A new SCM with the same graph and coding, and these nodes' specs replaced.

        Raises
        ------
        SCMError
            If a node is unknown, or the new SCM is invalid (naming the node).
        """
        graph = self._graph.copy()
        for node, spec in specs.items():
            self._check_node(node)
            graph.nodes[node][SPEC_KEY] = spec
        return SCM(graph, coding=self.coding)

    # ------------------------------------------------------------------ the SCM document
    @classmethod
    def from_dict(cls, document: Mapping[str, Any]) -> SCM:
        """Build an SCM from a document written by :meth:`to_dict` or by hand.

        The document is the parsed SCM file (``docs/scm-file.md``; to read a file, use
        :func:`counterfair.read_scm`), validated against its JSON Schema
        (:mod:`counterfair.model.scm_document`).

        Raises
        ------
        SCMError
            Naming the node and key at fault: an unknown family or field, a parent
            that is not a node, a newer format version, or anything the SCM itself
            refuses (a cycle, a latent without child, ...).
        """
        from counterfair.model.scm_document import from_dict

        return from_dict(document, cls)

    def to_dict(self) -> dict[str, Any]:
        """The SCM as a JSON-ready document: what the SCM file holds and
        :meth:`from_dict` reads back (:mod:`counterfair.model.scm_document`)."""
        from counterfair.model.scm_document import to_dict

        return to_dict(self)

    def parameter_names(self) -> list[str]:
        """Names of all structural parameters (as in the Stan program and the posterior)."""
        return [name for eq in self.equations.values() for name in eq.parameter_names()]

    def _sources(self, nodes: str | Iterable[str] | None) -> tuple[str, ...]:
        if nodes is None:
            return self.protected
        sources = (nodes,) if isinstance(nodes, str) else tuple(nodes)
        for node in sources:
            self._check_node(node)
        return sources

    def _check_node(self, node: str) -> None:
        if node not in self._specs:
            raise errors.SCMError(errors.UNKNOWN_NODE.format(node=node, nodes=list(self._order)))

    def _build_equations(self) -> dict[str, NodeEquation]:
        first_child = {latent: self._sign_child(latent) for latent in self.latents}
        owners: dict[str, str] = {}
        for node in self._order:
            validation.validate_unique_identifiers(owners, node, node)
            owners[node] = node
        generated = [f"n_levels_{p}" for p in self.protected if not self._continuous(p)]
        generated += [
            f"n_levels_{n}"
            for n in self.observed
            if family_of(self._observed_spec(n)).n_levels(self._observed_spec(n)) is not None
        ]
        generated += [f"z_{latent}" for latent in self.latents]
        generated += [f"scale_{node}" for node in self.observed]
        generated += [  # locals of the fit program for latents anchored by Normal children
            f"{prefix}_{latent}_{child}"
            for latent in self.latents
            for child in self.children(latent)
            for prefix in ("g", "prec")
        ]
        generated += [f"observe_{c}" for latent in self.latents for c in self.children(latent)]
        for name in generated:
            owner = (
                name.split("_", 2)[-1] if name.startswith("n_levels_") else name.split("_", 1)[1]
            )
            validation.validate_unique_identifiers(owners, name, owner)
            owners[name] = owner
        equations: dict[str, NodeEquation] = {}
        for node in self.observed:
            spec = self._specs[node]
            assert isinstance(spec, Observed)
            protected, observed, latent = [], [], []
            for parent in self.parents(node):
                parent_spec = self._specs[parent]
                if isinstance(parent_spec, Protected):
                    protected.append(
                        ProtectedTerm(parent, f"beta_{node}_{parent}", parent_spec.continuous)
                    )
                elif isinstance(parent_spec, Latent):
                    positive = first_child[parent] == node
                    latent.append(LatentTerm(parent, f"lambda_{node}_{parent}", positive))
                else:
                    assert isinstance(parent_spec, Observed)
                    levels = family_of(parent_spec).parent_levels(parent_spec)
                    observed.append(ObservedTerm(parent, f"beta_{node}_{parent}", levels))
            own = family_of(spec).declares_coefficients  # one predictor per level
            bending, loading_by = equation_terms(
                node, spec, self.parents(node), self._specs,
                f"n_levels_{node} - 1" if own else None,
            )
            if loading_by is not None:
                latent = [
                    dataclasses.replace(t, by_param=f"dlambda_{node}_{t.parent}") for t in latent
                ]
            family = family_of(spec)
            equation = NodeEquation(
                node=node,
                spec=spec,
                intercept=f"alpha_{node}" if spec.intercept else None,
                protected=tuple(protected),
                observed=tuple(observed),
                latent=tuple(latent),
                sigma=f"sigma_{node}" if family.additive_noise else None,
                extra=tuple((role, f"{role}_{node}") for role in family.extra_parameters),
                variance=f"sigma2_{node}" if family.additive_noise else None,
                levels=f"n_levels_{node}" if family.n_levels(spec) is not None else None,
                bending=bending,
                loading_by=loading_by,
            )
            extra_names = [f"sigma2_{node}", f"X_{node}"]
            if bending:
                extra_names += [f"F_{node}", f"P_{node}"]
                extra_names += [name for t in bending for name in t.sampled_names()]
                extra_names += [f"omega_{t.stem}" for t in bending if t.param.startswith("gp_")]
                extra_names += [
                    f"n_groups_{t.term.column}"  # type: ignore[union-attr]
                    for t in bending
                    if t.param.startswith("u_") and f"n_groups_{t.term.column}" not in owners  # type: ignore[union-attr]
                ]
            for name in [*equation.parameter_names(), *extra_names]:
                validation.validate_unique_identifiers(owners, name, node)
                owners[name] = node
            equations[node] = equation
        return equations

    def _sign_child(self, latent: str) -> str:
        """The child whose loading on ``latent`` is constrained positive.

        The first observed child in graph order whose family has one real
        loading (not a categorical child, whose loadings are vectors).
        """
        for child in self.children(latent):
            spec = self._specs[child]
            if isinstance(spec, Observed) and not family_of(spec).declares_coefficients:
                return child
        raise errors.SCMError(errors.NO_SIGN_CHILD.format(latent=latent))

    def _continuous(self, node: str) -> bool:
        spec = self._specs[node]
        return isinstance(spec, Protected) and spec.continuous

    def _observed_spec(self, node: str) -> Observed:
        spec = self._specs[node]
        assert isinstance(spec, Observed)
        return spec

    # ------------------------------------------------------------------ Stan
    def stan_code(
        self, *, integrate: Collection[str] = (), holes: Mapping[str, str] | None = None
    ) -> str:
        """The Stan program that fits this SCM (parameters and per-row latents).

        ``integrate``: latents integrated out of the likelihood (what
        ``fit(latents="integrated")`` compiles; see :mod:`counterfair.stan.integrated`).
        ``holes``: ``fit(missing="model")``'s plan, node -> ``"omit"`` or ``"sample"``
        (``fit.missing["plan"]``; :mod:`counterfair.stan.holes`).
        A delegate to :func:`counterfair.stan.codegen.fit_program`, the stage above.
        """
        from counterfair.stan.codegen import fit_program

        return fit_program(self, integrate=integrate, holes=holes)

    def abduction_code(self) -> str:
        """The Stan program that samples latents of new rows given parameter values.

        A delegate to :func:`counterfair.stan.codegen.abduction_program`.
        """
        from counterfair.stan.codegen import abduction_program

        return abduction_program(self)

    # ------------------------------------------------------------------ fitting
    def fit(
        self,
        data: pd.DataFrame,
        *,
        chains: int | None = None,
        warmup: int | None = None,
        draws: int | None = None,
        seed: int | None = None,
        backend: str = "auto",
        progress: bool | None = None,
        warm_start: bool | Literal["auto", "pilot", "laplace"] = "auto",
        subsample: int | None = None,
        max_rows: int | None = DEFAULT_MAX_ROWS,
        method: Literal["nuts", "pathfinder"] = "nuts",
        latents: Literal["joint", "integrated", "auto"] = "auto",
        missing: Literal["error", "drop", "model"] = "error",
        **sampler_args: Any,
    ) -> Fit:
        """Fit the SCM by NUTS: posterior of parameters and of every row's latents.

        By default each row's latents are integrated out of the likelihood where that
        applies (``latents="auto"``), NUTS samples the structural parameters from a
        Laplace start (5,000 rows or more) or after a pilot fit, and the rows' latents
        are drawn exactly afterwards: ``fit.idata.posterior`` holds them either way.

        Parameters
        ----------
        data : pandas.DataFrame
            One row per individual, one column per protected and observed node.
        chains, warmup, draws : int, optional
            Number of chains (run in parallel) and iterations per chain; NUTS
            defaults 4, 500 and 500 (``warmup`` 50 after a Laplace start, see
            ``warm_start``). With ``method="pathfinder"``, ``draws`` is
            the number of approximate draws (default 1,000) and ``chains`` /
            ``warmup`` must not be given.
        seed : int, optional
            Random seed; the same seed gives the same draws.
        backend : {"auto", "pystan", "cmdstanpy"}
            Stan interface; "auto" uses CmdStan when an installation is found.
        progress : bool, optional
            Show the sampler's progress bars. Default: where a person watches (a
            terminal or a notebook; never in a log file, a pipe or CI, see
            :mod:`counterfair.logs`).
        warm_start : bool, "auto", "pilot" or "laplace"
            Where NUTS starts (CmdStan only; the posterior does not change).
            ``"laplace"``: from the posterior mode, with the inverse Hessian there as a
            dense metric; warm-up adapts the step size in 19 iterations and the rest
            is burn-in (:mod:`counterfair.stan.laplace_start`); for programs with no
            per-row parameter (every latent integrated out, or none).
            ``"pilot"`` (or ``True``): the metric learned on a 2,000-row pilot fit
            first (:mod:`counterfair.stan.warm_start`). ``"auto"`` takes the Laplace
            start where it applies on at least 5,000 rows (the pilot if its checks
            fail, with a log line), else the pilot for fits of at least 5,000 rows
            with ``warmup >= 175`` (of any size with integrated latents).
            ``fit.warm_start.kind`` says which ran.
        method : {"nuts", "pathfinder"}
            ``"pathfinder"``: CmdStan's multi-path Pathfinder, a fast variational
            approximation (:mod:`counterfair.inference.pathfinder`); its draws are kept as
            one chain, ``fit.method`` records it, and no convergence warnings are
            raised for them. CmdStan only.
        latents : {"auto", "integrated", "joint"}
            ``"auto"`` (the default) integrates the latents that can be and samples the
            others jointly, with one INFO line for each latent kept joint and why (a
            loading by group, a child the quadrature does not cover, a child shared with
            another latent, the PyStan back end, Pathfinder).
            ``"joint"`` samples every row's latents beside the parameters (the
            default before issue 49: slower where a latent has thousands of rows,
            ``benchmarks/own_data.py``).
            ``"integrated"`` integrates each row's latent out of the likelihood
            (exactly for Normal children, by adaptive Gauss-Hermite quadrature for
            Poisson, negative binomial, Bernoulli and ordinal ones), so NUTS samples
            the parameters only; the training rows' latents are then drawn exactly
            per posterior draw, and ``fit.integrated`` names the latents
            (:mod:`counterfair.stan.integrated`). Two latents that share a child
            are integrated out together (a 2-D quadrature); more per row are
            refused. CmdStan only. The Gauss-Hermite nodes are checked on the
            training rows at the warm start's draws: the fewest whose log density is
            within 0.01 of a 40-node reference (``fit.quadrature``,
            :mod:`counterfair.inference.quadrature_nodes`).
        missing : {"error", "drop", "model"}
            What to do with rows that have missing (NaN) values in a column the SCM
            reads. ``"error"`` (default) refuses them, naming every such column with
            its count and the number of complete rows. ``"drop"`` fits on the complete
            rows, with a log line per column, and records what was dropped in
            ``fit.missing``; it assumes the values are missing completely at random
            (:mod:`counterfair.rows.missing`). ``"model"`` keeps every row and treats
            a missing value of an observed node as unknown, assuming it is missing at
            random given the rest of the row: a node without children leaves the
            likelihood of the rows that miss it, a Normal node with children has its
            missing values sampled (``fit.idata.posterior["<node>_mis"]``), a Bernoulli,
            categorical, ordinal or count node with children is summed over its levels,
            a count's over ``0..K`` (``"<node>_draw"`` holds posterior draws of its
            missing values); protected attributes and grouping columns must be complete
            (:func:`counterfair.rows.missing.hole_plan`). The latents those nodes touch
            are sampled jointly, without the Laplace start or the pilot. ``fit.missing``
            records the plan. Later stages take the fit's own rows with their draws of
            the missing values, and other rows with holes abducted one pattern of
            missing columns at a time (:mod:`counterfair.inference.missing_rows`).
        **sampler_args
            Passed to the sampler (e.g. ``max_depth``, ``delta``; on CmdStan also
            ``metric``, ``"diag_e"`` or ``"dense_e"``: a fit with integrated latents
            adapts a dense metric unless told otherwise).

        Returns
        -------
        Fit
            The fitted model; ``fit.idata`` is an ``arviz.InferenceData``;
            ``fit.ppc()`` checks it against the data (posterior predictive check).

        Warns
        -----
        ScaleWarning
            Once per Normal node (or continuous protected attribute) whose scale
            makes the priors on its spec informative: the default priors assume
            unit-scale data, and counterfair does not rescale columns. The message
            names the node, its mean and sd, the prior and the fix (standardise
            the column or give the spec explicit priors); see
            :mod:`counterfair.inference.scales`.
        ConvergenceWarning
            When R-hat, ESS or divergences cross their thresholds.

        Raises
        ------
        ValueError
            If ``subsample`` is not an integer from 1 to ``len(data)``, or
            ``max_rows`` is not ``None`` nor a positive integer; if ``method``
            is unknown, is ``"pathfinder"`` with the PyStan back end, or is
            ``"pathfinder"`` with a NUTS-only option (``chains``, ``warmup``,
            ``warm_start=True``, ``progress=True``, sampler arguments); if
            ``latents="integrated"`` cannot apply (a latent with a loading by group,
            two latents in one child; the PyStan back end) or
            is combined with ``method="pathfinder"``.
        """

        from counterfair.inference.sampling import fit  # the stage above: a delegate

        return fit(
            self, data, chains=chains, warmup=warmup, draws=draws, seed=seed, backend=backend,
            progress=progress, warm_start=warm_start, subsample=subsample, max_rows=max_rows,
            method=method, latents=latents, missing=missing, **sampler_args,
        )

    # ------------------------------------------------------------------ simulation
    def sample(
        self,
        n: int,
        *,
        params: Mapping[str, Any],
        seed: int | None = None,
        levels: Mapping[str, Iterable[str]] | None = None,
        protected_probs: Mapping[str, Mapping[str, float]] | None = None,
        return_latents: bool = True,
    ) -> pd.DataFrame:
        """Simulate ``n`` individuals forward from the SCM with given parameter values.

        Parameters
        ----------
        n : int
            Number of rows.
        params : mapping
            Parameter values by name (see :meth:`parameter_names`); a protected
            parent's effect is a sequence over the non-reference levels (or over
            all levels under one-hot coding).
        seed : int, optional
            Random seed.
        levels : mapping, optional
            Levels of each protected node, reference first; defaults to the spec's
            levels.
        protected_probs : mapping, optional
            Probability of each level of each protected node (default uniform).
            Continuous protected nodes are drawn from a standard normal.
        return_latents : bool
            Include latent columns in the result.

        Returns
        -------
        pandas.DataFrame
            One column per node (latents included when asked).
        """

        return simulate(
            self,
            n,
            params=params,
            seed=seed,
            levels=levels,
            protected_probs=protected_probs,
            return_latents=return_latents,
        )

    # ------------------------------------------------------------------ exact queries
    def query(self, target: str, **options: Any) -> pd.Series:
        """Exact queries are for finite discrete SCMs: always raises here.

        An ``SCM`` holds Protected, Latent and Stan-family nodes, whose distributions
        have parameters to fit, so it cannot be enumerated. Declare
        :class:`~counterfair.DiscreteNoise` and :class:`~counterfair.Deterministic`
        nodes in a :class:`~counterfair.DiscreteSCM` and call its ``query``.

        Raises
        ------
        SCMError
            Naming the first node (in topological order) that is not finite with
            given probabilities.
        """
        node = next(
            (n for n in self._order if not isinstance(self._specs[n], Protected)),
            self._order[0],
        )
        raise errors.SCMError(
            errors.NOT_FINITE_FOR_QUERY.format(node=node, kind=type(self._specs[node]).__name__)
        )

    def __repr__(self) -> str:
        parts = [f"{n}: {type(self._specs[n]).__name__}" for n in self._order]
        return f"SCM({', '.join(parts)}; {self._graph.number_of_edges()} edges)"
