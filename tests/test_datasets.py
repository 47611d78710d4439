"""Tests of counterfair.datasets: the law school loader and the data-folder search
(counterfair.datasets._files) that every data set shares.

Tests on the real data read ``law_data.csv`` from ``$COUNTERFAIR_DATA`` (falling back to
``<repo>/../shared/data``) and are skipped if it is absent. No test touches the network: the
download function is replaced by a fake in every test.
"""

from __future__ import annotations

import hashlib
import urllib.error
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _data import DATA_DIR
from _seeds import shifted

from counterfair.datasets import (
    _files,
    default_data_home,
    find_data_file,
    law_school,
    load_adult,
    load_compas,
)
from counterfair.datasets.compas import COMPAS_FILENAME, COMPAS_URL
from counterfair.datasets.law_school import (
    LAW_SCHOOL_COLUMNS,
    LAW_SCHOOL_FILENAME,
    LAW_SCHOOL_SHA256,
    LAW_SCHOOL_URL,
    RACE_LEVELS,
    SEX_LEVELS,
    find_law_school_file,
    law_school_split,
    law_school_subsample,
    load_law_school,
)

# Read at import time, before the autouse fixture below clears the variable for each test.
_SHARED_DIR = DATA_DIR.absolute()
_SHARED_FILE = _SHARED_DIR / LAW_SCHOOL_FILENAME
N_RAW_ROWS = 21_791
N_ROWS = 21_790  # after dropping the region_first == "PO" row

needs_data = pytest.mark.skipif(
    not _SHARED_FILE.is_file(),
    reason=f"{LAW_SCHOOL_FILENAME} not found in {_SHARED_DIR}; set COUNTERFAIR_DATA to its folder",
)


