"""Stan code generation: fragments of the generated programs, golden files, stanc check.

No test here compiles C++ or samples. The one test marked ``stan`` runs the
``stanc`` compiler bundled with httpstan (a fraction of a second per program).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from types import ModuleType

import networkx as nx
import pandas as pd
import pytest
from _models import dag

import counterfair as cf
from counterfair.model.encoding import Encoding
from counterfair.model.params import ParamDraws
from counterfair.model.scm import SCM
from counterfair.model.specs import Protected
from counterfair.stan.codegen import abduction_equations
from counterfair.stan.data import abduction_data, fit_data

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "stan_models"


def _families_scm(coding: str = "reference") -> SCM:
    """Protected A and latent U cause a Normal, a Poisson and a Bernoulli node."""
    nodes = {
        "A": cf.Protected(),
        "U": cf.Latent(),
        "Xn": cf.Normal(),
        "Xp": cf.Poisson(),
        "Xb": cf.Bernoulli(),
    }
    edges = [(p, c) for p in ("A", "U") for c in ("Xn", "Xp", "Xb")]
    return cf.SCM(dag(nodes, edges), coding=coding)  # type: ignore[arg-type]


def _mixed_scm() -> SCM:
    """Every kind of equation: roots, latent-only parents, observed parents, no intercept.

    Graph order puts Z and Z0 (roots) before the latents' children.
    """
    nodes = {
        "A": cf.Protected(),
        "U": cf.Latent(loc=1, scale=2),
        "V": cf.Latent(),
        "Z": cf.Normal(),
        "Z0": cf.Normal(intercept=False, sigma=2),
        "Zp": cf.Poisson(),
        "Zb": cf.Bernoulli(),
        "P": cf.Poisson(),
        "W": cf.Normal(),
        "B": cf.Bernoulli(prior_weights=cf.Prior("student_t", (3, 0, 2.5))),
        "Y": cf.Normal(prior_intercept=cf.Prior("normal", (0, 5))),
        "Q": cf.Poisson(intercept=False),
    }
    edges = [
        ("U", "W"),
        ("A", "P"),
        ("U", "P"),
        ("P", "B"),
        ("W", "B"),
        ("V", "B"),
        ("V", "Y"),
        ("Z", "Y"),
        ("B", "Y"),
        ("A", "Q"),
    ]
    return cf.SCM(dag(nodes, edges))


def _two_latents_scm() -> SCM:
    """K1 -> Y1, Y2 and K2 -> Y2, Y3, with Y2 inserted before Y1 (graph order)."""
    nodes = {
        "A": cf.Protected(),
        "K1": cf.Latent(),
        "K2": cf.Latent(),
        "Y2": cf.Normal(),
        "Y1": cf.Normal(),
        "Y3": cf.Bernoulli(),
    }
    edges = [("K1", "Y1"), ("K1", "Y2"), ("K2", "Y3"), ("K2", "Y2"), ("A", "Y1")]
    return cf.SCM(dag(nodes, edges))


def _new_families_scm() -> SCM:
    """The newer families: NB first child of U, ordinal with and without a latent, an
    ordinal parent, a continuous protected parent, a root of each new family."""
    nodes = {
        "A": cf.Protected(),
        "age": cf.Protected(kind="continuous"),
        "U": cf.Latent(),
        "C": cf.NegativeBinomial(),
        "O": cf.Ordinal(levels=("lo", "mid", "hi")),
        "Q": cf.Ordinal(levels=4),
        "Y": cf.Bernoulli(),
        "C0": cf.NegativeBinomial(),
        "O0": cf.Ordinal(levels=2),
        "X": cf.Normal(),
    }
    edges = [
        ("U", "C"),
        ("A", "C"),
        ("age", "C"),
        ("U", "O"),
        ("A", "O"),
        ("A", "Q"),
        ("age", "Q"),
        ("O", "Y"),
        ("C", "Y"),
        ("U", "Y"),
        ("O", "X"),
    ]
    return cf.SCM(dag(nodes, edges))


def _anchored_ordinal_scm() -> SCM:
    """U anchored by a Normal child X; an ordinal child O gets U's conditional mean."""
    nodes = {"A": cf.Protected(), "U": cf.Latent(), "X": cf.Normal(), "O": cf.Ordinal(levels=3)}
    edges = [("U", "X"), ("A", "X"), ("U", "O"), ("A", "O")]
    return cf.SCM(dag(nodes, edges))


def _categorical_scm(coding: str = "reference") -> SCM:
    """A categorical child of A, age, X and U; a categorical root; a categorical parent."""
    nodes = {
        "A": cf.Protected(),
        "age": cf.Protected(kind="continuous"),
        "U": cf.Latent(),
        "X": cf.Normal(),
        "K": cf.Categorical(levels=("theft", "drug", "violent")),
        "K0": cf.Categorical(levels=3, intercept=False),
        "R": cf.Categorical(levels=4),
        "Y": cf.Bernoulli(),
    }
    edges = [
        ("U", "X"),
        ("A", "K"),
        ("age", "K"),
        ("X", "K"),
        ("U", "K"),
        ("K", "Y"),
        ("U", "Y"),
    ]
    return cf.SCM(dag(nodes, edges), coding=coding)  # type: ignore[arg-type]


