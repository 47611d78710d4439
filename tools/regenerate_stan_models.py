"""Regenerate the golden Stan programs in ``stan_models/`` from the shipped example SCMs.

The golden files record the exact text counterfair generates for the law school
models of Kusner et al. (2017) and for a COMPAS-like model that uses the newer
families (negative binomial, ordinal, a continuous protected attribute);
``tests/test_codegen.py`` regenerates them and fails when the generator's output
changes. After an intended change to the code
generator, run::

    python tools/regenerate_stan_models.py          # rewrite the golden files
    python tools/regenerate_stan_models.py --check  # exit 1 if any is out of date

and review the diff of ``stan_models/`` before committing it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import networkx as nx

import counterfair as cf
from counterfair.datasets.law_school_models import law_school_level2, law_school_level3
from counterfair.model.scm import Coding

STAN_MODELS = Path(__file__).resolve().parents[1] / "stan_models"
"""Folder of the golden programs."""

CHECK_HINT = "run python tools/regenerate_stan_models.py"
"""What to do when a golden file is out of date."""


def law_school_level2_scm(coding: Coding = "reference") -> cf.SCM:
    """The paper's level 2 SCM.

    Shipped as ``counterfair.datasets.law_school_models.law_school_level2``.
    """
    return law_school_level2(coding)


def law_school_level3_scm() -> cf.SCM:
    """The paper's level 3 SCM.

    Shipped as ``counterfair.datasets.law_school_models.law_school_level3``.
    """
    return law_school_level3()


def compas_families_scm() -> cf.SCM:
    """A COMPAS-like SCM with the newer families.

    ``race`` and ``sex`` (categorical) and ``age`` (continuous) are protected; a
    latent ``U`` causes ``priors_count`` (negative binomial, U's first child, so
    its loading is the positive one), ``charge`` (ordinal: misdemeanour < felony
    < violent felony) and ``two_year_recid`` (Bernoulli), which also has
    ``priors_count`` and ``charge`` as parents.
    """
    g = nx.DiGraph()
    g.add_node("race", spec=cf.Protected())
    g.add_node("sex", spec=cf.Protected())
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("U", spec=cf.Latent())
    g.add_node("priors_count", spec=cf.NegativeBinomial())
    g.add_node("charge", spec=cf.Ordinal(levels=("M", "F", "V")))
    g.add_node("two_year_recid", spec=cf.Bernoulli())
    for child in ("priors_count", "charge", "two_year_recid"):
        g.add_edges_from((parent, child) for parent in ("race", "sex", "U"))
    g.add_edges_from([("age", "priors_count"), ("age", "two_year_recid")])
    g.add_edges_from([("priors_count", "two_year_recid"), ("charge", "two_year_recid")])
    return cf.SCM(g)


def bending_terms_scm() -> cf.SCM:
    """An SCM with every kind of bending term (:mod:`counterfair.model.terms`).

    ``sex`` (categorical) and ``age`` (continuous) are protected; a latent ``K`` is
    measured by ``test1`` and ``test2`` (Normal; ``test2``'s loading differs by sex:
    ``loading_by``), and causes ``income`` (Normal, a P-spline in age), ``claims``
    (Poisson, an HSGP in income with a Matern 3/2 kernel, one curve per sex, and an
    exp-quad HSGP surface in income and age),
    ``grade`` (ordinal, an exp-quad HSGP in age) and ``hired`` (Bernoulli, with the
    interaction sex x income, and partially pooled intercepts and income slopes by
    ``office``, a column that is not a node) and ``track`` (categorical: an HSGP in age,
    the interaction sex x income, a P-spline in income by sex, intercepts by ``office``
    and a Matern 3/2 HSGP surface in age and income, one curve, weight or effect per
    non-reference level).
    """
    g = nx.DiGraph()
    g.add_node("sex", spec=cf.Protected())
    g.add_node("age", spec=cf.Protected(kind="continuous"))
    g.add_node("K", spec=cf.Latent())
    g.add_node("test1", spec=cf.Normal())
    g.add_node("test2", spec=cf.Normal(loading_by="sex"))
    g.add_node("income", spec=cf.Normal(terms=[cf.Smooth("age", k=8)]))
    g.add_node(
        "claims",
        spec=cf.Poisson(
            terms=[
                cf.Smooth("income", k=6, basis="hsgp", kernel="matern32", by="sex"),
                cf.Smooth(("income", "age"), k=5, basis="hsgp"),
            ]
        ),
    )
    g.add_node("grade", spec=cf.Ordinal(levels=("C", "B", "A"),
                                         terms=[cf.Smooth("age", k=6, basis="hsgp")]))
    g.add_node(
        "hired",
        spec=cf.Bernoulli(
            terms=[cf.Interaction("sex", "income"), cf.GroupEffect("office", slopes=["income"])]
        ),
    )
    g.add_node(
        "track",
        spec=cf.Categorical(
            levels=("desk", "field", "lead"),
            terms=[
                cf.Smooth("age", k=6, basis="hsgp"),
                cf.Interaction("sex", "income"),
                cf.Smooth("income", k=5, by="sex"),
                cf.GroupEffect("office"),
                cf.Smooth(("age", "income"), k=5, basis="hsgp", kernel="matern32"),
            ],
        ),
    )
    g.add_edges_from([("K", "test1"), ("K", "test2"), ("sex", "test2")])
    g.add_edges_from((p, "track") for p in ("sex", "age", "income"))
    g.add_edges_from((p, "income") for p in ("age", "sex", "K"))
    g.add_edges_from((p, "claims") for p in ("income", "sex", "K", "age"))
    g.add_edges_from((p, "grade") for p in ("age", "K"))
    g.add_edges_from((p, "hired") for p in ("sex", "income", "grade", "K"))
    return cf.SCM(g)


def golden_programs() -> dict[str, str]:
    """Text of every golden program, by file name in ``stan_models/``."""
    level2 = law_school_level2_scm()
    compas = compas_families_scm()
    bending = bending_terms_scm()
    return {
        "compas_families.stan": compas.stan_code(),
        "compas_families_abduction.stan": compas.abduction_code(),
        "law_school_level2.stan": level2.stan_code(),
        "law_school_level2_abduction.stan": level2.abduction_code(),
        "law_school_level2_onehot.stan": law_school_level2_scm("onehot").stan_code(),
        "law_school_level3.stan": law_school_level3_scm().stan_code(),
        "bending_terms.stan": bending.stan_code(),
        "bending_terms_abduction.stan": bending.abduction_code(),
    }


def stale_files(folder: Path = STAN_MODELS) -> list[str]:
    """Names of golden files that are missing or differ from the generated text."""
    stale = []
    for name, text in golden_programs().items():
        path = folder / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check`` compare) the golden programs; return an exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a golden file is missing or out of date",
    )
    args = parser.parse_args(argv)
    if args.check:
        stale = stale_files()
        for name in stale:
            print(f"stan_models/{name} is out of date: {CHECK_HINT}", file=sys.stderr)
        return 1 if stale else 0
    STAN_MODELS.mkdir(exist_ok=True)
    for name, text in golden_programs().items():
        path = STAN_MODELS / name
        old = path.read_text(encoding="utf-8") if path.is_file() else None
        if old != text:
            # newline="\n": the same bytes on every platform
            with path.open("w", encoding="utf-8", newline="\n") as handle:
                handle.write(text)
            print(f"wrote stan_models/{name}")
        else:
            print(f"stan_models/{name} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
