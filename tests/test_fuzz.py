"""Property tests of every input a user hands counterfair (issue 30), with hypothesis.

* **SCM documents**, JSON and YAML: valid documents mutated at random (values replaced
  by any JSON value, 1e308 and NaN included; keys removed or added) are read by
  :func:`counterfair.read_scm`; the only error is :class:`~counterfair.SCMError`, and
  its message starts with a JSON path. An accepted document compiles to Stan code.
* **data frames**, mutated rows of a small loans data set (tests/_loans.py): a cell
  set to any value (NaN, infinity, 1e308, a string, a boolean, an unseen level), a
  column dropped or cast, the index duplicated, ... given to the fit's data path (the
  levels read from the data, the row door, the Stan data), and to a loaded fit's
  ``abduct``, ``counterfactual``, a fair learner's ``predict`` and ``predict_proba`` and
  the counterfactual audit: the only error is :class:`~counterfair.DataError` naming a
  column or a row, and a frame of finite values gives no NaN.
* **the command line**: argument lists built from the options of ``fit``, ``learn``,
  ``audit`` and ``counterfactual`` and junk: exit code 2 with one line on standard
  error, or success; never a traceback.

The default run keeps a few hundred examples in all. The long run (``-m fuzz``, also
marked slow) draws 10,000 examples per property, counts the outcomes, and fails with
the counts when any input crashed.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import io
import json
import math
import re
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml
from _loans import SCM_YAML, loans
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import counterfair as cf
from counterfair.cli.commands import main
from counterfair.inference.fitting import training_rows
from counterfair.io.scm_file import parse_yaml, read_scm, scm_to_dict
from counterfair.model.data_levels import with_levels_from_data
from counterfair.stan.data import fit_data

ROOT = Path(__file__).parents[1]
LONG = 10_000
"""Examples per property of the long run."""

SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large,
                              HealthCheck.filter_too_much],
}

OUTCOMES: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
"""Outcome counts per property (reported by the long run)."""


def report(name: str) -> None:
    """Print the outcome counts of a property, and fail on any crash."""
    counts = OUTCOMES[name]
    print(f"\n{name}: {dict(counts)}")
    crashes = {k: v for k, v in counts.items() if k.startswith("crash")}
    assert not crashes, f"{name}: {sum(crashes.values())} crash(es): {crashes}"


def quiet() -> contextlib.AbstractContextManager[Any]:
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    return stack


# ---------------------------------------------------------------------- SCM documents
def base_documents() -> list[dict[str, Any]]:
    documents = [parse_yaml(SCM_YAML), parse_yaml((ROOT / "examples/law_school.yaml").read_text())]
    with quiet():
        scm = read_scm(ROOT / "examples/law_school.yaml")
        resolved = with_levels_from_data(
            cf.read_scm(_write(parse_yaml(SCM_YAML), "yaml")), loans(60)
        )
    documents += [scm_to_dict(scm), scm_to_dict(resolved)]
    return documents


FIELD_NAMES = ["family", "parents", "levels", "positive", "reference", "kind", "sigma",
               "intercept", "prior_intercept", "prior_weights", "prior_variance",
               "prior_cutpoints", "loc", "scale", "args", "nodes", "coding",
               "format_version", "format"]
SPECIAL_VALUES = [1e308, -1e308, math.inf, -math.inf, math.nan, 0, -1, 1, 2, 10**400, True,
                  "normal", "protected", "latent", "bernoulli", "ordinal", "categorical",
                  "poisson", "negative_binomial", "continuous", "onehot", "yes", "no",
                  ["race"], ["K"], ["deny"], [], {}, {"family": "normal", "args": [0, 1e308]},
                  {"family": "gamma", "args": [1e-320, 1]}, "", None]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=6)
    | st.sampled_from(SPECIAL_VALUES),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(FIELD_NAMES) | st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += _paths(item, (*prefix, i))
    return out


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    document = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(document)
        path = draw(st.sampled_from(paths))
        operation = draw(st.sampled_from(["replace", "delete", "add"]))
        if not path:
            if operation == "replace":
                document = draw(json_values)
            continue
        parent: Any = document
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        if operation == "replace":
            parent[last] = draw(json_values)
        elif operation == "delete":
            del parent[last]
        elif isinstance(parent[last], dict):
            key = draw(st.sampled_from(FIELD_NAMES) | st.text(max_size=5))
            parent[last][key] = draw(json_values)
        elif isinstance(parent[last], list):
            parent[last].append(draw(json_values))
        if not isinstance(document, dict):
            break
    return document


FOLDER = Path(tempfile.mkdtemp(prefix="counterfair-fuzz-"))


def _write(document: Any, kind: str) -> Path:
    path = FOLDER / f"scm.{kind}"
    if kind == "json":
        path.write_text(json.dumps(document, allow_nan=True, default=str))
    else:
        path.write_text(yaml.safe_dump(document, allow_unicode=True))
    return path


JSON_PATH = re.compile(
    r"^(invalid SCM document:\n  )?(\(document\)|nodes|coding|format|format_version|"
    r"counterfair_version)[.:\s]"
)

BASES: list[dict[str, Any]] = []


def check_document(document: Any, kind: str, name: str, strict: bool) -> None:
    """Read a document; count the outcome; a crash raises when ``strict`` (the default
    run, so that hypothesis shows the smallest failing document) and is counted in the
    long run, which reports every count at its end."""
    path = _write(document, kind)
    try:
        with quiet():
            scm = read_scm(path)
            scm.stan_code()
    except cf.SCMError as error:
        message = str(error).removeprefix(f"{path}: ")
        if JSON_PATH.match(message):
            OUTCOMES[name]["SCMError"] += 1
        else:
            OUTCOMES[name]["crash: SCMError without a JSON path"] += 1
            if strict:
                raise AssertionError(f"no JSON path: {message!r}") from error
    except Exception as error:
        OUTCOMES[name][f"crash: {type(error).__name__}: {str(error)[:80]}"] += 1
        if strict:
            raise
    else:
        OUTCOMES[name]["accepted"] += 1


def scm_property(examples: int, name: str) -> Callable[[], None]:
    @settings(max_examples=examples, **SETTINGS)
    @given(document=documents(), kind=st.sampled_from(["json", "yaml"]))
    def run(document: Any, kind: str) -> None:
        check_document(document, kind, name, strict=examples < LONG)

    return run


@pytest.fixture(scope="module", autouse=True)
def _bases() -> None:
    if not BASES:
        BASES.extend(base_documents())


def test_scm_documents_fuzzed() -> None:
    scm_property(150, "scm documents")()


@pytest.mark.slow
@pytest.mark.fuzz
def test_scm_documents_fuzzed_long() -> None:
    OUTCOMES.pop("scm documents (long)", None)
    scm_property(LONG, "scm documents (long)")()
    report("scm documents (long)")


def test_the_1e308_prior_and_sigma_are_scm_errors() -> None:
    for node, key, value in (
        ("UGPA", "prior_weights", {"family": "normal", "args": [0, 1e308]}),
        ("ZFYA", "sigma", 1e308),
        ("K", "scale", 1e308),
        ("UGPA", "prior_intercept", {"family": "normal", "args": [0, math.inf]}),
    ):
        document = parse_yaml((ROOT / "examples/law_school.yaml").read_text())
        document["nodes"][node][key] = value
        with pytest.raises(cf.SCMError, match=rf"nodes\.{node}.*magnitude at most 1e\+100"):
            read_scm(_write(document, "json"))