def _all_programs(regen_tool: ModuleType) -> dict[str, str]:
    """Fit and abduction programs of every SCM used here (golden ones included)."""
    programs = dict(regen_tool.golden_programs())
    for name, scm in {
        "families": _families_scm(),
        "families_onehot": _families_scm("onehot"),
        "mixed": _mixed_scm(),
        "two_latents": _two_latents_scm(),
        "new_families": _new_families_scm(),
        "anchored_ordinal": _anchored_ordinal_scm(),
        "categorical": _categorical_scm(),
        "categorical_onehot": _categorical_scm("onehot"),
    }.items():
        programs[f"{name}.stan"] = scm.stan_code()
        programs[f"{name}_abduction.stan"] = scm.abduction_code()
    return programs


def _block(code: str, name: str) -> list[str]:
    """Lines inside the top-level block ``name { ... }`` (empty if absent)."""
    lines = code.splitlines()
    if f"{name} {{" not in lines:
        return []
    start = lines.index(f"{name} {{")
    end = lines.index("}", start)
    return lines[start + 1 : end]


def _statement(code: str, node: str) -> str:
    """The sampling statement of an observed node, stripped."""
    found = [
        line.strip() for line in _block(code, "model") if line.strip().startswith(f"{node} ~ ")
    ]
    assert len(found) == 1, (node, found)
    return found[0]


def _strip_comments(code: str) -> str:
    return "\n".join(line.split("//")[0] for line in code.splitlines())


def _integer_literals(text: str) -> list[str]:
    return re.findall(r"(?<![\w.])\d+(?![\w.])", text)


# --------------------------------------------------------------------------- header, comments


def test_header_names_version_purpose_and_nodes(regen_tool: ModuleType) -> None:
    scm = regen_tool.law_school_level2_scm()
    for code in (scm.stan_code(), scm.abduction_code()):
        first = code.splitlines()[0]
        assert first.startswith(f"// Generated by counterfair {cf.__version__}: ")
        header = code.split("functions {")[0]
        for line in header.splitlines():
            assert line.startswith("//"), line
        for node in scm.nodes:
            assert re.search(rf"^//   {node}\b", header, flags=re.MULTILINE), node
    assert "UGPA ~ normal, identity link | race, sex, K" in scm.stan_code()
    assert "LSAT ~ poisson, log link | race, sex, K" in scm.stan_code()


def test_every_declaration_has_a_comment(regen_tool: ModuleType) -> None:
    for name, code in _all_programs(regen_tool).items():
        assert _block(code, "data") and _block(code, "parameters"), name
        for block in ("data", "parameters", "transformed parameters"):
            lines = _block(code, block)
            for line in lines:
                assert line.startswith("  ") and not line.startswith("   "), (name, line)
                declaration, sep, comment = line.partition(";  // ")
                assert sep and comment.strip(), f"{name}, block {block}: no comment on {line!r}"
                assert declaration.strip() and "//" not in declaration, (name, line)


# --------------------------------------------------------------------------- coding


def test_reference_coding(regen_tool: ModuleType) -> None:
    code = regen_tool.law_school_level2_scm().stan_code()
    assert "// Protected parents use reference coding" in code
    assert "indicators(race, n_levels_race, 1)" in code
    assert "indicators(sex, n_levels_sex, 1)" in code
    for child in ("UGPA", "LSAT", "ZFYA"):
        for parent in ("race", "sex"):
            assert (
                f"  vector<multiplier=scale_{child}>[n_levels_{parent} - 1] "
                f"beta_{child}_{parent};  //" in code
            )
    assert "matrix[N, (n_levels_race - 1) + (n_levels_sex - 1)] X_UGPA" in code


def test_onehot_coding(regen_tool: ModuleType) -> None:
    scm = regen_tool.law_school_level2_scm("onehot")
    code, abduction = scm.stan_code(), scm.abduction_code()
    assert "// Protected parents use one-hot coding" in code
    assert "indicators(race, n_levels_race, 0)" in code
    assert "indicators(sex, n_levels_sex, 0)" in code
    for child in ("UGPA", "LSAT", "ZFYA"):
        for parent in ("race", "sex"):
            assert (
                f"  vector<multiplier=scale_{child}>[n_levels_{parent}] "
                f"beta_{child}_{parent};  //" in code
            )
            assert f"  array[S] vector[n_levels_{parent}] beta_{child}_{parent};  //" in abduction
    assert "- 1]" not in _strip_comments(code)
    assert "- 1]" not in _strip_comments(abduction)
    assert "matrix[N, (n_levels_race) + (n_levels_sex)] X_UGPA" in code


