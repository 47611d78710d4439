"""Distribution families (``counterfair.model.families``): registry, specs, data validation,
parameter checks and the forward simulator, for every family. No Stan here.

Expected messages are built from the constants the family modules and
:mod:`counterfair.errors` define, never retyped.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from _models import CATEGORIES, FAMILIES_TRUTH, FAMILY_LEVELS, dag, families_scm
from _seeds import shifted
from scipy.special import expit

import counterfair as cf
from counterfair import errors
from counterfair.model.encoding import NOT_A_NUMBER, NUMERIC_PROTECTED, Encoding
from counterfair.model.families import FAMILIES, OBSERVED_FAMILIES, family_of
from counterfair.model.families import levels as levels_module
from counterfair.model.families import negative_binomial as nb_module
from counterfair.model.families import ordinal as ordinal_module
from counterfair.model.families.base import Family
from counterfair.model.params import ParamDraws
from counterfair.model.specs import MAX_IMPLICIT_LEVELS, Observed, Protected
from counterfair.stan.data import fit_data


def _around(template: str, hole: str, **fields: object) -> str:
    """Regex of ``template`` formatted with ``fields``, any text in place of ``{hole!r}``."""
    head, tail = template.split("{" + hole + "!r}")
    return re.escape(head.format(**fields)) + ".+" + re.escape(tail.format(**fields)) + "$"


LEVELS = FAMILY_LEVELS
TRUTH = FAMILIES_TRUTH


def new_families_scm() -> cf.SCM:
    return families_scm()


def _frame(**columns: object) -> pd.DataFrame:
    base = {
        "A": ["a", "b", "a", "b"],
        "age": [20.0, 35.0, 50.0, 41.0],
        "O": ["low", "high", "mid", "low"],
        "C": [0, 3, 1, 7],
        "X": [0.1, -0.2, 0.5, 0.0],
        "K": ["drug", "theft", "violent", "drug"],
    }
    base.update(columns)  # type: ignore[arg-type]
    return pd.DataFrame(base)


def _fit_data(df: pd.DataFrame) -> dict[str, object]:
    scm = new_families_scm()
    specs = {n: s for n, s in scm.specs.items() if isinstance(s, Protected)}
    return fit_data(scm, df, Encoding.from_data(specs, df))


# --------------------------------------------------------------------------- registry


def test_every_family_is_registered_with_its_spec() -> None:
    assert set(FAMILIES) == {
        "normal",
        "poisson",
        "bernoulli",
        "negative_binomial",
        "ordinal",
        "categorical",
    }
    for name, family in FAMILIES.items():
        assert isinstance(family, Family)
        assert family.name == name == family.spec.family
        assert OBSERVED_FAMILIES[name] is family.spec
        assert family.task in ("regressor", "classifier")
    assert family_of(cf.NegativeBinomial()) is FAMILIES["negative_binomial"]
    assert family_of(cf.Ordinal(levels=2)).task == "classifier"


def test_specs_stay_importable_from_counterfair_specs() -> None:
    from counterfair.model import specs

    assert specs.Normal is cf.Normal and specs.Poisson is cf.Poisson
    assert specs.Bernoulli is cf.Bernoulli and specs.NegativeBinomial is cf.NegativeBinomial
    with pytest.raises(AttributeError, match="Gamma"):
        specs.Gamma  # noqa: B018


def test_an_observed_spec_of_an_unknown_family_is_refused() -> None:
    class Weird(Observed):
        family = "weird"

    g = dag({"A": cf.Protected(), "X": Weird()}, [("A", "X")])
    with pytest.raises(cf.errors.SCMError, match="not a counterfair spec"):
        cf.SCM(g)


def test_family_parameters_are_named_by_the_scm() -> None:
    scm = new_families_scm()
    assert scm.equations["C"].param("phi") == "phi_C"
    assert scm.equations["O"].param("cutpoints") == "cutpoints_O"
    assert scm.equations["O"].intercept is None
    assert sorted(scm.parameter_names()) == sorted(TRUTH)
    with pytest.raises(KeyError, match=r"'X'.*'phi'"):
        scm.equations["X"].param("phi")


def test_a_family_parameter_clashing_with_a_node_is_refused() -> None:
    g = dag(
        {"A": cf.Protected(), "C": cf.NegativeBinomial(), "phi_C": cf.Normal()},
        [("A", "C"), ("A", "phi_C")],
    )
    with pytest.raises(cf.errors.SCMError, match="phi_C"):
        cf.SCM(g)


# --------------------------------------------------------------------------- specs


@pytest.mark.parametrize("levels", [1, "abc", ("a",), ("a", "a"), True])
def test_ordinal_needs_two_or_more_levels(levels: object) -> None:
    message = levels_module.NO_LEVELS.format(family="an Ordinal", levels=levels)
    with pytest.raises(ValueError, match=re.escape(message)):
        cf.Ordinal(levels=levels)  # type: ignore[arg-type]


def test_ordinal_has_no_intercept() -> None:
    with pytest.raises(ValueError, match=re.escape(ordinal_module.WITH_INTERCEPT)):
        cf.Ordinal(levels=3, intercept=True)
    assert cf.Ordinal(levels=(1, 2, 3)).levels == ("1", "2", "3")
    assert cf.Ordinal(levels=4).n_levels == 4 and cf.Ordinal(levels=4).labels is None


def test_protected_kinds() -> None:
    assert cf.Protected().kind == "categorical" and not cf.Protected().continuous
    with pytest.raises(ValueError, match="'ordinal'"):
        cf.Protected(kind="ordinal")
    with pytest.raises(ValueError, match="no levels or reference"):
        cf.Protected(kind="continuous", levels=("a", "b"))


# --------------------------------------------------------------------------- data


def test_valid_frame_gives_stan_data() -> None:
    data = _fit_data(_frame())
    assert data["n_levels_O"] == 3
    assert list(data["O"]) == [1, 3, 2, 1]  # type: ignore[call-overload]
    assert list(data["age"]) == [20.0, 35.0, 50.0, 41.0]  # type: ignore[call-overload]
    assert "n_levels_age" not in data
    assert list(data["C"]) == [0, 3, 1, 7]  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("values", "row"),
    [([0, 3, 1.5, 7], 2), ([0, -1, 1, 7], 1)],
    ids=["fraction", "negative"],
)
def test_negative_binomial_needs_counts(values: list[float], row: int) -> None:
    pattern = _around(nb_module.NOT_COUNT, "value", column="C", row=row)
    with pytest.raises(cf.errors.DataError, match=pattern):
        _fit_data(_frame(C=values))


def test_ordinal_value_outside_its_levels() -> None:
    message = levels_module.UNKNOWN_LEVEL.format(
        column="O", family="an Ordinal", levels=list(LEVELS), value="medium", row=2
    )
    with pytest.raises(cf.errors.DataError, match=re.escape(message)):
        _fit_data(_frame(O=["low", "high", "medium", "low"]))


def test_ordinal_codes_outside_zero_to_k_minus_one() -> None:
    g = dag({"A": cf.Protected(), "O": cf.Ordinal(levels=3)}, [("A", "O")])
    scm = cf.SCM(g)
    df = pd.DataFrame({"A": ["a", "b", "a"], "O": [0, 3, 2]})
    encoding = Encoding.from_data({"A": Protected()}, df)
    message = levels_module.UNKNOWN_LEVEL.format(
        column="O", family="an Ordinal", levels=[0, 1, 2], value=3.0, row=1
    )
    with pytest.raises(cf.errors.DataError, match=re.escape(message)):
        fit_data(scm, df, encoding)
    assert list(fit_data(scm, df.assign(O=[0, 1, 2]), encoding)["O"]) == [1, 2, 3]  # type: ignore[call-overload]


def test_continuous_protected_value_that_is_not_a_number() -> None:
    message = NOT_A_NUMBER.format(node="age", value="old", row=3)
    with pytest.raises(cf.errors.DataError, match=re.escape(message)):
        _fit_data(_frame(age=[20.0, 35.0, 50.0, "old"]))


def test_numeric_protected_column_with_many_values_needs_a_kind() -> None:
    n = MAX_IMPLICIT_LEVELS + 1
    df = pd.DataFrame({"age": np.arange(18, 18 + n), "X": np.zeros(n)})
    message = NUMERIC_PROTECTED.format(
        node="age", count=n, examples="18, 19, 20, ...",
        continuous="Protected(kind='continuous')",
        levels="Protected(levels=[...]) (or make the column a pandas Categorical)",
    )
    with pytest.raises(cf.errors.DataError, match=re.escape(message)):
        Encoding.from_data({"age": Protected()}, df)
    assert "Protected(kind='continuous')" in message
    # declared levels, a Categorical column or few values are categories, as before
    Encoding.from_data({"age": Protected()}, df.head(MAX_IMPLICIT_LEVELS))
    Encoding.from_data({"age": Protected()}, df.assign(age=df["age"].astype("category")))
    assert Encoding.from_data({"age": Protected(kind="continuous")}, df).continuous == {"age"}


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [
        ("phi_C", 0.0, "'phi_C' must be positive"),
        ("cutpoints_O", [0.8, -0.7], "'cutpoints_O' must be strictly increasing"),
        ("cutpoints_O", [0.1, 0.2, 0.3], r"'cutpoints_O' needs 2 value\(s\)"),
        ("beta_K_O", [0.3, 0.2], r"'beta_K_O' needs \(2, 2\) array of value\(s\)"),
    ],
)
def test_bad_parameter_values(name: str, value: object, match: str) -> None:
    with pytest.raises(cf.errors.SCMError, match=match):
        ParamDraws.from_values(new_families_scm(), {**TRUTH, name: value}, {"A": 2})


# --------------------------------------------------------------------------- simulation


def test_simulated_columns_have_the_family_types() -> None:
    df = new_families_scm().sample(200, params=TRUTH, seed=shifted(0))
    assert list(df.columns) == ["A", "age", "U", "O", "X", "K", "C"]
    assert df["O"].dtype == pd.CategoricalDtype(list(LEVELS), ordered=True)
    assert df["K"].dtype == pd.CategoricalDtype(list(CATEGORIES), ordered=False)
    assert df["C"].dtype == np.int64 and (df["C"] >= 0).all()
    assert df["age"].dtype == float


def test_simulated_ordinal_and_negative_binomial_match_their_distributions() -> None:
    """Category shares and the count mean and variance against closed forms."""
    g = dag(
        {
            "A": cf.Protected(levels=("a", "b")),
            "O": cf.Ordinal(levels=3),
            "C": cf.NegativeBinomial(),
        },
        [("A", "O"), ("A", "C")],
    )
    truth = {"beta_O_A": [1.0], "cutpoints_O": [-0.5, 1.0], "alpha_C": 1.5,
             "beta_C_A": [0.0], "phi_C": 2.0}
    n = 40_000
    df = cf.SCM(g).sample(n, params=truth, seed=shifted(3), protected_probs={"A": {"a": 1.0}})
    below = expit(np.array([-0.5, 1.0]))
    expected = np.diff(np.concatenate([[0.0], below, [1.0]]))
    shares = np.bincount(df["O"], minlength=3) / n
    np.testing.assert_allclose(shares, expected, atol=4 * np.sqrt(0.25 / n))
    mu, phi = np.exp(1.5), 2.0
    # within 4 standard errors of the sample mean and variance, from the negative
    # binomial's cumulants: k2 = mu + mu^2 / phi, k4 = mu + 7 mu^2 / phi + 12 mu^3 / phi^2
    # + 6 mu^4 / phi^3; Var(sample variance) ~ (k4 + 2 k2^2) / n
    k2 = mu + mu**2 / phi
    k4 = mu + 7 * mu**2 / phi + 12 * mu**3 / phi**2 + 6 * mu**4 / phi**3
    assert abs(df["C"].mean() - mu) < 4 * np.sqrt(k2 / n), df["C"].mean()
    assert abs(df["C"].var() - k2) < 4 * np.sqrt((k4 + 2 * k2**2) / n), df["C"].var()


def test_ordinal_parent_enters_as_level_indicators() -> None:
    """A child's mean moves by beta[k - 1] at level k of its ordinal parent, 0 at the lowest."""
    g = dag(
        {"A": cf.Protected(levels=("a", "b")), "O": cf.Ordinal(levels=3), "X": cf.Normal()},
        [("A", "O"), ("O", "X")],
    )
    truth = {"beta_O_A": [0.0], "cutpoints_O": [-1.0, 1.0], "alpha_X": 1.0,
             "beta_X_O": [2.0, 5.0], "sigma_X": 0.01}
    df = cf.SCM(g).sample(3000, params=truth, seed=shifted(1))
    message = r"'beta_X_O' needs 2 value\(s\) \(levels of 'O' above the lowest\)"
    with pytest.raises(cf.errors.SCMError, match=message):
        cf.SCM(g).sample(10, params={**truth, "beta_X_O": [2.0]})
    grouped = df.groupby("O")["X"]
    # each level's mean within 4 standard errors (sigma_X / sqrt(rows at the level))
    np.testing.assert_array_less(
        np.abs(grouped.mean().to_numpy() - [1.0, 3.0, 6.0]),
        4 * truth["sigma_X"] / np.sqrt(grouped.size().to_numpy()),
    )


