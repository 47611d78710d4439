"""Warnings name the user's line however many stages a call goes through."""

from __future__ import annotations

import warnings

from counterfair.logs import user_stacklevel


def _inner_warns() -> None:
    warnings.warn("from inside", UserWarning, stacklevel=user_stacklevel())


def test_a_function_outside_the_package_is_its_own_caller() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _inner_warns()  # this file is not counterfair's: the warning points at _inner_warns
    assert caught[0].filename == __file__
    assert caught[0].lineno == _inner_warns.__code__.co_firstlineno + 1