def test_codings_differ_only_in_protected_effects(regen_tool: ModuleType) -> None:
    reference = regen_tool.law_school_level2_scm().stan_code().splitlines()
    onehot = regen_tool.law_school_level2_scm("onehot").stan_code().splitlines()
    assert len(reference) == len(onehot)
    changed = [(a, b) for a, b in zip(reference, onehot, strict=True) if a != b]
    assert changed
    for a, b in changed:
        assert "n_levels_" in a or "coding" in a, (a, b)


# --------------------------------------------------------------------------- latents


def test_positive_loading_on_exactly_the_first_child_of_each_latent() -> None:
    scm = _two_latents_scm()
    code = scm.stan_code()
    params = _block(code, "parameters")
    positive = {m for line in params for m in re.findall(r"real<lower=0> (lambda_\w+);", line)}
    # Y2 was added to the graph before Y1: it is K1's first child; K2's first is Y2 too
    assert positive == {"lambda_Y2_K1", "lambda_Y2_K2"}
    declared = {m for line in params for m in re.findall(r"real(?:<[^>]*>)? (lambda_\w+);", line)}
    assert declared == {"lambda_Y1_K1", "lambda_Y2_K1", "lambda_Y2_K2", "lambda_Y3_K2"}
    assert "// The first child of each latent has a positive loading" in code


def test_positive_loading_in_the_law_school_model(regen_tool: ModuleType) -> None:
    code = regen_tool.law_school_level2_scm().stan_code()
    constrained = [line for line in _block(code, "parameters") if "lambda_" in line]
    assert [line.split(";")[0].strip() for line in constrained] == [
        "real<lower=0> lambda_UGPA_K",
        "real<multiplier=scale_LSAT> lambda_LSAT_K",
        "real<multiplier=scale_ZFYA> lambda_ZFYA_K",
    ]


def test_abduction_program_takes_loadings_as_data() -> None:
    code = _two_latents_scm().abduction_code()
    assert "<lower=0> lambda" not in code
    assert "array[S] real lambda_Y2_K1;" in code
    assert _block(code, "parameters") == [
        "  array[S] vector[N] K1;  // latent K1 of every row, per parameter set",
        "  array[S] vector[N] K2;  // latent K2 of every row, per parameter set",
    ]


def test_latent_priors() -> None:
    # U (loc 1, scale 2) is anchored by W: its prior enters W's marginal and P's mean
    code = _mixed_scm().stan_code()
    assert _statement(code, "W") == (
        "W ~ normal(alpha_W + lambda_W_U * 1.0, sqrt(square(lambda_W_U * 2.0) + square(sigma_W)));"
    )
    model = _block(code, "model")
    assert "  real prec_U_W = 0.25 + lambda_W_U * g_U_W;  // precision of U given W" in model
    assert "alpha_P + lambda_P_U * 0.25 / prec_U_W - " in _statement(code, "P")
    # a latent without Normal children is sampled with its prior as written
    assert "  K2 ~ std_normal();" in _block(_two_latents_scm().stan_code(), "model")
    abduction = _mixed_scm().abduction_code()
    assert "    U[s] ~ normal(1.0, 2.0);" in abduction.splitlines()


# --------------------------------------------------------------------------- statements


def test_glm_functions_are_used() -> None:
    for scm in (_families_scm(), _families_scm("onehot")):
        for code, design in ((scm.stan_code(), "X_Xp"), (scm.abduction_code(), "X_Xn")):
            assert _statement(code, "Xn").startswith("Xn ~ normal_id_glm(X_Xn, ")
            assert _statement(code, "Xp").startswith(f"Xp ~ poisson_log_glm({design}, ")
            assert _statement(code, "Xb").startswith(f"Xb ~ bernoulli_logit_glm({design}, ")
    code = _families_scm().stan_code()
    # Xn anchors U (its only Normal child): it enters with U integrated out ...
    assert _statement(code, "Xn") == (
        "Xn ~ normal_id_glm(X_Xn, alpha_Xn, beta_Xn_A, "
        "sqrt(square(lambda_Xn_U) + square(sigma_Xn)));"
    )
    # ... and the other children see U = m(Xn) + z_U / sqrt(P): m is written as an extra
    # column (Xn) and corrections of the intercept and the effects of A
    assert "matrix[N, (n_levels_A - 1) + 1] X_Xp = append_col(" in code
    assert _statement(code, "Xp") == (
        "Xp ~ poisson_log_glm(X_Xp, alpha_Xp - lambda_Xp_U * g_U_Xn / prec_U_Xn * alpha_Xn"
        " + (lambda_Xp_U / sqrt(prec_U_Xn)) * z_U,"
        " append_row(beta_Xp_A - (lambda_Xp_U * g_U_Xn / prec_U_Xn) * beta_Xn_A,"
        " [lambda_Xp_U * g_U_Xn / prec_U_Xn]'));"
    )
    # the abduction program samples U itself: plain latent terms
    assert _statement(scm.abduction_code(), "Xp") == (
        "Xp ~ poisson_log_glm(X_Xn, alpha_Xp[s] + lambda_Xp_U[s] * U[s], beta_Xp_A[s]);"
    )