def test_continuous_protected_parent_enters_linearly() -> None:
    g = dag({"age": cf.Protected(kind="continuous"), "X": cf.Normal(sigma=0.01)},
               [("age", "X")])
    df = cf.SCM(g).sample(500, params={"alpha_X": 1.0, "beta_X_age": -2.0}, seed=shifted(2))
    np.testing.assert_allclose(df["X"], 1.0 - 2.0 * df["age"], atol=0.05)
    assert abs(df["age"].mean()) < 0.2 and df["age"].std() == pytest.approx(1.0, abs=0.1)


def test_learning_tasks_follow_the_family() -> None:
    scm = new_families_scm()
    learner = cf.FairLearner(scm, target="O")
    assert learner._is_classifier()
    assert not cf.FairLearner(scm, target="C")._is_classifier()
    full = cf.full_predictor(scm, "X")
    assert list(full.categorical) == ["A", "O", "K"]  # age is a number, O and K have levels
    assert cf.FairLearner(scm, target="K")._is_classifier()
    cf.FairLearner(scm, target="K")._check_setup()  # multi-class targets are accepted


# --------------------------------------------------------------------------- categorical


def test_categorical_reference_level_comes_first() -> None:
    spec = cf.Categorical(levels=("drug", "theft", "violent"), reference="theft")
    assert spec.labels == ("theft", "drug", "violent") and spec.n_levels == 3
    assert cf.Categorical(levels=3).labels is None
    with pytest.raises(ValueError, match="reference level 'x'"):
        cf.Categorical(levels=("a", "b"), reference="x")
    message = levels_module.NO_LEVELS.format(family="a Categorical", levels=1)
    with pytest.raises(ValueError, match=re.escape(message)):
        cf.Categorical(levels=1)
    # without levels: read from the training rows at fit time (tests/test_data_levels.py)
    assert cf.Categorical().levels is None and cf.Categorical(reference="b").levels is None


