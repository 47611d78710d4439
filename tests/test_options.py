"""The chunk-size option: set globally or in a block, and refused when it cannot fit."""

from __future__ import annotations

import doctest

import pytest

import counterfair as cf
from counterfair import options


def test_docstring_examples_run() -> None:
    assert doctest.testmod(options, raise_on_error=True).attempted > 0


def test_block_restores_the_previous_value() -> None:
    before = cf.get_options()["chunk_bytes"]
    with cf.set_options(chunk_bytes=2**20):
        assert options.chunk_bytes() == 2**20
        assert options.chunk_rows(1024, 10**6) == 1024
    assert cf.get_options()["chunk_bytes"] == before


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (10, "below the minimum"),
        (2**62, "cannot fit in memory"),
        (1.5e6, "integer number of bytes"),
        (True, "integer number of bytes"),
    ],
)
def test_refused_chunk_sizes(value: object, message: str) -> None:
    before = cf.get_options()
    with pytest.raises(ValueError, match=message):
        cf.set_options(chunk_bytes=value)
    assert cf.get_options() == before


def test_unknown_option_is_named() -> None:
    with pytest.raises(ValueError, match="chunk_size"):
        cf.set_options(chunk_size=10)


def test_chunk_rows_is_at_least_one_row() -> None:
    assert options.chunk_rows(1e12, 5) == 1
    assert options.chunk_rows(8, 0) == 1