def test_sequential_anchors_condition_on_the_anchors_before_them(regen_tool: ModuleType) -> None:
    code = regen_tool.law_school_level2_scm().stan_code()
    model = [line.split("  //")[0] for line in _block(code, "model")]
    assert "  real prec_K_UGPA = 1.0 + lambda_UGPA_K * g_K_UGPA;" in model
    assert "  real prec_K_ZFYA = prec_K_UGPA + lambda_ZFYA_K * g_K_ZFYA;" in model
    assert "  real g_K_ZFYA = lambda_ZFYA_K;" in model  # sigma of ZFYA fixed at 1
    # ZFYA (second anchor) given UGPA: its sd adds lambda^2 / P_1 to sigma^2 = 1
    assert _statement(code, "ZFYA").endswith("sqrt(square(lambda_ZFYA_K) / prec_K_UGPA + 1.0));")
    # LSAT sees K given both anchors
    assert "[lambda_LSAT_K * g_K_ZFYA / prec_K_ZFYA]'" in _statement(code, "LSAT")
    assert "columns for race, sex, UGPA, ZFYA" in code
    # K itself is no parameter of the fit program
    assert "vector[N] K;" not in code and "vector[N] z_K;" in code


def test_observed_parents_enter_the_design_matrix() -> None:
    code = _mixed_scm().stan_code()
    assert "matrix[N, 1 + 1] X_Y = append_col(to_matrix(Z), to_matrix(to_vector(B)));" in code
    assert _statement(code, "Y") == (
        "Y ~ normal_id_glm(X_Y, alpha_Y, append_row([beta_Y_Z]', [beta_Y_B]'), "
        "sqrt(square(lambda_Y_V) + square(sigma_Y)));"
    )
    # B's latent V is anchored by Y, whose parents (Z, B) join B's columns with Y itself
    assert "X_B = append_col(to_matrix(to_vector(P)), append_col(to_matrix(W), " in code
    assert "[-lambda_B_V * g_V_Y / prec_V_Y * beta_Y_B]'" in _statement(code, "B")
    # no intercept, no latent: the GLM intercept is the literal 0.0
    assert _statement(code, "Q") == "Q ~ poisson_log_glm(X_Q, 0.0, beta_Q_A);"
    abduction = _mixed_scm().abduction_code()
    assert "matrix[N, 1 + 1] X_B = append_col(to_matrix(to_vector(P)), to_matrix(W));" in abduction
    assert _statement(abduction, "B") == (
        "B ~ bernoulli_logit_glm(X_B, alpha_B[s] + lambda_B_V[s] * V[s], "
        "append_row([beta_B_P[s]]', [beta_B_W[s]]'));"
    )


def test_node_without_parents_uses_a_plain_statement() -> None:
    code = _mixed_scm().stan_code()
    assert _statement(code, "Z") == "Z ~ normal(alpha_Z, sigma_Z);"
    assert _statement(code, "Z0") == "Z0 ~ normal(0.0, 2.0);"
    assert _statement(code, "Zp") == "Zp ~ poisson_log(alpha_Zp);"
    assert _statement(code, "Zb") == "Zb ~ bernoulli_logit(alpha_Zb);"
    # latent parents only: no design matrix either (U integrated out of W)
    assert _statement(code, "W").startswith("W ~ normal(alpha_W + lambda_W_U * 1.0, ")
    assert _statement(_mixed_scm().abduction_code(), "W") == (
        "W ~ normal(alpha_W[s] + lambda_W_U[s] * U[s], sigma_W[s]);"
    )
    for node in ("Z", "Z0", "Zp", "Zb", "W"):
        assert f"X_{node}" not in code


def test_fixed_sigma_is_a_real_literal(regen_tool: ModuleType) -> None:
    code = regen_tool.law_school_level2_scm().stan_code()
    assert _statement(code, "ZFYA").endswith(" + 1.0));")  # sigma^2 = 1.0, K integrated out
    assert "sigma_ZFYA" not in code and "sigma2_ZFYA" not in code
    abduction = regen_tool.law_school_level2_scm().abduction_code()
    assert _statement(abduction, "ZFYA").endswith(", 1.0);")
    # an int given as sigma is written as a real too
    assert _statement(_mixed_scm().stan_code(), "Z0") == "Z0 ~ normal(0.0, 2.0);"


def test_no_integer_literal_in_any_sampling_statement(regen_tool: ModuleType) -> None:
    """The GLMs of the Stan in httpstan 4.13 fail at run time on an integer scale."""
    for name, code in _all_programs(regen_tool).items():
        for line in _block(code, "model"):
            if "~" in line:
                # e.g. "sigma, 1)" would pass an int where the GLM needs a real
                assert not re.search(r"(?<![\w.])\d+\)", line), (name, line)
                assert not _integer_literals(line), (name, line)