def test_categorical_value_outside_its_levels() -> None:
    message = levels_module.UNKNOWN_LEVEL.format(
        column="K", family="a Categorical", levels=list(CATEGORIES), value="fraud", row=1
    )
    with pytest.raises(cf.errors.DataError, match=re.escape(message)):
        _fit_data(_frame(K=["drug", "fraud", "theft", "drug"]))
    data = _fit_data(_frame())
    assert list(data["K"]) == [2, 1, 3, 2] and data["n_levels_K"] == 3  # type: ignore[call-overload]


def test_a_latent_with_only_categorical_children_is_refused() -> None:
    g = dag(
        {"A": cf.Protected(), "U": cf.Latent(), "K": cf.Categorical(levels=3)},
        [("A", "K"), ("U", "K")],
    )
    with pytest.raises(
        cf.errors.SCMError, match=re.escape(errors.NO_SIGN_CHILD.format(latent="U"))
    ):
        cf.SCM(g)


def test_sign_goes_to_the_first_child_of_another_family() -> None:
    scm = families_scm()
    assert [t.positive for t in scm.equations["O"].latent] == [True]
    g = dag(
        {"U": cf.Latent(), "A": cf.Protected(), "K": cf.Categorical(levels=3), "C": cf.Poisson()},
        [("U", "K"), ("U", "C"), ("A", "C")],
    )
    equations = cf.SCM(g).equations
    assert equations["C"].latent[0].positive and not equations["K"].latent[0].positive


