"""Posterior predictive checks (issue 9 item 5) and scale warnings (issue 9 item 6).

The numpy-level tests replicate data whose generating model is known: counts drawn
from a Poisson with a known rate replicate with covering intervals, while
overdispersed (negative binomial) counts declared Poisson are flagged for their
variance and the same counts declared NegativeBinomial are not. The Stan-level
tests reuse the cached fits of ``tests/_models.py`` (no new Stan program).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import matplotlib
import networkx as nx
import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR
from _models import (
    AUX_TRUTH,
    aux_fit,
    aux_scm,
    families_small_fit,
    law_level2_scm,
    law_train,
)
from _seeds import shifted

import counterfair as cf
from counterfair.inference import ppc, scales
from counterfair.inference.ppc_result import PosteriorPredictiveCheck
from counterfair.model.encoding import Encoding
from counterfair.model.params import ParamDraws
from counterfair.model.specs import Protected
from counterfair.rows.validated import observed_values

matplotlib.use("Agg")  # figures are drawn off screen


N_ROWS = 2000
N_DRAWS = 400
LEVELS = ("a", "b")


def _count_scm(spec: Any) -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=LEVELS))
    g.add_node("C", spec=spec)
    g.add_edge("A", "C")
    return cf.SCM(g)


def _inputs(scm: cf.SCM, df: pd.DataFrame) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    protected = {"A": scm.specs["A"]}
    assert isinstance(protected["A"], Protected)
    codes = Encoding.from_data(protected, df).codes(df)  # type: ignore[arg-type]
    return codes, observed_values(scm, df)


def _posterior_of_log_means(
    df: pd.DataFrame, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Draws of (alpha, beta) around the per-group log means, sd 1 / sqrt(total count)."""
    logs, sds = [], []
    for level in LEVELS:
        counts = df.loc[df["A"] == level, "C"].to_numpy()
        logs.append(np.log(counts.mean()))
        sds.append(1.0 / np.sqrt(counts.sum()))
    a = logs[0] + sds[0] * rng.standard_normal(N_DRAWS)
    b = logs[1] + sds[1] * rng.standard_normal(N_DRAWS)
    return a, b - a


def _check(spec: Any, df: pd.DataFrame, extra: dict[str, np.ndarray] | None = None,
           seed: int = shifted(0)) -> PosteriorPredictiveCheck:
    scm = _count_scm(spec)
    rng = np.random.default_rng(seed)
    alpha, beta = _posterior_of_log_means(df, rng)
    params = ParamDraws({"alpha_C": alpha, "beta_C_A": beta[:, None], **(extra or {})})
    codes, observed = _inputs(scm, df)
    replicated = ppc.replicate(scm, params, {}, codes, observed, ("C",), rng)
    return ppc.summarise(scm, observed, replicated, seed=seed)


@pytest.fixture(scope="module")
def poisson_counts() -> pd.DataFrame:
    truth = {"alpha_C": 1.5, "beta_C_A": [0.4]}
    return _count_scm(cf.Poisson()).sample(N_ROWS, params=truth, seed=shifted(3))


@pytest.fixture(scope="module")
def overdispersed_counts() -> pd.DataFrame:
    truth = {"alpha_C": 1.5, "beta_C_A": [0.4], "phi_C": 1.5}
    return _count_scm(cf.NegativeBinomial()).sample(N_ROWS, params=truth, seed=shifted(4))


# ---------------------------------------------------------------------- numpy level
def test_poisson_counts_replicate_within_their_intervals(poisson_counts: pd.DataFrame) -> None:
    check = _check(cf.Poisson(), poisson_counts)
    assert list(check.table["statistic"]) == ["mean", "variance", "share of 0"]
    assert not check.table["outside_90"].any(), str(check)
    assert check.table["p_value"].between(0.05, 0.95).all(), str(check)
    counts = poisson_counts["C"]
    variance = check.statistic("C", "variance")
    assert variance["observed"] == pytest.approx(counts.var())
    assert variance["replicated_q05"] < counts.var() < variance["replicated_q95"]
    assert check.replicated["C"].shape == (N_DRAWS, N_ROWS)