def test_priors_are_written_from_the_specs() -> None:
    code = _mixed_scm().stan_code()
    model = [line.strip() for line in _block(code, "model")]
    assert "beta_B_P ~ student_t(3.0, 0.0, 2.5);" in model
    assert "lambda_B_V ~ student_t(3.0, 0.0, 2.5);" in model
    assert "alpha_Y ~ normal(0.0, 5.0);" in model
    assert "sigma2_Y ~ inv_gamma(1.0, 1.0);" in model
    assert "real<lower=0> sigma_Y = sqrt(sigma2_Y);  // residual sd of Y" in code


# --------------------------------------------------------------------------- newer families


def test_negative_binomial_statements_and_dispersion() -> None:
    scm = _new_families_scm()
    code, abduction = scm.stan_code(), scm.abduction_code()
    assert _statement(code, "C") == (
        "C ~ neg_binomial_2_log_glm(X_C, alpha_C + lambda_C_U * U, "
        "append_row(beta_C_A, [beta_C_age]'), phi_C);"
    )
    assert _statement(code, "C0") == "C0 ~ neg_binomial_2_log(alpha_C0, phi_C0);"
    assert "  real<lower=0> phi_C;  // dispersion of C (variance mu + mu^2 / phi)" in code
    assert "  phi_C ~ gamma(2.0, 0.1);" in _block(code, "model")
    assert "  array[N] int<lower=0> C;  // observed C (counts)" in code
    assert _statement(abduction, "C") == (
        "C ~ neg_binomial_2_log_glm(X_C, alpha_C[s] + lambda_C_U[s] * U[s], "
        "append_row(beta_C_A[s], [beta_C_age[s]]'), phi_C[s]);"
    )
    assert "  array[S] real<lower=0> phi_C;" in abduction
    prior = cf.NegativeBinomial(prior_dispersion=cf.Prior("exponential", (0.5,)))
    g = dag({"A": cf.Protected(), "C": prior}, [("A", "C")])
    assert "  phi_C ~ exponential(0.5);" in _block(cf.SCM(g).stan_code(), "model")


def test_ordinal_statements_and_cutpoints() -> None:
    scm = _new_families_scm()
    code, abduction = scm.stan_code(), scm.abduction_code()
    # a latent term per row: ordered_logistic on the full linear predictor
    assert _statement(code, "O") == (
        "O ~ ordered_logistic(lambda_O_U * U + X_O * beta_O_A, cutpoints_O);"
    )
    # design columns and no latent: the GLM (Q has the columns of C, so C's design matrix)
    assert _statement(code, "Q") == (
        "Q ~ ordered_logistic_glm(X_C, append_row(beta_Q_A, [beta_Q_age]'), cutpoints_Q);"
    )
    assert _statement(code, "O0") == "O0 ~ ordered_logistic(rep_vector(0.0, N), cutpoints_O0);"
    assert "  ordered[n_levels_O - 1] cutpoints_O;  // cutpoints of O" in code
    assert "  cutpoints_O ~ normal(0.0, 5.0);" in _block(code, "model")
    assert "  int<lower=2> n_levels_O;  // number of levels of ordinal O" in code
    assert "  array[N] int<lower=1, upper=n_levels_O> O;  //" in code
    assert "alpha_O" not in code and "alpha_Q" not in code  # the cutpoints absorb it
    assert _statement(abduction, "O") == (
        "O ~ ordered_logistic(lambda_O_U[s] * U[s] + X_O * beta_O_A[s], cutpoints_O[s]);"
    )
    assert "  array[S] vector[n_levels_O - 1] cutpoints_O;" in abduction


def test_ordinal_parent_enters_as_indicators_above_the_lowest_level() -> None:
    code = _new_families_scm().stan_code()
    assert "indicators(O, n_levels_O, 1)" in code
    assert (
        "  vector<multiplier=scale_Y>[n_levels_O - 1] beta_Y_O;  "
        "// effect of O on Y, per level above the lowest" in code
    )
    assert _statement(code, "Y") == (
        "Y ~ bernoulli_logit_glm(X_Y, alpha_Y + lambda_Y_U * U, append_row([beta_Y_C]', beta_Y_O));"
    )
    assert _statement(code, "X") == "X ~ normal_id_glm(X_X, alpha_X, beta_X_O, sigma_X);"
    assert "// Level-valued observed parents (ordinal, categorical) enter as indicators" in code


def test_continuous_protected_parent_is_one_column_with_one_weight() -> None:
    code = _new_families_scm().stan_code()
    assert "  vector[N] age;  // value of continuous protected age" in code
    assert "n_levels_age" not in code
    assert "  real<multiplier=scale_C> beta_C_age;  // weight of age on C" in code
    assert "append_col(indicators(A, n_levels_A, 1), to_matrix(age))" in code
    assert "//   age (protected, continuous)" in code