def test_categorical_parameter_shapes() -> None:
    with pytest.raises(cf.errors.SCMError, match=r"'beta_K_A' needs \(1, 2\) array of"):
        ParamDraws.from_values(families_scm(), {**TRUTH, "beta_K_A": [0.8, -0.5]}, {"A": 2})
    params = ParamDraws.from_values(families_scm(), TRUTH, {"A": 2})
    assert params["beta_K_A"].shape == (1, 1, 2) and params["beta_K_age"].shape == (1, 2)


def test_simulated_categorical_matches_the_softmax() -> None:
    g = dag(
        {"A": cf.Protected(levels=("a", "b")), "K": cf.Categorical(levels=3),
         "X": cf.Normal(sigma=0.01)},
        [("A", "K"), ("K", "X")],
    )
    truth = {"alpha_K": [0.5, -1.0], "beta_K_A": [[1.0, 2.0]], "alpha_X": 0.0,
             "beta_X_K": [1.0, 3.0]}
    n = 40_000
    df = cf.SCM(g).sample(n, params=truth, seed=shifted(4))
    for level, shift in (("a", np.zeros(2)), ("b", np.array([1.0, 2.0]))):
        logits = np.concatenate([[0.0], np.array([0.5, -1.0]) + shift])
        expected = np.exp(logits) / np.exp(logits).sum()
        rows = df[df["A"] == level]
        shares = np.bincount(rows["K"], minlength=3) / len(rows)
        np.testing.assert_allclose(shares, expected, atol=4 * np.sqrt(0.25 / len(rows)))
    # as a parent: indicators of the non-reference levels
    grouped = df.groupby("K")["X"]  # each level's mean within 4 se (sigma_X / sqrt(rows))
    np.testing.assert_array_less(np.abs(grouped.mean().to_numpy() - [0.0, 1.0, 3.0]),
                                 4 * 0.01 / np.sqrt(grouped.size().to_numpy()))


# Small SCMs built here to exercise code generation, simulation or validation include latents
# that are not identified (e.g. two Normal children with free sds); SCM() warns about them
# (IdentificationWarning), which tests/test_identification.py checks. Not what these tests test.
pytestmark = pytest.mark.toy_latents
