"""Ready-made SCMs of the law school study (Kusner et al. 2017, section 5)."""

from __future__ import annotations

import networkx as nx

from counterfair.model.families import Normal, Poisson
from counterfair.model.scm import SCM, Coding
from counterfair.model.specs import Latent, Prior, Protected

LAW_SCHOOL_PROTECTED = ("race", "sex")


def law_school_level2(coding: Coding = "reference") -> SCM:
    """The paper's level 2 model: knowledge K drives UGPA, LSAT and ZFYA.

    ``K ~ N(0, 1)``; ``UGPA ~ Normal``, ``LSAT ~ Poisson`` (log link) and
    ``ZFYA ~ Normal(sigma = 1)``, each with race, sex and K as parents.
    """
    g = nx.DiGraph()
    g.add_node("race", spec=Protected())
    g.add_node("sex", spec=Protected())
    g.add_node("K", spec=Latent())
    g.add_node("UGPA", spec=Normal())
    g.add_node("LSAT", spec=Poisson())
    g.add_node("ZFYA", spec=Normal(sigma=1.0))
    for parent in ("race", "sex", "K"):
        for child in ("UGPA", "LSAT", "ZFYA"):
            g.add_edge(parent, child)
    return SCM(g, coding=coding)


def raw_lsat() -> Normal:
    """LSAT as a Normal node on its raw scale (mean about 36, sd about 5), priors to match.

    The paper's level 3 model regresses raw LSAT on race and sex (by least
    squares: in effect flat priors). counterfair's default Normal(0, 1) priors
    assume unit-scale data and would pull the intercept (about 36) and the race
    effects (several points) towards 0 (:mod:`counterfair.inference.scales` warns about
    exactly that); Normal(0, 100) on the intercept and Normal(0, 10) on the
    effects are weak on LSAT's scale.
    """
    return Normal(
        prior_intercept=Prior("normal", (0.0, 100.0)),
        prior_weights=Prior("normal", (0.0, 10.0)),
    )


def law_school_level3() -> SCM:
    """The paper's level 3 model: UGPA and LSAT Normal with race and sex as parents.

    Its abducted additive noise (the residuals of UGPA and LSAT) are the inputs
    of the Fair Add predictor. LSAT keeps its raw scale, with priors on that
    scale (:func:`raw_lsat`).
    """
    g = nx.DiGraph()
    g.add_node("race", spec=Protected())
    g.add_node("sex", spec=Protected())
    g.add_node("UGPA", spec=Normal())
    g.add_node("LSAT", spec=raw_lsat())
    for parent in ("race", "sex"):
        for child in ("UGPA", "LSAT"):
            g.add_edge(parent, child)
    return SCM(g)


def shipped_programs() -> dict[str, str]:
    """The Stan programs of this module's models, by name (``counterfair precompile``)."""
    level2, level3 = law_school_level2(), law_school_level3()
    return {
        "law_school_level2": level2.stan_code(),
        "law_school_level2_abduction": level2.abduction_code(),
        "law_school_level3": level3.stan_code(),
    }