def test_first_child_of_a_new_family_gets_the_positive_loading() -> None:
    code = _new_families_scm().stan_code()
    assert "  real<lower=0> lambda_C_U;  // loading of U on C (positive" in code
    positive = re.findall(r"real<lower=0> (lambda_\w+);", code)
    assert positive == ["lambda_C_U"]
    g = dag(
        {"A": cf.Protected(), "U": cf.Latent(), "O": cf.Ordinal(levels=3), "C": cf.Poisson()},
        [("U", "O"), ("U", "C"), ("A", "O")],
    )
    assert re.findall(r"real<lower=0> (lambda_\w+);", cf.SCM(g).stan_code()) == ["lambda_O_U"]


def test_ordinal_child_of_an_anchored_latent_moves_the_scalar_into_the_cutpoints() -> None:
    code = _anchored_ordinal_scm().stan_code()
    # U given X has a per-row part (z_U), so the plain function with the full predictor
    statement = _statement(code, "O")
    assert statement.startswith("O ~ ordered_logistic(-lambda_O_U * g_U_X / prec_U_X * alpha_X")
    assert "(lambda_O_U / sqrt(prec_U_X)) * z_U + X_O * append_row(" in statement
    g = dag(
        {"A": cf.Protected(), "X": cf.Normal(), "Q": cf.Ordinal(levels=3)},
        [("A", "X"), ("A", "Q"), ("X", "Q")],
    )
    assert _statement(cf.SCM(g).stan_code(), "Q") == (
        "Q ~ ordered_logistic_glm(X_Q, append_row(beta_Q_A, [beta_Q_X]'), cutpoints_Q);"
    )


def test_categorical_statements_and_coefficients() -> None:
    scm = _categorical_scm()
    code, abduction = scm.stan_code(), scm.abduction_code()
    assert _statement(code, "K") == (
        "K ~ categorical_logit_glm(append_col(X_K, U), append_row(0.0, alpha_K), "
        "with_reference(append_row(beta_K_A, append_row(beta_K_age, "
        "append_row(beta_K_X, lambda_K_U)))));"
    )
    assert _statement(abduction, "K") == (
        "K ~ categorical_logit_glm(append_col(X_K, U[s]), append_row(0.0, alpha_K[s]), "
        "with_reference(append_row(beta_K_A[s], append_row(beta_K_age[s], "
        "append_row(beta_K_X[s], lambda_K_U[s])))));"
    )
    assert _statement(code, "K0") == "K0 ~ categorical_logit(rep_vector(0.0, n_levels_K0));"
    assert _statement(code, "R") == "R ~ categorical_logit(append_row(0.0, alpha_R));"
    params = _block(code, "parameters")
    assert "  matrix<multiplier=scale_K>[n_levels_A - 1, n_levels_K - 1] beta_K_A;  " in "\n".join(
        params
    )
    assert any(line.startswith("  row_vector<multiplier=scale_K>[n_levels_K - 1] lambda_K_U;")
               for line in params)
    assert any(line.startswith("  vector<multiplier=scale_K>[n_levels_K - 1] alpha_K;")
               for line in params)
    model = _block(code, "model")
    assert "  to_vector(beta_K_A) ~ normal(0.0, 1.0);" in model
    assert "  beta_K_age ~ normal(0.0, 1.0);" in model
    assert "  matrix with_reference(matrix beta) {" in code
    assert "with_reference" not in _families_scm().stan_code()  # only when a family needs it
    onehot = _categorical_scm("onehot").abduction_code()
    assert "  array[S] matrix[n_levels_A, n_levels_K - 1] beta_K_A;" in onehot


def test_a_latent_with_a_categorical_child_is_sampled_directly() -> None:
    code = _categorical_scm().stan_code()
    assert "  vector[N] U;  // latent U of every individual" in code
    assert "z_U" not in code
    # the sign constraint is on X, U's first child of another family
    assert re.findall(r"real<lower=0> (lambda_\w+);", code) == ["lambda_X_U"]
    assert "indicators(K, n_levels_K, 1)" in code  # K as Y's parent


def test_new_family_data_block_matches_the_data_dictionary() -> None:
    scm = _new_families_scm()
    n = 6
    df = pd.DataFrame(
        {
            "A": ["a", "b"] * 3,
            "age": [20.0, 30.0, 40.0, 50.0, 60.0, 70.0],
            "C": [0, 1, 2, 3, 4, 5],
            "O": ["lo", "mid", "hi"] * 2,
            "Q": [0, 1, 2, 3, 0, 1],
            "Y": [0, 1] * 3,
            "C0": [1] * n,
            "O0": [0, 1] * 3,
            "X": [0.1 * i for i in range(n)],
        }
    )
    specs = {node: scm.specs[node] for node in scm.protected}
    encoding = Encoding.from_data(specs, df)  # type: ignore[arg-type]
    data = fit_data(scm, df, encoding)
    assert sorted(_data_block_names(scm.stan_code())) == sorted(data)
    assert data["n_levels_O"] == 3 and data["n_levels_Q"] == 4 and data["n_levels_O0"] == 2
    truth = {
        name: 0.5 for name in scm.parameter_names()
    } | {
        "beta_C_A": [0.1], "beta_O_A": [0.1], "beta_Q_A": [0.1], "beta_Y_O": [0.1, 0.2],
        "beta_X_O": [0.1, 0.2], "cutpoints_O": [-1.0, 1.0], "cutpoints_Q": [-1.0, 0.0, 1.0],
        "cutpoints_O0": [0.0],
    }
    params = ParamDraws.from_values(scm, truth, {"A": 2})
    abduction = abduction_data(scm, df, encoding, params, ("C", "O"))
    assert sorted(_data_block_names(scm.abduction_code())) == sorted(abduction)


