"""The SCM file (counterfair.model.scm_document, counterfair.io.scm_file): JSON and YAML round
trips of every test SCM, SCM.to_dict and SCM.from_dict, the published JSON Schema, and errors
naming the JSON path."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pandas as pd
import pytest
import yaml
from _models import (
    aux_scm,
    families_scm,
    law_level2_scm,
    law_level3_scm,
    linear_gaussian_scm,
    mediation_scm,
)

import counterfair as cf
from counterfair import errors
from counterfair.io.scm_file import check_data_columns
from counterfair.model.scm_document import FORMAT_VERSION, scm_schema

BUILDERS = [aux_scm, families_scm, law_level2_scm, law_level3_scm, linear_gaussian_scm,
            mediation_scm]


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: b.__name__)
@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_round_trip_keeps_graph_specs_and_program(
    builder: object, suffix: str, tmp_path: Path
) -> None:
    scm = builder()  # type: ignore[operator]
    path = cf.write_scm(scm, tmp_path / f"model{suffix}")
    back = cf.read_scm(path)
    assert back.nodes == scm.nodes
    assert back.specs == scm.specs
    assert sorted(back.graph.edges) == sorted(scm.graph.edges)
    assert back.coding == scm.coding
    assert back.stan_code() == scm.stan_code()


@pytest.mark.parametrize("builder", BUILDERS, ids=lambda b: b.__name__)
def test_to_dict_and_from_dict_round_trip(builder: object) -> None:
    scm = builder()  # type: ignore[operator]
    document = scm.to_dict()
    assert json.loads(json.dumps(document)) == document  # JSON-ready
    back = cf.SCM.from_dict(document)
    assert type(back) is cf.SCM
    assert back.specs == scm.specs
    assert sorted(back.graph.edges) == sorted(scm.graph.edges)
    assert back.to_dict() == document


def test_from_dict_names_the_json_path() -> None:
    document = law_level2_scm().to_dict()
    document["nodes"]["LSAT"]["family"] = "poison"
    with pytest.raises(errors.SCMError, match=r"nodes\.LSAT\.family"):
        cf.SCM.from_dict(document)


def test_published_schema_is_the_generated_one() -> None:
    text = resources.files("counterfair").joinpath("scm.schema.json").read_text()
    assert json.loads(text) == scm_schema(), (
        "regenerate counterfair/scm.schema.json: python -c 'import json; from "
        "counterfair.model.scm_document import scm_schema; "
        "print(json.dumps(scm_schema(), indent=2))'"
        " > counterfair/scm.schema.json"
    )


def test_hand_written_yaml(tmp_path: Path) -> None:
    path = tmp_path / "law.yaml"
    path.write_text(
        "nodes:\n"
        "  race: {family: protected}\n"
        "  sex: {family: protected, levels: [Female, Male]}\n"
        "  K: {family: latent}\n"
        "  UGPA: {family: normal, parents: [race, sex, K]}\n"
        "  LSAT: {family: poisson, parents: [race, sex, K],\n"
        "         prior_weights: {family: normal, args: [0, 2.5]}}\n"
    )
    scm = cf.read_scm(path)
    assert scm.observed == ("UGPA", "LSAT")
    assert scm.specs["LSAT"] == cf.Poisson(prior_weights=cf.Prior("normal", (0.0, 2.5)))
    assert scm.parents("LSAT") == ("race", "sex", "K")


def _document() -> dict[str, object]:
    return law_level2_scm().to_dict()


def _read(tmp_path: Path, document: object) -> cf.SCM:
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document))
    return cf.read_scm(path)


def test_unknown_family_names_the_json_path(tmp_path: Path) -> None:
    document = _document()
    document["nodes"]["LSAT"]["family"] = "poison"  # type: ignore[index]
    with pytest.raises(errors.SCMError) as caught:
        _read(tmp_path, document)
    message = str(caught.value)
    assert "model.json" in message
    assert "nodes.LSAT.family: 'poison' is not one of ['protected', 'latent', 'normal'" in message


def test_every_violation_is_listed_with_its_path(tmp_path: Path) -> None:
    document = _document()
    document["nodes"]["UGPA"]["sigma"] = "big"  # type: ignore[index]
    document["nodes"]["K"]["parents"] = ["race"]  # type: ignore[index]
    document["nodes"]["ZFYA"]["prior_weights"] = {"family": "normal"}  # type: ignore[index]
    document["coding"] = "dummy"
    with pytest.raises(errors.SCMError) as caught:
        _read(tmp_path, document)
    message = str(caught.value)
    assert "nodes.UGPA.sigma: 'big' is not of type 'number', 'null'" in message
    assert "nodes.K: Additional properties are not allowed ('parents' was unexpected)" in message
    assert "nodes.ZFYA.prior_weights: 'args' is a required property" in message
    assert "coding: 'dummy' is not one of ['reference', 'onehot']" in message


def test_cycle_is_named(tmp_path: Path) -> None:
    document = _document()
    document["nodes"]["UGPA"]["parents"].append("LSAT")  # type: ignore[index]
    document["nodes"]["LSAT"]["parents"].append("UGPA")  # type: ignore[index]
    with pytest.raises(errors.SCMError, match=r"cycle.*(UGPA|LSAT)"):
        _read(tmp_path, document)


def test_unknown_parent_is_named(tmp_path: Path) -> None:
    document = _document()
    document["nodes"]["LSAT"]["parents"].append("GPA")  # type: ignore[index]
    with pytest.raises(errors.SCMError, match=r"nodes\.LSAT\.parents: 'GPA' is not a node"):
        _read(tmp_path, document)


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    document = _document()
    document["format_version"] = FORMAT_VERSION + 1
    with pytest.raises(errors.SCMError, match=rf"format version {FORMAT_VERSION + 1}.*up to"):
        _read(tmp_path, document)


def test_bad_spec_value_names_the_node(tmp_path: Path) -> None:
    document = _document()
    document["nodes"]["race"]["levels"] = ["White", "White"]  # type: ignore[index]
    with pytest.raises(errors.SCMError, match=r"nodes\.race: protected levels must be distinct"):
        _read(tmp_path, document)


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "model.yaml"
    bad.write_text("nodes: [unclosed\n")
    with pytest.raises(errors.SCMError, match="not valid YAML"):
        cf.read_scm(bad)
    with pytest.raises(errors.SCMError, match="does not exist"):
        cf.read_scm(tmp_path / "none.json")
    other = tmp_path / "model.txt"
    other.write_text("{}")
    with pytest.raises(errors.SCMError, match=r"ends in \.json, \.yaml or \.yml"):
        cf.read_scm(other)
    listed = tmp_path / "list.yaml"
    listed.write_text(yaml.safe_dump([1, 2]))
    with pytest.raises(errors.SCMError, match="is a mapping with 'nodes'"):
        cf.read_scm(listed)


def test_write_does_not_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        cf.write_scm(law_level2_scm(), path)
    assert path.read_text() == "mine"
    cf.write_scm(law_level2_scm(), path, overwrite=True)
    assert cf.read_scm(path).nodes == law_level2_scm().nodes


def test_missing_data_column_is_named() -> None:
    data = pd.DataFrame({"race": ["White"], "sex": ["Male"], "UGPA": [3.0], "ZFYA": [0.1]})
    expected = r"my\.csv has no column for node\(s\) 'LSAT' \(poisson\)"
    with pytest.raises(errors.DataError, match=expected):
        check_data_columns(law_level2_scm(), data.columns, source="my.csv")
    check_data_columns(law_level2_scm(), [*data.columns, "LSAT"])