def test_overdispersed_counts_declared_poisson_are_flagged_for_variance(
    overdispersed_counts: pd.DataFrame,
) -> None:
    check = _check(cf.Poisson(), overdispersed_counts)
    variance = check.statistic("C", "variance")
    # negative binomial variance mu + mu^2 / phi is about 5 times the Poisson's here
    assert variance["observed"] > 3 * variance["replicated_q95"]
    assert variance["outside_90"] and variance["p_value"] == 0.0
    zeros = check.statistic("C", "share of 0")
    assert zeros["outside_90"]  # too many zeros for a Poisson too
    assert not check.statistic("C", "mean")["outside_90"]  # the mean is fitted
    assert set(check.flagged()["statistic"]) == {"variance", "share of 0"}


def test_overdispersed_counts_declared_negative_binomial_are_not_flagged(
    overdispersed_counts: pd.DataFrame,
) -> None:
    rng = np.random.default_rng(shifted(9))
    phi = 1.5 + 0.1 * rng.standard_normal(N_DRAWS)  # the dispersion's posterior, roughly
    check = _check(cf.NegativeBinomial(), overdispersed_counts, {"phi_C": phi})
    assert not check.table["outside_90"].any(), str(check)


def test_display_and_csv(poisson_counts: pd.DataFrame, tmp_path: Path) -> None:
    check = _check(cf.Poisson(), poisson_counts)
    text = str(check)
    assert "Posterior predictive check (400 conditional replications" in text
    assert "variance" in text and "share of 0" in text
    assert "<table" in check._repr_html_()
    path = check.to_csv(tmp_path / "ppc.csv")
    back = pd.read_csv(path)
    assert list(back.columns) == list(PosteriorPredictiveCheck.COLUMNS)
    assert len(back) == 3
    with pytest.raises(KeyError, match="no statistic 'median' of node 'C'"):
        check.statistic("C", "median")


def test_check_nodes_are_observed_nodes() -> None:
    scm = law_level2_scm()
    assert ppc.check_nodes(scm, None) == scm.observed
    assert ppc.check_nodes(scm, ["ZFYA", "UGPA"]) == ("UGPA", "ZFYA")  # topological order
    assert ppc.check_nodes(scm, "LSAT") == ("LSAT",)
    for wrong in ("GPA", "race", "K"):
        message = ppc.UNKNOWN_CHECK_NODE.format(node=wrong, observed=list(scm.observed))
        with pytest.raises(cf.errors.SCMError, match=re.escape(message)):
            ppc.check_nodes(scm, ["UGPA", wrong])
    with pytest.raises(cf.errors.SCMError, match="nodes= is empty"):
        ppc.check_nodes(scm, [])


def test_marginal_replication_of_a_latent_model_at_its_truth() -> None:
    """Latents from their prior and parents replicated: the aux SCM's simulated data fall
    inside every interval when the parameters are the truth, and a replicated child
    follows its replicated parent (X on Z)."""
    scm = aux_scm()
    data = scm.sample(3000, params=AUX_TRUTH, seed=shifted(12))
    params = ParamDraws.from_values(scm, AUX_TRUTH, {"race": 2}).take(np.zeros(300, dtype=int))
    protected = {"race": scm.specs["race"]}
    codes = Encoding.from_data(protected, data).codes(data)  # type: ignore[arg-type]
    observed = observed_values(scm, data)
    rng = np.random.default_rng(shifted(0))
    latents = ppc.prior_latents(scm, params.n, len(data), rng)
    # K ~ Normal(0.5, 1.5): the mean of its 300 x 3,000 draws within 4 standard errors
    k = latents["K"]
    assert abs(k.mean() - 0.5) < 4 * 1.5 / np.sqrt(k.size), k.mean()
    assert abs(k.std() - 1.5) < 4 * 1.5 / np.sqrt(2 * k.size), k.std()
    replicated = ppc.replicate(scm, params, latents, codes, observed, ("X", "C"), rng, joint=True)
    assert set(replicated) == {"X", "C"}
    check = ppc.summarise(scm, observed, replicated, replication="marginal")
    # at the truth each statistic's p-value is uniform, so some of five statistics fall
    # outside a 90% interval for about a third of seeds; what holds for every seed (up to
    # 5 x 2/301 = 3%) is that no observed statistic lies beyond all 300 replications
    assert check.table["p_value"].between(0.002, 0.998).all(), str(check)
    assert "300 marginal replications" in str(check)
    # X given the observed Z (conditional) is not X with Z replicated along with the
    # latent (marginal, Z then correlated with K): the two spreads must differ
    conditional = ppc.replicate(scm, params, latents, codes, observed, ("X",), rng)
    assert conditional["X"].var(axis=1).mean() != pytest.approx(
        replicated["X"].var(axis=1).mean(), rel=0.01
    )