# --------------------------------------------------------------------------- data independence


def test_program_does_not_depend_on_levels() -> None:
    def scm(levels: tuple[str, ...] | None, reference: str | None) -> SCM:
        g = dag(
            {
                "A": cf.Protected(levels=levels, reference=reference),
                "U": cf.Latent(),
                "X": cf.Normal(),
            },
            [("A", "X"), ("U", "X")],
        )
        return cf.SCM(g)

    two = scm(("a", "b"), None)
    five = scm(("v", "w", "x", "y", "z"), "y")
    undeclared = scm(None, None)
    assert two.stan_code() == five.stan_code() == undeclared.stan_code()
    assert two.abduction_code() == five.abduction_code() == undeclared.abduction_code()


def test_no_sizes_or_values_are_embedded(regen_tool: ModuleType) -> None:
    """Sizes are data (N, S, n_levels_*, n_groups_*); the only integer literals are 0, 1, 2.

    Except on the lines of bending terms: a smooth term's basis size ``k`` is part of the
    model as declared (like its family), as is the number of group slopes, and the
    Matern 3/2 density has its sqrt(3).
    """
    bending = re.compile(
        r"\b(?:zs|sds|zgp|sdgp|lsgp|s|gp|omega|zu|sdu|u|Q)_\w+|hsgp_spd_|sqrt\(3\)"
    )
    for name, code in _all_programs(regen_tool).items():
        kept = "\n".join(line for line in code.splitlines() if not bending.search(line))
        literals = set(_integer_literals(_strip_comments(kept)))
        assert literals <= {"0", "1", "2"}, (name, literals)
        assert "  int<lower=1> N;  //" in code
        for declaration in re.findall(r"(?:vector|matrix|array)\[([^\]]+)\]", kept):
            # a size of the data, or of a function's argument (rows(x))
            assert re.search(r"\b(N|S|n|n_levels_\w+|P_\w+)\b|rows\(", declaration), (
                name,
                declaration,
            )


def _data_block_names(code: str) -> list[str]:
    names = []
    for line in _block(code, "data"):
        declaration = line.split(";")[0]
        names.append(declaration.split()[-1])
    return names


def test_data_block_matches_the_data_dictionary(regen_tool: ModuleType) -> None:
    """The generated data block and counterfair.stan.data agree for any number of rows."""
    scm = regen_tool.law_school_level2_scm()
    codes = scm.stan_code()
    for n, races in ((5, ["a", "b", "c", "a", "b"]), (3, ["x", "y", "x"])):
        df = pd.DataFrame(
            {
                "race": races,
                "sex": (["F", "M"] * n)[:n],
                "UGPA": [3.0 + 0.1 * i for i in range(n)],
                "LSAT": list(range(30, 30 + n)),
                "ZFYA": [0.1 * i for i in range(n)],
            }
        )
        specs = {node: scm.specs[node] for node in scm.protected}
        assert all(isinstance(s, Protected) for s in specs.values())
        encoding = Encoding.from_data(specs, df)  # type: ignore[arg-type]
        data = fit_data(scm, df, encoding)
        assert sorted(_data_block_names(codes)) == sorted(data)
        assert data["N"] == n and data["n_levels_race"] == len(set(races))
        # the program text is the same whatever the data
        assert scm.stan_code() == codes

        values = {name: 0.5 for name in scm.parameter_names()}
        for node in ("UGPA", "LSAT", "ZFYA"):
            values[f"beta_{node}_race"] = [0.1] * (len(set(races)) - 1)
            values[f"beta_{node}_sex"] = [0.2]
        n_levels = {node: encoding.n_levels(node) for node in scm.protected}
        params = ParamDraws.from_values(scm, values, n_levels)
        abduction = abduction_data(scm, df, encoding, params, ("UGPA", "LSAT"))
        assert sorted(_data_block_names(scm.abduction_code())) == sorted(abduction)
        assert abduction["observe_ZFYA"] == 0 and abduction["observe_UGPA"] == 1


# --------------------------------------------------------------------------- determinism


def test_same_scm_same_text(regen_tool: ModuleType) -> None:
    first = regen_tool.law_school_level2_scm()
    second = regen_tool.law_school_level2_scm()
    assert first.stan_code() == first.stan_code() == second.stan_code()
    assert first.abduction_code() == second.abduction_code()


