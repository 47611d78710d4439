"""The parameter layout of an SCM: which terms each observed node's equation has.

One layout serves both the Stan code generator and the numpy structural
equations, so that the two always agree on parameter names and meaning.

Naming scheme (also the names in ``fit.idata.posterior``):

* ``alpha_<node>``: intercept of ``<node>``;
* ``beta_<node>_<parent>``: weight of an observed or continuous protected parent
  (real), or the vector of level effects of a categorical protected parent (one
  per non-reference level under reference coding, one per level under one-hot
  coding) or of a level-valued observed parent (ordinal: one per level above
  the lowest);
* ``lambda_<node>_<latent>``: loading of a latent parent (positive for the
  latent's first child); ``dlambda_<node>_<latent>``: the extra loading of each
  non-reference level of the node's ``loading_by`` parent;
* ``s_<node>_<parent>`` / ``gp_<node>_<parent>``: weights of the bending columns of
  a smooth term (``..._by_<factor>`` for one curve per level), sampled as
  ``sds_*`` / ``zs_*`` (splines) or ``sdgp_*`` / ``lsgp_*`` / ``zgp_*`` (HSGP);
  ``beta_<node>_<first>_x_<second>``: weights of an interaction
  (:mod:`counterfair.model.terms`);
* ``sigma_<node>``: residual standard deviation of a Normal node (learned as
  ``sigma2_<node>`` with an inverse-gamma prior, or fixed in the spec);
* ``<role>_<node>``: the family's own parameters, one per role in its
  ``extra_parameters`` (``phi_<node>``: dispersion of a negative binomial node;
  ``cutpoints_<node>``: cutpoints of an ordinal node);
* ``n_levels_<node>`` (data): number of levels of a level-valued node.

In the posterior, vectors and matrices are indexed by level (axes ``<parent>_effect``,
``<parent>_level``, ``<node>_level`` for a categorical node's coefficients,
``<node>_cutpoint``; :func:`counterfair.stan.data.coords_and_dims`).

Every name is made by :class:`counterfair.SCM` when it builds the equations;
the families and the code generator read them from the equation.
"""

from __future__ import annotations

from dataclasses import dataclass

from counterfair.model.families import Family, family_of
from counterfair.model.specs import Observed
from counterfair.model.terms import EquationTerm, ParentKind


@dataclass(frozen=True)
class ProtectedTerm:
    """The effect of a protected parent on a child.

    A categorical parent's ``param`` is a vector of level effects; a continuous
    parent's (``continuous=True``) is one real weight on its value.
    """

    parent: str
    param: str
    continuous: bool = False


@dataclass(frozen=True)
class ObservedTerm:
    """The weight of an observed parent on a child.

    ``levels`` is the parent's number of levels when it enters as
    reference-coded indicators (an ordinal parent; ``param`` is then a vector of
    ``levels - 1`` effects), None when it enters as its value.
    """

    parent: str
    param: str
    levels: int | None = None


@dataclass(frozen=True)
class LatentTerm:
    """The loading of a latent parent on a child.

    ``by_param`` names the vector of extra loadings of the non-reference levels of
    the node's ``loading_by`` parent (``dlambda_<node>_<latent>``), None when the
    loading is the same for everybody.
    """

    parent: str
    param: str
    positive: bool
    by_param: str | None = None


@dataclass(frozen=True)
class NodeEquation:
    """The structural equation of one observed node.

    Attributes
    ----------
    node : str
        The node.
    spec : Observed
        Its spec (family, link, priors).
    intercept : str or None
        Name of the intercept parameter, if any.
    protected : tuple of ProtectedTerm
        Categorical parents, in graph order.
    observed : tuple of ObservedTerm
        Observed parents, in graph order.
    latent : tuple of LatentTerm
        Latent parents, in graph order.
    sigma : str or None
        Name of the residual sd (Normal nodes only).
    extra : tuple of (str, str)
        ``(role, name)`` of each of the family's own parameters.
    variance : str or None
        Stan name of the learned residual variance (Normal nodes with a
        learned sigma: ``sigma2_<node>``), sampled in place of the sd.
    levels : str or None
        Stan name of the node's number of levels (level-valued families:
        ``n_levels_<node>``, data).
    bending : tuple of EquationTerm
        The spec's smooth terms and interactions (:mod:`counterfair.model.terms`).
    loading_by : ParentKind or None
        The parent by whose level the latents' loadings differ (``spec.loading_by``).
    """

    node: str
    spec: Observed
    intercept: str | None
    protected: tuple[ProtectedTerm, ...]
    observed: tuple[ObservedTerm, ...]
    latent: tuple[LatentTerm, ...]
    sigma: str | None
    extra: tuple[tuple[str, str], ...] = ()
    variance: str | None = None
    levels: str | None = None
    bending: tuple[EquationTerm, ...] = ()
    loading_by: ParentKind | None = None

    @property
    def family(self) -> Family:
        """The node's distribution family."""
        return family_of(self.spec)

    def param(self, role: str) -> str:
        """Name of the family parameter with ``role`` (e.g. ``"phi"``)."""
        for known, name in self.extra:
            if known == role:
                return name
        raise KeyError(f"node {self.node!r} ({self.spec.family}) has no {role!r} parameter")

    @property
    def sigma_fixed(self) -> float | None:
        """The fixed residual sd, or None when it is learned or not a Normal node."""
        sigma = getattr(self.spec, "sigma", None) if self.sigma else None
        return None if sigma is None else float(sigma)

    def parameter_names(self) -> list[str]:
        """Names of the parameters this equation owns, in declaration order."""
        names = [self.intercept] if self.intercept else []
        names += [t.param for t in self.protected]
        names += [t.param for t in self.observed]
        names += [t.param for t in self.latent]
        names += [t.by_param for t in self.latent if t.by_param]
        names += [t.param for t in self.bending]
        names += [name for t in self.bending for name in t.numpy_names()]
        if self.sigma and self.sigma_fixed is None:
            names.append(self.sigma)
        names += [name for _, name in self.extra]
        return names
