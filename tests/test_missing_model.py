"""``SCM.fit(missing="model")``: missing values treated as unknown under missing at random.

The posterior of a fit with holes is checked against the exact one (``tests/_holes.py``:
closed form but for one 1-D integral, turned into means and sds by importance sampling):
a Normal mediator ``W`` whose missing values are sampled, and two nodes without children
(a Normal ``Y`` and a Bernoulli ``B``) left out of their likelihood where missing. The
same comparison against the posterior of the complete rows shows that the check can
fail: dropping the rows moves several parameters by more than a posterior sd. Then what
the fit refuses (naming the column), a latent touched by the holes (sampled directly),
the record kept and saved, the refusal of every later stage, and the command line.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import arviz as az
import numpy as np
import pandas as pd
import pytest
from _holes import (
    BINARY_STAN,
    PRIORS,
    STAN,
    Reference,
    binary_data,
    binary_reference,
    binary_scm,
    holes_data,
    holes_scm,
    reference_posterior,
)
from _models import dag, linear_gaussian_data, linear_gaussian_scm
from _seeds import shifted

import counterfair as cf
from counterfair.rows import Rows
from counterfair.rows.missing import hole_plan

pytestmark = pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")


def _holes(frame: pd.DataFrame, seed: int) -> pd.DataFrame:
    """``frame`` with 60 of ``X`` and 40 of ``Y`` hidden at random."""
    out = frame.copy()
    rng = np.random.default_rng(seed)
    out.loc[out.index[rng.choice(len(out), 60, replace=False)], "X"] = np.nan
    out.loc[out.index[rng.choice(len(out), 40, replace=False)], "Y"] = np.nan
    return out


# ---------------------------------------------------------------------- the plan
def test_the_plan_omits_leaves_and_samples_normal_mediators() -> None:
    assert hole_plan(holes_scm(), {"W": 3, "Y": 2, "B": 0, "A": 0}) == {
        "W": "sample", "Y": "omit",
    }
    program = holes_scm().stan_code(holes={"W": "sample", "Y": "omit", "B": "omit"})
    for line in PRIORS:  # the reference's priors are the program's
        assert f"  {line}" in program, line
    assert "vector<offset=loc_W, multiplier=scl_W>[N_mis_W] W_mis;" in program
    assert "W_full ~ normal_id_glm(X_W, alpha_W, beta_W_A, sigma_W);" in program
    # a child reads the missing values in the rows that miss them only: its other rows
    # keep their data design, so the GLM is never differentiated by a whole design
    assert "M_Y[at_Y_W, 1 + (n_levels_A - 1)] = W_mis[which_Y_W];" in program
    assert "Y[fill_Y] ~ normal_id_glm(M_Y," in program
    assert "Y[keep_Y] ~ normal_id_glm(X_Y[keep_Y]," in program
    assert "B[keep_B] ~ bernoulli_logit_glm(X_Y[keep_B]," in program
    # the same plan in another order gives the same text (one compiled binary)
    assert program == holes_scm().stan_code(holes={"B": "omit", "Y": "omit", "W": "sample"})


def test_what_the_fit_cannot_model_is_refused_naming_the_column() -> None:
    scm = holes_scm()
    with pytest.raises(cf.errors.DataError, match=r"column 'A' has 4 missing value\(s\): it is a "
                       "protected attribute"):
        hole_plan(scm, {"A": 4})
    # two summed nodes in one term
    g = dag(
        {"A": cf.Protected(levels=("a0", "a1")), "E": cf.Bernoulli(), "F": cf.Bernoulli(),
         "Y": cf.Normal()},
        [("A", "E"), ("A", "F"), ("E", "Y"), ("F", "Y")],
    )
    with pytest.raises(cf.errors.DataError, match=r"column 'E' has 2 missing value\(s\): its child "
                       r"'Y' has another parent summed out \('F'\)"):
        hole_plan(cf.SCM(g), {"E": 2, "F": 3})
    assert hole_plan(cf.SCM(g), {"E": 2, "Y": 3}) == {"E": "sum", "Y": "omit"}
    # nothing was fitted: the refusal comes before the rows are read
    _, holes = holes_data(60, shifted(3))
    with pytest.raises(cf.errors.DataError, match="column 'A' has 1 missing"):
        scm.fit(holes.assign(A=holes["A"].where(holes.index != 5)), missing="model")
    with pytest.raises(ValueError, match="warm_start='pilot' is not used with missing='model'"):
        scm.fit(holes, missing="model", warm_start="pilot")
    with pytest.raises(cf.errors.DataError, match="column 'W' has no value in any row"):
        scm.fit(holes.assign(W=np.nan), missing="model")
    Rows.check(holes.assign(W=np.nan), scm, missing="model")  # new rows may miss a column
    with pytest.raises(ValueError, match=r"missing must be one of \['error', 'drop', 'model'\]"):
        scm.fit(holes, missing="impute")  # type: ignore[arg-type]


def test_the_rows_door_keeps_holes_only_when_asked() -> None:
    scm = holes_scm()
    _, holes = holes_data(80, shifted(4))
    with pytest.raises(cf.errors.DataError, match="missing='model'"):
        Rows.check(holes, scm)  # the refusal names the option
    rows = Rows.check(holes, scm, missing="model")
    assert set(rows.holes) == {n for n in ("W", "Y", "B") if holes[n].isna().any()}
    with pytest.raises(cf.errors.DataError, match="this step does not take rows with missing"):
        rows.values()  # a reader that does not ask for the holes is refused them
    values = rows.values(holes=True)
    np.testing.assert_array_equal(values["W"][rows.holes["W"]], 0.0)
    np.testing.assert_array_equal(values["W"][~rows.holes["W"]], holes["W"].dropna())
    part = rows.take(np.arange(10, 30))
    np.testing.assert_array_equal(part.holes["W"], rows.holes["W"][10:30])
    # a later stage given rows with holes refuses them, naming the columns
    with pytest.raises(
        cf.errors.DataError, match="this step does not take rows with missing values"
    ):
        Rows.check(rows, scm)


def test_a_summed_node_is_a_loop_over_its_levels() -> None:
    program = binary_scm().stan_code(holes={"E": "sum", "Y": "omit"})
    assert "E[obs_E] ~ bernoulli_logit_glm(X_E[obs_E], alpha_E, beta_E_A);" in program
    assert "Y[obs_Y] ~ normal_id_glm(X_Y[obs_Y]," in program
    # the rows that miss E, all at once: each level's log densities as vectors
    assert "matrix[N_mis_E, 2] lp = rep_matrix(0.0, N_mis_E, 2);" in program
    assert "lp[:, 2] += log_inv_logit(eta);" in program
    assert "lp[:, k] += to_vector(has_Y_E) .* (-0.5 * square((Y[mis_E] - (" in program
    assert "target += log_sum_exp(lp[i]);" in program
    assert "E_draw[i] = categorical_rng(softmax(lp[i]')) - 1;" in program


# ---------------------------------------------------------------------- the posterior
@pytest.fixture(scope="module")
def holes_fit(stan_backend: str) -> tuple[cf.Fit, pd.DataFrame, pd.DataFrame]:
    complete, holes = holes_data(500, shifted(21))
    fit = holes_scm().fit(
        holes, missing="model", chains=4, warmup=500, draws=1000, seed=shifted(5)
    )
    return fit, complete, holes


def _against_exact(
    fit: cf.Fit, names: dict[str, str], exact: Reference, dropped: Reference
) -> list[str]:
    """Assert each quantity's posterior mean is within 4 combined standard errors (MCSE
    and the importance sampler's) of the exact one and its sd within 10 %; return the
    quantities whose complete-rows posterior is more than 6 such errors away."""
    far = []
    for name, stan in names.items():
        values = fit.idata.posterior[stan].values
        draws = values.reshape(values.shape[0], values.shape[1], -1)[..., 0]
        mean, sd = float(draws.mean()), float(draws.std())
        mcse = float(az.mcse(az.convert_to_dataset({"x": draws}))["x"])
        error = np.hypot(mcse, exact.se[name])
        assert abs(mean - exact.mean[name]) < 4 * error, (name, mean, exact.mean[name], error)
        assert 0.9 < sd / exact.sd[name] < 1.1, (name, sd, exact.sd[name])
        if abs(mean - dropped.mean[name]) > 6 * np.hypot(error, dropped.se[name]):
            far.append(name)
    return far


@pytest.mark.stan
def test_the_posterior_with_holes_is_the_exact_one(
    holes_fit: tuple[cf.Fit, pd.DataFrame, pd.DataFrame],
) -> None:
    fit, _, holes = holes_fit
    exact = reference_posterior(holes, seed=shifted(6))
    dropped = reference_posterior(holes.dropna(), seed=shifted(7))
    assert exact.ess > 3000
    # the check has power: the complete rows' posterior is not the one with holes
    assert len(_against_exact(fit, STAN, exact, dropped)) >= 3
    # every missing value of W has its draws, labelled by its row
    w_mis = fit.idata.posterior["W_mis"]
    assert w_mis.dims[-1] == "W_missing_row"
    assert list(w_mis["W_missing_row"].values) == list(holes.index[holes["W"].isna()])


@pytest.mark.stan
def test_the_record_is_kept_saved_and_later_stages_refuse_the_rows(
    holes_fit: tuple[cf.Fit, pd.DataFrame, pd.DataFrame], tmp_path: Path,
) -> None:
    fit, _, holes = holes_fit
    counts = {c: int(n) for c, n in holes[["W", "Y", "B"]].isna().sum().items()}
    assert fit.missing == {
        "policy": "model", "rows": 500, "incomplete": int(holes.isna().any(axis=1).sum()),
        "columns": counts, "plan": {"W": "sample", "Y": "omit", "B": "omit"},
    }
    assert fit.holes == {"W": "sample", "Y": "omit", "B": "omit"}
    assert len(fit.data) == 500 and fit.data["W"].isna().sum() == counts["W"]
    fit.save(tmp_path / "fit")
    assert "W_mis" in (tmp_path / "fit" / "model.stan").read_text()
    loaded = cf.load(tmp_path / "fit")
    assert loaded.missing == fit.missing and loaded.holes == fit.holes
    assert set(loaded.rows.holes) == {"W", "Y", "B"}
    # the training rows are abducted from the fit's draws, their missing values filled
    own = fit.abduct(fit.rows, n_samples=50, seed=shifted(12))
    assert set(own.holes) == {"W", "Y", "B"} and own.observed["W"].shape == (50, 500)
    w_mis = fit.idata.posterior["W_mis"].values.reshape(-1, counts["W"])
    drawn = own.observed["W"][:, own.holes["W"]]
    assert all(any(np.array_equal(row, d) for d in w_mis) for row in drawn[:5])
    held = holes["W"].dropna().to_numpy()
    np.testing.assert_array_equal(own.observed["W"][:, ~own.holes["W"]], np.tile(held, (50, 1)))
    # the same rows as a frame are the fit's own: its draws again
    again = fit.abduct(holes, n_samples=50, seed=shifted(12))
    np.testing.assert_array_equal(again.observed["W"], own.observed["W"])
    # other rows that miss W but hold its descendants Y and B (evidence about W) are
    # refused, naming both; every check that compares values refuses the fit's rows
    moved = holes.set_axis(holes.index + 1000)
    with pytest.raises(cf.errors.DataError, match=r"miss 'W' \(first at index label 1[0-9]{3}\) "
                       r"but hold its descendant '[YB]'"):
        fit.abduct(moved)
    with pytest.raises(cf.errors.DataError, match="posterior predictive check compares every row"):
        fit.ppc()
    # complete rows are taken as from any fit
    complete_rows = holes.dropna().iloc[:20]
    assert fit.abduct(complete_rows).n_samples > 0


@pytest.mark.stan
def test_a_latent_the_holes_touch_is_sampled_directly(
    stan_backend: str, caplog: pytest.LogCaptureFixture,
) -> None:
    data = linear_gaussian_data().drop(columns="U")
    holes = _holes(data, shifted(8))
    options = {"chains": 2, "warmup": 300, "draws": 300, "seed": shifted(9)}
    with caplog.at_level(logging.INFO, logger="counterfair"):
        fit = linear_gaussian_scm().fit(holes, missing="model", **options)
    assert fit.holes == {"X": "sample", "Y": "omit"}
    assert fit.integrated == ()
    posterior = fit.idata.posterior
    assert "U" in posterior and "z_U" not in posterior and "X_mis" in posterior
    if stan_backend == "cmdstanpy":  # PyStan has no integrated latents to leave out
        assert any(
            "latent 'U' sampled jointly: 'X' has missing values" in r.getMessage()
            for r in caplog.records
        )
    with pytest.raises(ValueError, match="latent 'U' cannot be integrated out: 'X' has"):
        linear_gaussian_scm().fit(holes, missing="model", latents="integrated", **options)
    complete = linear_gaussian_scm().fit(data, **options)
    for name in ("lambda_X_U", "lambda_Y_U", "beta_Y_X"):
        a, b = posterior[name].values.ravel(), complete.idata.posterior[name].values.ravel()
        assert abs(a.mean() - b.mean()) < 3 * a.std(), name
        assert a.std() > b.std() * 0.95, name  # fewer values: not more certain


@pytest.mark.stan
def test_cli_fit_missing_model_logs_the_plan(tmp_path: Path, stan_backend: str) -> None:
    _, holes = holes_data(200, shifted(10))
    holes.to_csv(tmp_path / "rows.csv", index=False)
    model = tmp_path / "model.yaml"
    model.write_text(
        "nodes:\n"
        "  A: {family: protected, levels: [a0, a1]}\n"
        "  W: {family: normal, parents: [A]}\n"
        "  Y: {family: normal, parents: [A, W]}\n"
        "  B: {family: bernoulli, parents: [A, W]}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "counterfair.cli.commands", "fit", str(model), "--data",
         "rows.csv", "--out", "run", "--chains", "2", "--warmup", "200", "--draws", "200",
         "--missing", "model", "--backend", stan_backend],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
    )
    assert done.returncode == 0, done.stderr
    count = int(holes["W"].isna().sum())
    assert (
        f"[counterfair] missing='model': 'W' has {count} missing value(s), its missing values "
        "sampled with the parameters" in done.stderr
    )
    assert "assumes the values are missing at random" in done.stderr
    assert "posterior predictive check: not run (the rows have missing values" in done.stdout
    assert not (tmp_path / "run" / "ppc.csv").exists()
    assert cf.load(tmp_path / "run" / "fit").holes == {"W": "sample", "Y": "omit", "B": "omit"}
    # the run's own rows, holes and all, are decomposed
    table = subprocess.run(
        [sys.executable, "-m", "counterfair.cli.commands", "decompose", "run", "--attribute",
         "A", "--x0", "a0", "--x1", "a1", "--outcome", "Y", "--n-samples", "50",
         "--out", "parts.csv"],
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
    )
    assert table.returncode == 0, table.stderr
    terms = pd.read_csv(tmp_path / "parts.csv").set_index("term")
    assert {"TV", "Ctf-DE", "Ctf-IE", "Ctf-SE"} <= set(terms.index)


@pytest.mark.stan
def test_the_decomposition_takes_the_training_rows_with_holes(
    holes_fit: tuple[cf.Fit, pd.DataFrame, pd.DataFrame],
) -> None:
    fit, _, holes = holes_fit
    options = {"attribute": "A", "x0": "a0", "x1": "a1", "outcome": "Y",
               "settings": cf.audit.DecompositionSettings(n_samples=200, seed=shifted(13))}
    result = cf.audit.decompose(fit, fit.data, **options)
    draws = result.draws
    np.testing.assert_allclose(
        draws["Ctf-DE"] - draws["Ctf-IE"] - draws["Ctf-SE"], draws["TV"], atol=1e-12
    )
    # linear: each sample's Ctf-DE is its beta_Y_A and its Ctf-IE is -beta_Y_W beta_W_A
    posterior = fit.idata.posterior
    beta_ya = posterior["beta_Y_A"].values.ravel()
    effect = -(posterior["beta_Y_W"].values * posterior["beta_W_A"].values[..., 0]).ravel()
    for term, values in (("Ctf-DE", beta_ya), ("Ctf-IE", effect)):
        error = values.std() / np.sqrt(200)
        assert abs(float(draws[term].mean()) - values.mean()) < 4 * error, term
    # the same numbers at every chunk size
    with cf.set_options(chunk_bytes=2**16):  # a few rows per chunk
        small = cf.audit.decompose(fit, fit.data, **options)
    pd.testing.assert_frame_equal(small.table, result.table)
    # the same rows as a copy are the fit's; other rows that miss W but hold Y are refused
    pd.testing.assert_frame_equal(cf.audit.decompose(fit, holes.copy(), **options).table,
                                  result.table)
    with pytest.raises(cf.errors.DataError, match=r"but hold its descendant '[YB]'"):
        cf.audit.decompose(fit, holes.set_axis(holes.index + 1000), **options)


@pytest.mark.stan
def test_summing_a_binary_mediator_out_gives_the_exact_posterior(stan_backend: str) -> None:
    _, holes = binary_data(500, shifted(31))
    fit = binary_scm().fit(
        holes, missing="model", chains=4, warmup=500, draws=1000, seed=shifted(14)
    )
    assert fit.holes == {"E": "sum", "Y": "omit"}
    exact = binary_reference(holes, seed=shifted(15))
    dropped = binary_reference(holes.dropna(), seed=shifted(16))
    assert len(_against_exact(fit, BINARY_STAN, exact, dropped)) >= 2
    # the missing values' draws: 0 or 1, more often 1 where Y is high (E raises Y)
    draws = fit.idata.posterior["E_draw"]
    assert draws.dims[-1] == "E_missing_row"
    values = draws.values.reshape(-1, draws.shape[-1])
    assert set(np.unique(values)) <= {0, 1}
    missing = holes[holes["E"].isna() & holes["Y"].notna()]
    share = values.mean(axis=0)[np.isin(draws["E_missing_row"].values, missing.index)]
    assert np.corrcoef(share, missing["Y"])[0, 1] > 0.5
    # the training rows carry them, and the decomposition takes them: Ctf-DE = beta_Y_A
    own = fit.abduct(fit.rows, n_samples=40, seed=shifted(17))
    assert set(np.unique(own.observed["E"][:, own.holes["E"]])) <= {0.0, 1.0}
    result = cf.audit.decompose(
        fit, fit.data, attribute="A", x0="a0", x1="a1", outcome="Y",
        settings=cf.audit.DecompositionSettings(n_samples=200, seed=shifted(18)),
    )
    beta = fit.idata.posterior["beta_Y_A"].values.ravel()
    assert abs(result.mean("Ctf-DE") - beta.mean()) < 4 * beta.std() / np.sqrt(200)


def _survey_scm() -> cf.SCM:
    """The shape of a labour survey: ``language`` (categorical, a root) and ``age``
    confound, ``education`` mediates, ``wages`` is the outcome; all but age have holes."""
    return cf.SCM(dag(
        {"sex": cf.Protected(levels=("Female", "Male")), "age": cf.Normal(),
         "language": cf.Categorical(levels=("English", "French", "Other")),
         "education": cf.Normal(), "wages": cf.Normal()},
        [("sex", "education"), ("age", "education"), ("language", "education"),
         ("sex", "wages"), ("age", "wages"), ("language", "wages"), ("education", "wages")],
    ))


def _survey(n: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(seed)
    male = rng.random(n) < 0.5
    age = rng.normal(size=n)
    language = rng.choice(["English", "French", "Other"], n, p=[0.6, 0.25, 0.15])
    french, other = language == "French", language == "Other"
    education = 0.3 * male + 0.2 * age - 0.4 * other + 0.3 * french + rng.normal(size=n)
    wages = 0.5 * male + 0.3 * age + 0.6 * education - 0.3 * other + rng.normal(size=n)
    complete = pd.DataFrame({"sex": np.where(male, "Male", "Female"), "age": age,
                             "language": language, "education": education, "wages": wages})
    holes = complete.copy()
    holes.loc[rng.random(n) < 0.1, "language"] = np.nan
    holes.loc[rng.random(n) < 0.15, "education"] = np.nan
    holes.loc[rng.random(n) < 1 / (1 + np.exp(1.0 - 0.8 * education)), "wages"] = np.nan
    return complete, holes


@pytest.mark.stan
def test_a_survey_with_holes_in_three_kinds_of_node(stan_backend: str) -> None:
    complete, holes = _survey(800, shifted(41))
    scm = _survey_scm()
    counts = {c: int(n) for c, n in holes.isna().sum().items()}
    assert hole_plan(scm, counts) == {
        "language": "sum", "education": "sample", "wages": "omit",
    }
    options = {"chains": 2, "warmup": 400, "draws": 400, "seed": shifted(19)}
    fit = scm.fit(holes, missing="model", **options)
    full = scm.fit(complete, **options)
    posterior = fit.idata.posterior
    assert posterior["language_draw"].shape[-1] == counts["language"]
    assert posterior["education_mis"].shape[-1] == counts["education"]
    for name in ("beta_wages_education", "beta_education_sex", "beta_wages_sex"):
        a, b = posterior[name].values.ravel(), full.idata.posterior[name].values.ravel()
        assert abs(a.mean() - b.mean()) < 3 * a.std(), name
    own = fit.abduct(fit.rows, n_samples=30, seed=shifted(20))
    codes = own.observed["language"][:, own.holes["language"]]
    assert set(np.unique(codes)) <= {0.0, 1.0, 2.0}


@pytest.mark.stan
def test_summing_ordinal_and_binary_nodes_with_count_and_categorical_children(
    stan_backend: str,
) -> None:
    """Each kind of summed term: an ordinal node (its own term one row at a time) with a
    Poisson child (vector arithmetic) and a categorical one (one row at a time), a
    Bernoulli node with a Normal child. The fit with holes agrees with the fit of the
    complete data; the fit of the complete rows does not."""
    scm = cf.SCM(dag(
        {"A": cf.Protected(levels=("a0", "a1")), "K": cf.Ordinal(levels=("l", "m", "h")),
         "C": cf.Poisson(), "Q": cf.Categorical(levels=("x", "y", "z")),
         "E": cf.Bernoulli(), "Y": cf.Normal()},
        [("A", "K"), ("K", "C"), ("A", "C"), ("K", "Q"), ("A", "E"), ("E", "Y"), ("A", "Y")],
    ))
    params = {
        "beta_K_A": [0.6], "cutpoints_K": [-0.5, 0.7], "alpha_C": 0.5, "beta_C_A": [0.3],
        "beta_C_K": [0.4, 0.9], "alpha_E": -0.2, "beta_E_A": [0.7], "alpha_Q": [0.2, -0.3],
        "beta_Q_K": [[0.5, -0.4], [1.0, 0.3]], "alpha_Y": 0.1, "beta_Y_A": [0.5],
        "beta_Y_E": 1.0, "sigma_Y": 0.8,
    }
    data = scm.sample(1500, params=params, seed=shifted(51))
    rng = np.random.default_rng(shifted(52))
    holes = data.copy()
    z = (data["C"] - data["C"].mean()) / data["C"].std()
    holes.loc[rng.random(len(data)) < 1 / (1 + np.exp(1.0 - z)), "K"] = np.nan
    holes.loc[rng.random(len(data)) < 1 / (1 + np.exp(1.0 - data["Y"])), "E"] = np.nan
    options = {"chains": 2, "warmup": 400, "draws": 400, "seed": shifted(53)}
    full = scm.fit(data, **options).summary()
    fit = scm.fit(holes, missing="model", **options)
    assert fit.holes == {"K": "sum", "E": "sum"}
    dropped = scm.fit(holes, missing="drop", **options).summary()
    modelled = fit.summary()
    z_model = (modelled["mean"] - full["mean"]) / modelled["sd"]
    z_drop = (dropped["mean"] - full["mean"]) / modelled["sd"]
    assert z_model.abs().max() < 3, z_model.round(2).to_dict()
    assert z_drop.abs().max() > 4, z_drop.round(2).to_dict()


@pytest.mark.stan
def test_a_classifier_learns_a_target_with_holes_per_sample(
    holes_fit: tuple[cf.Fit, pd.DataFrame, pd.DataFrame],
) -> None:
    fit, _, holes = holes_fit
    options = {"target": "B", "n_samples": 20, "seed": shifted(17)}
    learner = cf.FairLearner(
        fit, features=cf.inputs.AdditiveNoise(condition_on_target=True), **options
    ).fit(fit.data)
    assert list(learner.classes_) == [0.0, 1.0]
    probability = learner.predict_proba(holes.dropna().iloc[:30])[:, 1]
    assert ((probability > 0) & (probability < 1)).all()
    with pytest.raises(cf.errors.DataError, match="training='mean' gives each row one label, "
                       "but 'B' is missing in some rows"):
        cf.FairLearner(
            fit, features=cf.inputs.AdditiveNoise(condition_on_target=True, training="mean"),
            **options,
        ).fit(fit.data)