# ---------------------------------------------------------------------- fits (Stan)
@pytest.mark.stan
def test_fit_ppc_of_poisson_and_negative_binomial_nodes(stan_backend: str) -> None:
    """aux: C is Poisson data fitted as Poisson; families: C is negative binomial data
    fitted as NegativeBinomial. Neither count's variance is flagged."""
    aux = aux_fit().fit
    check = aux.ppc(n_draws=200, seed=shifted(1))
    assert check.nodes == aux.scm.observed and check.n_draws == 200
    assert set(check.overall()["node"]) == {*aux.scm.observed, "K"}  # K: its indicators' cov
    conditional = check.conditional()  # per race, and X per bin of its Normal parent Z
    assert set(conditional["by"]) == {"race", "Z"}
    assert set(conditional.loc[conditional["by"] == "Z", "node"]) == {"X"}
    assert not check.statistic("C", "variance")["outside_90"], str(check)
    overall = check.overall()
    assert list(overall.loc[overall["node"] == "P", "statistic"]) == ["mean", "share of 0"]
    families = families_small_fit().fit
    nb = families.ppc(n_draws=200, seed=shifted(1), nodes=["C", "K", "O"])
    assert not nb.statistic("C", "variance")["outside_90"], str(nb)
    assert list(nb.overall().loc[nb.overall()["node"] == "K", "statistic"]) == [
        "share of theft", "share of drug", "share of violent",
    ]
    assert nb.discrete == {"O": True, "K": True, "C": True}
    marginal = aux.ppc(n_draws=200, seed=shifted(1), replication="marginal")
    assert marginal.replication == "marginal"
    assert not marginal.statistic("C", "variance")["outside_90"], str(marginal)
    assert not marginal.statistic("X", "variance")["outside_90"], str(marginal)
    # the same seed gives the same replications
    again = families.ppc(n_draws=200, seed=shifted(1), nodes=["C", "K", "O"])
    np.testing.assert_array_equal(again.replicated["C"], nb.replicated["C"])


@pytest.mark.stan
def test_ppc_figure_has_one_axis_per_node(stan_backend: str) -> None:
    fit = families_small_fit().fit
    check = fit.ppc(n_draws=60, seed=shifted(2))
    figure = check.plot(num_pp_samples=20)
    assert len(figure.axes) == len(fit.scm.observed) == 4
    titles = [ax.get_title() for ax in figure.axes]
    assert [t.split(" ")[0] for t in titles] == list(check.nodes)
    assert "variance" in titles[check.nodes.index("X")]
    assert len(check.plot(["X"]).axes) == 1
    with pytest.raises(KeyError, match="node 'U' was not checked"):
        check.plot(["U"])
    idata = check.to_inference_data()
    assert set(idata.groups()) >= {"posterior_predictive", "observed_data"}
    assert idata.posterior_predictive["C"].dtype.kind == "i"
    assert idata.posterior_predictive["X"].dtype.kind == "f"


@pytest.mark.stan
def test_ppc_rejects_unknown_nodes_and_too_many_draws(stan_backend: str) -> None:
    fit = aux_fit().fit
    with pytest.raises(
        cf.errors.SCMError, match=r"cannot check 'nope': it is not an observed node"
    ):
        fit.ppc(nodes=["C", "nope"])
    with pytest.raises(cf.errors.SCMError, match=r"cannot check 'race'"):
        fit.ppc(nodes="race")
    available = fit.params().n
    with pytest.raises(ValueError, match=rf"n_draws={available + 1} is more than the fit's"):
        fit.ppc(n_draws=available + 1)
    with pytest.raises(ValueError, match="n_draws must be a positive integer"):
        fit.ppc(n_draws=0)
    with pytest.raises(ValueError, match="replication must be 'conditional' or 'marginal'"):
        fit.ppc(replication="joint")  # type: ignore[arg-type]
    assert fit.ppc(n_draws="all", nodes="C").n_draws == available
    assert fit.ppc(nodes="C").n_draws == min(200, available)  # the default never fails