@pytest.fixture(autouse=True)
def cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Empty per-test cache, no COUNTERFAIR_DATA, and no network."""
    cache_base = tmp_path / "xdg_cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_base))
    monkeypatch.delenv("COUNTERFAIR_DATA", raising=False)

    def no_network(url: str, dest: Path, *, timeout: float = 0.0) -> None:
        raise AssertionError(f"a test tried to download {url}")

    monkeypatch.setattr(_files, "_download", no_network)
    return cache_base / "counterfair"


@pytest.fixture(scope="module")
def law_df() -> pd.DataFrame:
    if not _SHARED_FILE.is_file():
        pytest.skip(
            f"{LAW_SCHOOL_FILENAME} not found in {_SHARED_DIR}; set COUNTERFAIR_DATA to its folder"
        )
    return load_law_school(_SHARED_DIR, download=False)


def _write_csv(folder: Path, frame: pd.DataFrame, *, index: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LAW_SCHOOL_FILENAME
    frame.to_csv(path, index=index)
    return path


def _small_raw() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "race": ["White", "Black", "Asian", "Amerindian", "White"],
            "sex": [1, 2, 2, 1, 2],
            "LSAT": [39.0, 36.5, 37.5, 37.6, 30.0],
            "UGPA": [3.1, 3.0, 2.2, 3.4, 3.9],
            "region_first": ["GL", "PO", "NE", "MS", "GL"],
            "ZFYA": [-0.98, 0.09, 0.58, -1.26, 0.5],
            "sander_index": [0.78, 0.73, 0.69, 0.78, 0.8],
            "first_pf": [1, 1, 0, 1, 0],
        }
    )


# ---------------------------------------------------------------- the real data


@needs_data
def test_shared_file_has_published_sha256() -> None:
    assert hashlib.sha256(_SHARED_FILE.read_bytes()).hexdigest() == LAW_SCHOOL_SHA256


def test_rows_and_columns(law_df: pd.DataFrame) -> None:
    assert law_df.shape == (N_ROWS, len(LAW_SCHOOL_COLUMNS))
    assert tuple(law_df.columns) == LAW_SCHOOL_COLUMNS
    assert not any(str(c).startswith("Unnamed") for c in law_df.columns)
    assert isinstance(law_df.index, pd.RangeIndex)
    assert law_df.index.equals(pd.RangeIndex(N_ROWS))
    assert "PO" not in set(law_df["region_first"])
    assert law_df["region_first"].nunique() == 10
    assert not law_df.isna().any().any()


def test_dtypes(law_df: pd.DataFrame) -> None:
    for column in ("LSAT", "first_pf"):
        assert law_df[column].dtype == np.int64, column
    for column in ("UGPA", "ZFYA", "sander_index"):
        assert law_df[column].dtype == np.float64, column
    assert pd.api.types.is_string_dtype(law_df["region_first"])


def test_categories(law_df: pd.DataFrame) -> None:
    race = law_df["race"].dtype
    sex = law_df["sex"].dtype
    assert isinstance(race, pd.CategoricalDtype)
    assert isinstance(sex, pd.CategoricalDtype)
    assert tuple(race.categories) == RACE_LEVELS
    assert tuple(sex.categories) == SEX_LEVELS == ("Female", "Male")
    assert not race.ordered
    assert not sex.ordered
    assert RACE_LEVELS[0] == "White"
    # every level occurs; counts of the raw file minus the dropped (White, male) row
    assert law_df["race"].value_counts()["White"] == 18_284
    assert law_df["race"].value_counts()["Amerindian"] == 99
    assert law_df["sex"].value_counts().to_dict() == {"Male": 12_253, "Female": 9_537}
    assert set(law_df["first_pf"]) == {0, 1}


@needs_data
def test_lsat_is_rounded_raw_score(law_df: pd.DataFrame) -> None:
    raw = pd.read_csv(_SHARED_FILE)
    assert len(raw) == N_RAW_ROWS
    raw = raw[raw["region_first"] != "PO"].reset_index(drop=True)
    assert (raw["LSAT"] % 1 != 0).any()  # the raw scores do have halves
    np.testing.assert_array_equal(law_df["LSAT"].to_numpy(), np.rint(raw["LSAT"]).astype(int))
    assert law_df["LSAT"].between(11, 48).all()
    # the other columns are passed through unchanged
    np.testing.assert_array_equal(law_df["ZFYA"].to_numpy(), raw["ZFYA"].to_numpy())
    np.testing.assert_array_equal(law_df["UGPA"].to_numpy(), raw["UGPA"].to_numpy())
    assert (law_df["sex"] == "Female").to_numpy().tolist() == (raw["sex"] == 1).tolist()
    assert law_df["race"].astype(str).tolist() == raw["race"].tolist()


@needs_data
def test_load_through_env_var_symlink(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    folder = tmp_path / "env_data"
    folder.mkdir()
    (folder / LAW_SCHOOL_FILENAME).symlink_to(_SHARED_FILE)
    monkeypatch.setenv("COUNTERFAIR_DATA", str(folder))
    df = load_law_school(download=False)
    assert len(df) == N_ROWS


# ---------------------------------------------------------------- split / subsample


def test_split_sizes_and_stratification(law_df: pd.DataFrame) -> None:
    df = law_df.assign(row_id=np.arange(len(law_df)))
    train, test = law_school_split(df)
    assert len(test) == 4_358  # ceil(0.2 * 21_790)
    assert len(train) == N_ROWS - 4_358
    assert isinstance(train.index, pd.RangeIndex) and train.index.equals(pd.RangeIndex(len(train)))
    assert isinstance(test.index, pd.RangeIndex) and test.index.equals(pd.RangeIndex(len(test)))
    ids_train, ids_test = set(train["row_id"]), set(test["row_id"])
    assert not ids_train & ids_test
    assert ids_train | ids_test == set(range(N_ROWS))
    overall = df["first_pf"].mean()
    # stratified: each part's pass rate is within one row of the overall rate
    assert abs(train["first_pf"].mean() - overall) <= 1 / len(train)
    assert abs(test["first_pf"].mean() - overall) <= 1 / len(test)
    assert train.drop(columns="row_id").dtypes.equals(law_df.dtypes)
    assert test.drop(columns="row_id").dtypes.equals(law_df.dtypes)


def test_split_reproducible(law_df: pd.DataFrame) -> None:
    a_train, a_test = law_school_split(law_df, seed=shifted(3))
    b_train, b_test = law_school_split(law_df, seed=shifted(3))
    pd.testing.assert_frame_equal(a_train, b_train)
    pd.testing.assert_frame_equal(a_test, b_test)
    _, c_test = law_school_split(law_df, seed=shifted(4))
    assert not a_test.equals(c_test)


def test_split_test_size(law_df: pd.DataFrame) -> None:
    train, test = law_school_split(law_df, test_size=0.5)
    assert len(train) == len(test) == N_ROWS // 2
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="test_size"):
            law_school_split(law_df, test_size=bad)


def test_split_needs_first_pf() -> None:
    with pytest.raises(ValueError, match="first_pf"):
        law_school_split(pd.DataFrame({"x": range(10)}))


def test_subsample(law_df: pd.DataFrame) -> None:
    df = law_df.assign(row_id=np.arange(len(law_df)))
    sub = law_school_subsample(df, 500, seed=shifted(1))
    assert len(sub) == 500
    assert sub.index.equals(pd.RangeIndex(500))
    assert sub["row_id"].is_unique
    assert sub["row_id"].is_monotonic_increasing  # original order kept
    n_fail = int((df["first_pf"] == 0).sum())
    assert (sub["first_pf"] == 0).sum() == round(500 * n_fail / N_ROWS)
    assert sub.dtypes.equals(df.dtypes)
    pd.testing.assert_frame_equal(sub, law_school_subsample(df, 500, seed=shifted(1)))
    assert not sub.equals(law_school_subsample(df, 500, seed=shifted(2)))


def test_subsample_edge_cases(law_df: pd.DataFrame) -> None:
    whole = law_school_subsample(law_df, N_ROWS + 5)
    pd.testing.assert_frame_equal(whole, law_df)
    assert whole is not law_df
    assert len(law_school_subsample(law_df, N_ROWS - 1)) == N_ROWS - 1
    one = law_school_subsample(law_df, 1)
    assert len(one) == 1 and one["first_pf"].item() == 1  # the majority class
    for bad in (0, -3):
        with pytest.raises(ValueError, match="n must be"):
            law_school_subsample(law_df, bad)


def test_subsample_small_frame() -> None:
    df = pd.DataFrame({"first_pf": [1] * 7 + [0] * 3, "x": range(10)})
    sub = law_school_subsample(df, 5, seed=shifted(0))
    assert sorted(sub["first_pf"].tolist()) == [0, 1, 1, 1, 1]  # 3.5 + 1.5 -> 4 + 1 (ties: larger)
    with pytest.raises(ValueError, match="first_pf"):
        law_school_subsample(df.drop(columns="first_pf"), 5)


# ---------------------------------------------------------------- search order


def test_default_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_data_home() == tmp_path / "xdg" / "counterfair"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_data_home() == tmp_path / "home" / ".cache" / "counterfair"
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    assert default_data_home() == tmp_path / "home" / ".cache" / "counterfair"


def test_search_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache_dir: Path) -> None:
    arg_dir, env_dir = tmp_path / "arg", tmp_path / "env"
    for folder in (arg_dir, env_dir, cache_dir):
        folder.mkdir(parents=True)
        (folder / LAW_SCHOOL_FILENAME).write_text(folder.name)
    monkeypatch.setenv("COUNTERFAIR_DATA", str(env_dir))

    # data_home beats the environment variable, which beats the cache
    assert find_law_school_file(arg_dir) == arg_dir / LAW_SCHOOL_FILENAME
    assert find_law_school_file(str(arg_dir)) == arg_dir / LAW_SCHOOL_FILENAME
    assert find_law_school_file() == env_dir / LAW_SCHOOL_FILENAME
    # an existing data_home without the file falls through to the next folder ...
    (tmp_path / "empty").mkdir()
    assert find_law_school_file(tmp_path / "empty") == env_dir / LAW_SCHOOL_FILENAME
    # ... but a data_home that does not exist is an error, never silently skipped
    with pytest.raises(FileNotFoundError, match="does not exist"):
        find_law_school_file(tmp_path / "missing")
    monkeypatch.delenv("COUNTERFAIR_DATA")
    assert find_law_school_file() == cache_dir / LAW_SCHOOL_FILENAME
    # data_home may also be the file itself
    assert find_law_school_file(arg_dir / LAW_SCHOOL_FILENAME) == arg_dir / LAW_SCHOOL_FILENAME


@needs_data
def test_data_home_beats_env_var_on_load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / LAW_SCHOOL_FILENAME).symlink_to(_SHARED_FILE)
    small = _small_raw()
    _write_csv(tmp_path / "small", small)
    monkeypatch.setenv("COUNTERFAIR_DATA", str(tmp_path / "small"))
    assert len(load_law_school(real, download=False)) == N_ROWS
    assert len(load_law_school(download=False)) == len(small) - 1


def test_one_search_for_every_data_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache_dir: Path
) -> None:
    # Adult and COMPAS files are looked for where law_data.csv is: data_home, $COUNTERFAIR_DATA,
    # then the per-user cache
    env_dir = tmp_path / "env"
    for folder in (env_dir, cache_dir):
        folder.mkdir(parents=True)
        (folder / "adult.data").write_text(folder.name)
    monkeypatch.setenv("COUNTERFAIR_DATA", str(env_dir))
    assert find_data_file("adult.data") == env_dir / "adult.data"
    monkeypatch.delenv("COUNTERFAIR_DATA")
    assert find_data_file("adult.data") == cache_dir / "adult.data"
    # a single-file data set's data_home may be the file itself
    compas = tmp_path / "mine.csv"
    compas.write_text("x")
    assert find_data_file(COMPAS_FILENAME, compas, url=COMPAS_URL) == compas


def test_not_found_without_download(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the autouse fixture makes any download attempt fail the test
    env_dir = tmp_path / "env"
    monkeypatch.setenv("COUNTERFAIR_DATA", str(env_dir))
    with pytest.raises(FileNotFoundError, match=r"not found\. Folders searched: ") as info:
        find_data_file(COMPAS_FILENAME, tmp_path, url=COMPAS_URL)
    message = str(info.value)
    for folder in (tmp_path, env_dir, default_data_home()):
        assert str(folder) in message
    assert "$COUNTERFAIR_DATA" in message
    assert COMPAS_URL in message
    assert "download=False" not in message  # COMPAS is never downloaded
    with pytest.raises(ValueError, match="sha256"):
        find_data_file(COMPAS_FILENAME, url=COMPAS_URL, download=True)


def test_tabular_loaders_check_data_home(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_compas(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_adult(tmp_path / "missing")
    (tmp_path / "adult.data").write_text("x")
    with pytest.raises(FileNotFoundError, match="is a file"):
        load_adult(tmp_path / "adult.data")  # two files: data_home must be their folder
    with pytest.raises(FileNotFoundError, match=r"adult\.test not found"):
        load_adult(tmp_path)


# ---------------------------------------------------------------- download path (no network)


def test_found_file_is_not_downloaded(tmp_path: Path) -> None:
    # the autouse fixture makes any download attempt fail the test
    (tmp_path / LAW_SCHOOL_FILENAME).write_text("x")
    assert find_law_school_file(tmp_path) == tmp_path / LAW_SCHOOL_FILENAME


def test_download_disabled(tmp_path: Path) -> None:
    (tmp_path / "nowhere").mkdir()  # an existing folder without the file
    with pytest.raises(FileNotFoundError, match="download=False") as info:
        find_law_school_file(tmp_path / "nowhere", download=False)
    message = str(info.value)
    assert str(tmp_path / "nowhere") in message
    assert str(default_data_home()) in message
    assert LAW_SCHOOL_URL in message


def test_offline_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, cache_dir: Path) -> None:
    calls: list[str] = []

    def offline(url: str, dest: Path, *, timeout: float = 0.0) -> None:
        calls.append(url)
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(_files, "_download", offline)
    arg_dir, env_dir = tmp_path / "arg", tmp_path / "env"
    arg_dir.mkdir()  # exists, without the file (a missing data_home is its own error)
    monkeypatch.setenv("COUNTERFAIR_DATA", str(env_dir))
    with pytest.raises(FileNotFoundError) as info:
        load_law_school(arg_dir)
    assert calls == [LAW_SCHOOL_URL]
    assert isinstance(info.value.__cause__, urllib.error.URLError)
    message = str(info.value)
    for folder in (arg_dir, env_dir, cache_dir):
        assert str(folder) in message
    assert LAW_SCHOOL_FILENAME in message
    assert LAW_SCHOOL_URL in message
    assert "COUNTERFAIR_DATA" in message
    assert "name resolution" in message
    # nothing left behind in the cache
    assert list(cache_dir.iterdir()) == []


def test_download_timeout_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(url: str, dest: Path, *, timeout: float = 0.0) -> None:
        assert 0 < timeout <= 60
        dest.write_bytes(b"partial")
        raise TimeoutError("timed out")

    monkeypatch.setattr(_files, "_download", slow)
    with pytest.raises(FileNotFoundError, match="timed out"):
        find_law_school_file()
    assert list(default_data_home().iterdir()) == []


def test_sha256_mismatch_deletes_download(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    def wrong_file(url: str, dest: Path, *, timeout: float = 0.0) -> None:
        dest.write_bytes(b"<html>not the data</html>")

    monkeypatch.setattr(_files, "_download", wrong_file)
    with pytest.raises(FileNotFoundError, match="sha256") as info:
        find_law_school_file()
    assert LAW_SCHOOL_SHA256 in str(info.value)
    assert not (cache_dir / LAW_SCHOOL_FILENAME).exists()
    assert list(cache_dir.iterdir()) == []


def test_download_success(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    content = _small_raw().to_csv().encode()

    def fake(url: str, dest: Path, *, timeout: float = 0.0) -> None:
        dest.write_bytes(content)

    monkeypatch.setattr(_files, "_download", fake)
    monkeypatch.setattr(law_school, "LAW_SCHOOL_SHA256", hashlib.sha256(content).hexdigest())
    df = load_law_school()
    assert len(df) == len(_small_raw()) - 1
    target = cache_dir / LAW_SCHOOL_FILENAME
    assert target.read_bytes() == content
    assert list(cache_dir.iterdir()) == [target]
    # a second call finds the cached copy without downloading
    monkeypatch.setattr(_files, "_download", None)
    assert find_law_school_file() == target


@needs_data
def test_download_success_real_checksum(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    def fake(url: str, dest: Path, *, timeout: float = 0.0) -> None:
        dest.write_bytes(_SHARED_FILE.read_bytes())

    monkeypatch.setattr(_files, "_download", fake)
    assert find_law_school_file() == cache_dir / LAW_SCHOOL_FILENAME


# ---------------------------------------------------------------- validation on small files


def test_small_file_preprocessing(tmp_path: Path) -> None:
    _write_csv(tmp_path, _small_raw())
    df = load_law_school(tmp_path, download=False)
    assert tuple(df.columns) == LAW_SCHOOL_COLUMNS
    assert df.index.equals(pd.RangeIndex(4))
    assert df["region_first"].tolist() == ["GL", "NE", "MS", "GL"]
    assert df["LSAT"].tolist() == [39, 38, 38, 30]  # 37.5 -> 38 (half to even), 37.6 -> 38
    assert df["sex"].astype(str).tolist() == ["Female", "Male", "Female", "Male"]
    assert df["race"].astype(str).tolist() == ["White", "Asian", "Amerindian", "White"]
    assert tuple(df["race"].cat.categories) == RACE_LEVELS


def test_rounding_half_to_even(tmp_path: Path) -> None:
    raw = _small_raw().assign(LSAT=[36.5, 36.5, 37.5, 38.5, 11.0], region_first="GL")
    _write_csv(tmp_path, raw, index=False)  # also works without the index column
    assert load_law_school(tmp_path, download=False)["LSAT"].tolist() == [36, 36, 38, 38, 11]


@pytest.mark.parametrize("column", LAW_SCHOOL_COLUMNS)
def test_missing_column_is_named(tmp_path: Path, column: str) -> None:
    _write_csv(tmp_path, _small_raw().drop(columns=column))
    with pytest.raises(ValueError, match=rf"lacks.*'{column}'"):
        load_law_school(tmp_path, download=False)


@pytest.mark.parametrize(
    ("column", "value"),
    [("race", "Martian"), ("sex", 3), ("first_pf", 2)],
)
def test_unknown_level_is_named(tmp_path: Path, column: str, value: object) -> None:
    raw = _small_raw()
    raw[column] = raw[column].astype(object)
    raw.loc[0, column] = value
    _write_csv(tmp_path, raw)
    with pytest.raises(ValueError, match=rf"'{column}'.*{value}"):
        load_law_school(tmp_path, download=False)


def test_missing_value_is_named(tmp_path: Path) -> None:
    raw = _small_raw()
    raw.loc[2, "LSAT"] = np.nan
    _write_csv(tmp_path, raw)
    with pytest.raises(ValueError, match=r"'LSAT'.*missing"):
        load_law_school(tmp_path, download=False)
