"""Property tests of every input a user hands counterfair (issue 30), with hypothesis.

* **SCM documents**, JSON and YAML: valid documents mutated at random (values replaced
  by any JSON value, 1e308 and NaN included; keys removed or added) are read by
  :func:`counterfair.read_scm`; the only error is :class:`~counterfair.errors.SCMError`, and
  its message starts with a JSON path. An accepted document compiles to Stan code.
* **data frames**, mutated rows of a small loans data set (tests/_loans.py): a cell
  set to any value (NaN, infinity, 1e308, a string, a boolean, an unseen level), a
  column dropped or cast, the index duplicated, ... given to the fit's data path (the
  levels read from the data, the row door, the Stan data), and to a loaded fit's
  ``abduct``, ``counterfactual``, a fair learner's ``predict`` and ``predict_proba`` and
  the counterfactual audit: the only error is :class:`~counterfair.errors.DataError` naming a
  column or a row, and a frame of finite values gives no NaN.
* **the command line**: argument lists built from the options of ``fit``, ``learn``,
  ``audit`` and ``counterfactual`` and junk: exit code 2 with one line on standard
  error, or success; never a traceback.

The default run keeps a few hundred examples in all. The long run (``-m fuzz``, also
marked slow) draws 10,000 examples per property, counts the outcomes, and fails with
the counts when any input crashed.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import copy
import io
import json
import math
import re
import shutil
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
from _seeds import shifted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import counterfair as cf
from counterfair.cli.commands import main
from counterfair.inference.sampling import training_rows
from counterfair.io.scm_file import parse_yaml, read_scm
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


def progress(name: str) -> None:
    """Every 500 examples of a long run, write its counts so far to
    ``$TMPDIR/counterfair-fuzz-<name>.json`` (a long run can be watched, or cut short)."""
    counts = OUTCOMES[name]
    if "long" in name and sum(counts.values()) % 500 == 0:
        slug = re.sub(r"\W+", "-", name).strip("-")
        (Path(tempfile.gettempdir()) / f"counterfair-fuzz-{slug}.json").write_text(
            json.dumps(dict(counts), indent=1)
        )


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
    documents += [scm.to_dict(), resolved.to_dict()]
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
                document = copy.deepcopy(draw(json_values))
            continue
        parent: Any = document
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        # values are copied: a list or mapping among SPECIAL_VALUES must never be
        # changed by a later mutation (hypothesis replays draws)
        if operation == "replace":
            parent[last] = copy.deepcopy(draw(json_values))
        elif operation == "delete":
            del parent[last]
        elif isinstance(parent[last], dict):
            key = draw(st.sampled_from(FIELD_NAMES) | st.text(max_size=5))
            parent[last][key] = copy.deepcopy(draw(json_values))
        elif isinstance(parent[last], list):
            parent[last].append(copy.deepcopy(draw(json_values)))
        if not isinstance(document, dict):
            break
    return document


FOLDER = Path(tempfile.mkdtemp(prefix="counterfair-fuzz-"))
atexit.register(shutil.rmtree, FOLDER, ignore_errors=True)


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
    except cf.errors.SCMError as error:
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
        progress(name)

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
        with pytest.raises(cf.errors.SCMError, match=rf"nodes\.{node}.*magnitude at most 1e\+100"):
            read_scm(_write(document, "json"))


# ---------------------------------------------------------------------- data frames
@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory, stan_backend: str) -> dict[str, Any]:
    """A small NUTS fit of the loans SCM, saved and loaded back, and a fair learner."""
    folder = tmp_path_factory.mktemp("fuzz-fit")
    with quiet():
        scm = read_scm(_write(parse_yaml(SCM_YAML), "yaml"))
        fit = scm.fit(loans(150, seed=shifted(2)), chains=1, warmup=150, draws=100, seed=shifted(1),
                      progress=False)
    fit.save(folder / "fit")
    fit = cf.load(folder / "fit")
    learner = cf.FairLearner(
        fit,
        target="deny",
        features=cf.inputs.Latent(),
        n_samples=5,
        seed=shifted(0),
    ).fit(fit.data)
    return {"scm": scm, "fit": fit, "learner": learner}


CELL_VALUES = [math.nan, None, math.inf, -math.inf, 1e308, -1e308, 1e20, -1e20, 1e-300, "",
               "zzz", "yes", "no", "YES", "white", "black", "home", True, False, 0, 1, -1,
               2.5, 7, 6, "3", 3.0]
COLUMNS = ["race", "income", "history", "purpose", "deny"]
OPERATIONS = ["fit data", "abduct", "counterfactual", "predict", "predict_proba", "audit"]


@st.composite
def frames(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 30)) == 0:  # not a data frame at all
        return draw(st.sampled_from([None, [], {}, [1, 2], np.zeros((3, 5)), "data.csv",
                                     pd.Series([1.0, 2.0])]))
    frame = loans(draw(st.integers(1, 8)), seed=draw(st.integers(0, 5))).astype(object)
    frame = frame.infer_objects()
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["cell", "cell", "cell", "drop", "cast", "index", "junk",
                                     "empty", "rename", "column"]))
        columns = list(frame.columns)
        if kind == "cell" and columns and len(frame):
            column = draw(st.sampled_from(columns))
            row = draw(st.integers(0, len(frame) - 1))
            value = draw(st.sampled_from(CELL_VALUES) | st.floats() | st.text(max_size=3))
            frame[column] = frame[column].astype(object)
            frame.iloc[row, frame.columns.get_loc(column)] = value
            with contextlib.suppress(Exception):
                frame[column] = pd.to_numeric(frame[column])
        elif kind == "drop" and columns:
            frame = frame.drop(columns=draw(st.sampled_from(columns)))
        elif kind == "cast" and columns:
            column = draw(st.sampled_from(columns))
            to = draw(st.sampled_from(["str", "category", "float", "bool", "int", "object"]))
            with contextlib.suppress(Exception):
                frame[column] = frame[column].astype(to)
        elif kind == "index":
            index = draw(st.sampled_from(["duplicate", "strings", "shuffle", "negative"]))
            if index == "duplicate":
                frame.index = [0] * len(frame)
            elif index == "strings":
                frame.index = [f"r{i}" for i in range(len(frame))]
            elif index == "shuffle":
                frame = frame.iloc[::-1]
            else:
                frame.index = -np.arange(len(frame)) - 5
        elif kind == "junk":
            frame["junk"] = draw(st.sampled_from(CELL_VALUES))
        elif kind == "empty":
            frame = frame.head(0)
        elif kind == "rename" and columns:
            column = draw(st.sampled_from(columns))
            frame = frame.rename(columns={column: column.upper()})
        elif kind == "column" and columns:
            column = draw(st.sampled_from(columns))
            frame[column] = draw(st.sampled_from(CELL_VALUES))
    return frame


def _finite(frame: Any) -> bool:
    """Whether a frame has no missing or infinite cell (so its outputs must be finite)."""
    if not isinstance(frame, pd.DataFrame):
        return False
    for column in frame.columns:
        values = frame[column]
        if values.isna().any():
            return False
        numbers = pd.to_numeric(values, errors="coerce")
        if (~np.isfinite(numbers.dropna().to_numpy(dtype=float))).any():
            return False
    return True


def _has_nan(value: Any) -> bool:
    if isinstance(value, pd.DataFrame):
        numeric = value.select_dtypes(include="number")
        return bool(numeric.isna().to_numpy().any())
    array = np.asarray(value)
    return array.dtype.kind == "f" and bool(np.isnan(array).any())


def _run(operation: str, frame: Any, objects: dict[str, Any]) -> Any:
    fit, learner = objects["fit"], objects["learner"]
    if operation == "fit data":  # what SCM.fit does with the rows before NUTS
        scm = with_levels_from_data(objects["scm"], frame) if isinstance(
            frame, pd.DataFrame) else objects["scm"]
        rows, _ = training_rows(scm, frame, subsample=None, max_rows=None, seed=shifted(0))
        data = fit_data(scm, rows)
        return np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in data.values()])
    if operation == "abduct":
        abduction = fit.abduct(frame, n_samples=3, seed=shifted(0))
        return np.concatenate([np.ravel(v) for v in abduction.latents.values()])
    if operation == "counterfactual":
        return fit.counterfactual(frame, do={"race": "white"}, n_samples=2, seed=shifted(0))
    if operation == "predict":
        return learner.predict(frame)
    if operation == "predict_proba":
        return learner.predict_proba(frame)
    report_ = cf.audit.counterfactual_fairness(
        fit, frame, learner,
        settings=cf.audit.AuditSettings(attributes=["race"], n_samples=2, seed=shifted(0)),
    )
    return report_.summary if hasattr(report_, "summary") else None


NAMES_A_PLACE = re.compile(r"column|row|DataFrame|no rows|" + "|".join(COLUMNS))


def check_frame(frame: Any, operation: str, objects: dict[str, Any], name: str,
                strict: bool) -> None:
    try:
        with quiet():
            out = _run(operation, frame, objects)
    except cf.errors.DataError as error:
        if NAMES_A_PLACE.search(str(error)):
            OUTCOMES[name]["DataError"] += 1
            return
        OUTCOMES[name]["crash: DataError naming no column or row"] += 1
        if strict:
            raise AssertionError(f"{operation}: {error}") from error
        return
    except Exception as error:
        OUTCOMES[name][f"crash: {operation}: {type(error).__name__}: {str(error)[:80]}"] += 1
        if strict:
            raise
        return
    if operation != "audit" and _finite(frame) and _has_nan(out):
        OUTCOMES[name][f"crash: NaN output of {operation} for finite input"] += 1
        if strict:
            raise AssertionError(f"{operation} gave NaN for finite rows:\n{frame}")
        return
    OUTCOMES[name]["accepted"] += 1


def frame_property(examples: int, name: str, objects: dict[str, Any]) -> Callable[[], None]:
    @settings(max_examples=examples, **SETTINGS)
    @given(frame=frames(), operation=st.sampled_from(OPERATIONS))
    def run(frame: Any, operation: str) -> None:
        check_frame(frame, operation, objects, name, strict=examples < LONG)
        progress(name)

    return run


@pytest.mark.stan
def test_data_frames_fuzzed(loaded: dict[str, Any]) -> None:
    frame_property(120, "data frames", loaded)()


@pytest.mark.stan
@pytest.mark.slow
@pytest.mark.fuzz
def test_data_frames_fuzzed_long(loaded: dict[str, Any]) -> None:
    OUTCOMES.pop("data frames (long)", None)
    frame_property(LONG, "data frames (long)", loaded)()
    report("data frames (long)")


# ---------------------------------------------------------------------- command line
def cli_folder() -> Path:
    """Files the fuzzed command lines point at: a garbage CSV, a garbage SCM file, an
    SCM whose columns the data lacks, a run folder with a broken fit, empty files."""
    folder = FOLDER / "cli"
    if folder.exists():
        return folder
    folder.mkdir()
    (folder / "garbage.csv").write_bytes(b"\x00\xff,\n\"unclosed\n1,2,3\n")
    (folder / "empty.csv").write_text("")
    loans(20).to_csv(folder / "loans.csv", index=False)
    (folder / "bad.yaml").write_text("nodes: [1, 2\n")
    (folder / "other.yaml").write_text(
        "nodes:\n  sex: {family: protected}\n  y: {family: normal, parents: [sex]}\n"
    )
    (folder / "run" / "fit").mkdir(parents=True)
    (folder / "run" / "fit" / "manifest.json").write_text("{}")
    return folder


OPTIONS = ["--data", "--out", "--chains", "--warmup", "--draws", "--seed", "--backend",
           "--force", "--until-converged", "--max-draws", "--target", "--features",
           "--estimator", "--n-samples", "--folds", "--unfair-path", "--baseline",
           "--predictions", "--protected", "--label", "--task", "--threshold", "--tau",
           "--bootstrap", "--overwrite", "--cf-samples", "--rows", "--do", "--nope", "-x"]
VALUES = ["loans.csv", "garbage.csv", "empty.csv", "missing.csv", "bad.yaml", "other.yaml",
          "missing.yaml", "run", "nowhere", "0", "-1", "1", "2", "1e308", "nan", "abc",
          "race=white", "race", "=", "deny", "K", "latent", "linear", "logistic",
          "path_specific", "race>deny", "", " ", "--", "é", "out.html"]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    command = draw(st.sampled_from(["fit", "learn", "audit", "counterfactual", "fitt", "",
                                    "-v"]))
    words = [command] if command else []
    words += draw(st.lists(st.sampled_from(VALUES), max_size=2))
    for _ in range(draw(st.integers(0, 4))):
        words.append(draw(st.sampled_from(OPTIONS)))
        words += draw(st.lists(st.sampled_from(VALUES) | st.text(max_size=4), max_size=2))
    return words


def check_command_line(words: list[str], name: str, strict: bool) -> None:
    import os

    folder = cli_folder()
    error, out = io.StringIO(), io.StringIO()
    here = Path.cwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stderr(error), contextlib.redirect_stdout(out), quiet():
            try:
                code = main(words)
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
    except Exception as crash:
        OUTCOMES[name][f"crash: {type(crash).__name__}: {str(crash)[:80]}"] += 1
        if strict:
            raise
        return
    finally:
        os.chdir(here)
        for made in ("out.html", "nowhere", "missing.csv"):
            path = folder / made
            if path.is_file():
                path.unlink()
    lines = [line for line in error.getvalue().splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith("[counterfair]")]  # log lines
    if code == 0:
        OUTCOMES[name]["exit 0"] += 1
        return
    if code == 2 and len(lines) == 1 and "Traceback" not in error.getvalue():
        OUTCOMES[name]["exit 2"] += 1
        return
    OUTCOMES[name][f"crash: exit {code} with {len(lines)} line(s)"] += 1
    if strict:
        raise AssertionError(f"{words}: exit {code}, standard error:\n{error.getvalue()}")


def cli_property(examples: int, name: str) -> Callable[[], None]:
    @settings(max_examples=examples, **SETTINGS)
    @given(words=command_lines())
    def run(words: list[str]) -> None:
        check_command_line(words, name, strict=examples < LONG)
        progress(name)

    return run


def test_command_lines_fuzzed() -> None:
    cli_property(100, "command lines")()


@pytest.mark.slow
@pytest.mark.fuzz
def test_command_lines_fuzzed_long() -> None:
    OUTCOMES.pop("command lines (long)", None)
    cli_property(LONG, "command lines (long)")()
    report("command lines (long)")