def test_edge_insertion_order_does_not_matter(regen_tool: ModuleType) -> None:
    g = regen_tool.law_school_level2_scm().graph
    reversed_edges = nx.DiGraph()
    reversed_edges.add_nodes_from(g.nodes(data=True))
    reversed_edges.add_edges_from(reversed(list(g.edges)))
    assert cf.SCM(reversed_edges).stan_code() == cf.SCM(g).stan_code()
    assert cf.SCM(reversed_edges).abduction_code() == cf.SCM(g).abduction_code()


# --------------------------------------------------------------------------- abduction


def test_observe_flags_only_for_the_latents_children() -> None:
    g = dag(
        {
            "A": cf.Protected(),
            "U": cf.Latent(),
            "W": cf.Normal(),  # not a child of U
            "X": cf.Normal(),
            "Y": cf.Bernoulli(),
        },
        [("A", "W"), ("A", "X"), ("U", "X"), ("W", "X"), ("U", "Y")],
    )
    scm = cf.SCM(g)
    code = scm.abduction_code()
    flags = re.findall(r"int<lower=0, upper=1> (observe_\w+);", code)
    assert flags == ["observe_X", "observe_Y"]
    assert [eq.node for eq in abduction_equations(scm)] == ["X", "Y"]
    model = "\n".join(_block(code, "model"))
    assert "if (observe_X) {\n      X ~ normal_id_glm(" in model
    assert (
        "if (observe_Y) {\n      Y ~ bernoulli_logit(alpha_Y[s] + lambda_Y_U[s] * U[s]);" in model
    )
    assert "W ~" not in model
    # W is still data (a parent of X), but its parameters are not
    assert "  vector[N] W;  // observed W" in code
    assert "alpha_W" not in code


def test_abduction_needs_a_latent(regen_tool: ModuleType) -> None:
    with pytest.raises(cf.errors.SCMError, match="no latent node"):
        regen_tool.law_school_level3_scm().abduction_code()


# --------------------------------------------------------------------------- golden files


def test_golden_files_are_up_to_date(regen_tool: ModuleType) -> None:
    programs = regen_tool.golden_programs()
    assert set(programs) == {
        "compas_families.stan",
        "compas_families_abduction.stan",
        "law_school_level2.stan",
        "law_school_level2_abduction.stan",
        "law_school_level2_onehot.stan",
        "law_school_level3.stan",
        "bending_terms.stan",
        "bending_terms_abduction.stan",
    }
    on_disk = {path.name for path in GOLDEN.glob("*.stan")}
    assert on_disk == set(programs), (
        f"stan_models/ holds {sorted(on_disk)}, the tool writes {sorted(programs)}: "
        f"{regen_tool.CHECK_HINT}"
    )
    stale = [
        name
        for name, text in programs.items()
        if (GOLDEN / name).read_text(encoding="utf-8") != text
    ]
    assert not stale, (
        f"golden Stan programs out of date: {stale}; {regen_tool.CHECK_HINT} "
        "and review git diff stan_models/"
    )


def test_golden_builders_match_the_documented_models(regen_tool: ModuleType) -> None:
    level2 = regen_tool.law_school_level2_scm()
    assert level2.protected == ("race", "sex")
    assert level2.latents == ("K",)
    assert level2.observed == ("UGPA", "LSAT", "ZFYA")
    assert {n: s.family for n, s in level2.specs.items() if n in level2.observed} == {
        "UGPA": "normal",
        "LSAT": "poisson",
        "ZFYA": "normal",
    }
    assert level2.equations["ZFYA"].sigma_fixed == 1.0
    assert regen_tool.law_school_level2_scm("onehot").coding == "onehot"
    level3 = regen_tool.law_school_level3_scm()
    assert level3.latents == ()
    assert level3.observed == ("UGPA", "LSAT")
    assert all(level3.parents(n) == ("race", "sex") for n in level3.observed)


# --------------------------------------------------------------------------- stanc


def _stanc() -> Path | None:
    spec = importlib.util.find_spec("httpstan")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "stanc"
    return path if path.is_file() else None


@pytest.mark.stan
def test_stanc_accepts_the_generated_programs(regen_tool: ModuleType, tmp_path: Path) -> None:
    """Parse and type-check with httpstan's stanc (no C++ compile): golden files and more."""
    stanc = _stanc()
    if stanc is None:
        pytest.skip("httpstan's bundled stanc binary was not found")
    programs = {
        name: (GOLDEN / name).read_text(encoding="utf-8") for name in regen_tool.golden_programs()
    }
    programs.update(_all_programs(regen_tool))
    failures = []
    for name, code in programs.items():
        path = tmp_path / name
        path.write_text(code, encoding="utf-8")
        done = subprocess.run(
            [str(stanc), "--warn-pedantic", "--info", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if done.returncode != 0 or done.stderr.strip():
            failures.append(f"{name} (exit {done.returncode}):\n{done.stderr.strip()}")
    assert not failures, "\n\n".join(failures)


# Small SCMs built here to exercise code generation, simulation or validation include latents
# that are not identified (e.g. two Normal children with free sds); SCM() warns about them
# (IdentificationWarning), which tests/test_identification.py checks. Not what these tests test.
pytestmark = pytest.mark.toy_latents