# ---------------------------------------------------------------------- scales (item 6)
def _normal_scm(x_spec: Any | None = None, age: bool = False) -> cf.SCM:
    g = nx.DiGraph()
    g.add_node("A", spec=cf.Protected(levels=LEVELS))
    g.add_node("U", spec=cf.Latent())
    g.add_node("X", spec=x_spec if x_spec is not None else cf.Normal())
    g.add_node("Y", spec=cf.Bernoulli())
    g.add_edges_from([("A", "X"), ("U", "X"), ("A", "Y"), ("U", "Y"), ("X", "Y")])
    if age:
        g.add_node("age", spec=cf.Protected(kind="continuous"))
        g.add_edge("age", "Y")
    return cf.SCM(g)


def _normal_data(loc: float, scale: float, n: int = 300, seed: int = shifted(0)) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "A": rng.choice(LEVELS, n),
            "X": loc + scale * rng.standard_normal(n),
            "Y": rng.integers(0, 2, n),
            "age": 40 + 12 * rng.standard_normal(n),
        }
    )


class _StopSamplingError(Exception):
    """Raised in place of sampling, so that a fit stops after its checks."""


def _fit_until_sampling(scm: cf.SCM, data: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_backend(name: str) -> Any:
        raise _StopSamplingError

    monkeypatch.setattr("counterfair.inference.sampling.get_backend", no_backend)
    monkeypatch.setattr("counterfair.inference.sampling._warm_start", lambda *args, **kwargs: None)
    with pytest.raises(_StopSamplingError):
        scm.fit(data, chains=1, warmup=10, draws=10, progress=False)


def test_badly_scaled_normal_node_warns_once_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _normal_data(1000.0, 50.0)
    scm = _normal_scm()  # built first: its IdentificationWarning is not what is counted here
    with pytest.warns(cf.errors.ScaleWarning) as caught:
        _fit_until_sampling(scm, data, monkeypatch)
    assert len(caught) == 1
    message = str(caught[0].message)
    mean, sd = data["X"].mean(), data["X"].std()
    assert message.startswith(f"node 'X' has mean {mean:.4g} and sd {sd:.4g}")
    assert "intercept prior normal(0.0, 1.0) of alpha_X" in message
    assert "beta_X_A, lambda_X_U" in message and "weights prior normal(0.0, 1.0)" in message
    assert "df['X'] = (df['X'] - df['X'].mean()) / df['X'].std()" in message
    assert caught[0].filename == __file__  # points at the caller's fit


def test_standardised_column_does_not_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _normal_data(1000.0, 50.0)
    data["X"] = (data["X"] - data["X"].mean()) / data["X"].std()
    scm = _normal_scm()  # built first: its IdentificationWarning is not what is checked here
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _fit_until_sampling(scm, data, monkeypatch)


def test_explicit_priors_that_fit_the_scale_do_not_warn() -> None:
    spec = cf.Normal(
        prior_intercept=cf.Prior("normal", (1000.0, 100.0)),
        prior_weights=cf.Prior("normal", (0.0, 50.0)),
    )
    scm = _normal_scm(spec)
    assert scales.check_scales(scm, scales.scale_values(scm, _normal_data(1000.0, 50.0))) == []


def test_the_remedy_from_the_command_line_is_written_as_scm_file_keys() -> None:
    """From the command line the fix is the priors' SCM-file keys, on the column's scale,
    and the priors it proposes fit that scale (no warning once they are given)."""
    import yaml

    from counterfair.logs import speaking_scm_file

    scm = _normal_scm()
    data = _normal_data(1000.0, 50.0)
    with speaking_scm_file():
        remedy = scales.check_scales(scm, scales.scale_values(scm, data))[0].remedy
    assert "df[" not in remedy and "cf.Normal" not in remedy
    assert remedy.endswith(", ...}")
    key = remedy[remedy.index("X: {family: normal"):].replace(", ...}", "}")
    proposed = yaml.safe_load(key)["X"]
    spec = cf.Normal(
        prior_intercept=cf.Prior(**proposed["prior_intercept"]),
        prior_weights=cf.Prior(**proposed["prior_weights"]),
    )
    assert proposed["prior_intercept"]["args"][0] == pytest.approx(data["X"].mean(), rel=1e-2)
    fitted = _normal_scm(spec)
    assert scales.check_scales(fitted, scales.scale_values(fitted, data)) == []


def test_tiny_scale_names_the_variance_prior_and_the_child_coefficient() -> None:
    scm = _normal_scm()
    problems = scales.check_scales(scm, scales.scale_values(scm, _normal_data(0.0, 0.01)))
    assert [p.node for p in problems] == ["X"]
    message = problems[0].message()
    assert "variance prior inv_gamma(1.0, 1.0) of sigma2_X" in message
    assert "child 'Y''s coefficient beta_Y_X" in message
    fixed = _normal_scm(cf.Normal(sigma=0.01))  # no variance prior; the child's weight stays
    message = scales.check_scales(fixed, {"X": _normal_data(0.0, 0.01)["X"].to_numpy()})[0]
    assert "inv_gamma" not in message.message() and "beta_Y_X" in message.message()


def test_continuous_protected_parent_scales() -> None:
    scm = _normal_scm(age=True)
    data = _normal_data(0.0, 1.0)
    assert scales.check_scales(scm, scales.scale_values(scm, data)) == []  # age in years is fine
    data["age"] = data["age"] / 1000.0  # in millennia: sd 0.012
    problems = scales.check_scales(scm, scales.scale_values(scm, data))
    assert [p.node for p in problems] == ["age"]
    assert "beta_Y_age" in problems[0].message()
    assert "prior_weights= of each child's spec" in problems[0].message()


def test_law_school_data_do_not_warn() -> None:
    scm = law_level2_scm()
    assert scales.check_scales(scm, scales.scale_values(scm, law_train())) == []
    if (DATA_DIR / "law_data.csv").exists():
        law = cf.datasets.load_law_school(DATA_DIR)
        assert scales.check_scales(scm, scales.scale_values(scm, law)) == []
        assert law["UGPA"].mean() == pytest.approx(3.2, abs=0.1)


def test_shipped_level3_model_has_priors_on_raw_lsat_scale() -> None:
    """The level 3 model keeps raw LSAT (mean about 36), as the paper does: with the
    default Normal(0, 1) priors it warns; the shipped priors (cf.datasets.raw_lsat) do not."""
    data = law_train().assign(LSAT=lambda f: f["LSAT"].astype(float))
    shipped = cf.datasets.law_school_level3()
    assert scales.check_scales(shipped, scales.scale_values(shipped, data)) == []
    graph = shipped.graph
    graph.nodes["LSAT"]["spec"] = cf.Normal()
    default = cf.SCM(graph)
    problems = scales.check_scales(default, scales.scale_values(default, data))
    assert [p.node for p in problems] == ["LSAT"]


@pytest.mark.slow
@pytest.mark.stan
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_stan_fits_of_overdispersed_counts_poisson_flagged_negative_binomial_not(
    stan_backend: str, overdispersed_counts: pd.DataFrame
) -> None:
    """The misfit on purpose, by NUTS (two programs of their own, hence slow): negative
    binomial counts (phi 1.5) with no latent to absorb the overdispersion."""
    rows = overdispersed_counts.iloc[:1000]
    checks = {}
    for name, spec in (("poisson", cf.Poisson()), ("negative_binomial", cf.NegativeBinomial())):
        fit = _count_scm(spec).fit(rows, chains=2, warmup=300, draws=300, seed=shifted(3),
            progress=False)
        checks[name] = fit.ppc(n_draws=300, seed=shifted(3))
    assert checks["poisson"].statistic("C", "variance")["outside_90"]
    assert checks["poisson"].statistic("C", "variance")["p_value"] == 0.0
    negative_binomial = checks["negative_binomial"]
    assert not negative_binomial.table["outside_90"].any(), str(negative_binomial)


# Small SCMs built here to exercise code generation, simulation or validation include latents
# that are not identified (e.g. two Normal children with free sds); SCM() warns about them
# (IdentificationWarning), which tests/test_identification.py checks. Not what these tests test.
pytestmark = pytest.mark.toy_latents


def test_numbers_in_scm_file_remedies_read_back_as_numbers() -> None:
    """PyYAML reads ``1e+03`` as a string: the remedy writes ``1.0e+03``."""
    import yaml

    for value in (1000.0, 50.0, 1e-5, -2.5e6, 0.0, 0.123):
        text = scales.yaml_number(value)
        assert isinstance(yaml.safe_load(text), (int, float)), text
        assert float(yaml.safe_load(text)) == pytest.approx(value, rel=5e-3), text
