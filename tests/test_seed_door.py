"""Every seed of the suite goes through one door, ``_seeds.shifted``.

``COUNTERFAIR_TEST_SEED_SHIFT`` moves the whole suite to other random draws only if no
test, fixture or helper passes a literal seed. This module reads the test sources as
Python tokens and fails on a literal seed that bypasses :func:`_seeds.shifted`:

* ``seed=3`` / ``random_state=3`` keyword arguments and ``seed: int = 3`` defaults;
* module constants named ``*_SEED = 3``;
* ``default_rng(3)`` / ``RandomState(3)``, and unseeded ``default_rng()`` /
  ``np.random.seed(...)`` (global state, never reproducible under a shift).

A line that must keep its literal (a test of an error message that quotes a seed, say)
says so with a ``# literal seed: <reason>`` comment.
"""

from __future__ import annotations

import io
import tokenize
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SEED_NAMES = {"seed", "random_state"}
RNG_CALLS = {"default_rng", "RandomState"}


def literal_seeds(source: str) -> list[tuple[int, str]]:
    """(line, reason) of every literal seed in ``source`` that bypasses ``shifted``."""
    tokens = [
        t for t in tokenize.generate_tokens(io.StringIO(source).readline)
        if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.NEWLINE)
    ]
    lines = source.splitlines()
    found: list[tuple[int, str]] = []
    for i, token in enumerate(tokens):
        before = [tokens[i - k].string if i >= k else "" for k in (1, 2, 3, 4)]
        after = tokens[i + 1].string if i + 1 < len(tokens) else ""
        reason = ""
        if token.type == tokenize.NUMBER and before[0] == "=":
            if before[1] in SEED_NAMES or before[1].endswith("_SEED"):
                reason = f"{before[1]}={token.string}"
            elif before[2] == ":" and before[3] in SEED_NAMES:
                reason = f"{before[3]}: ... = {token.string}"
        elif token.type == tokenize.NUMBER and before[0] == "(" and before[1] in RNG_CALLS:
            reason = f"{before[1]}({token.string})"
        elif token.string in RNG_CALLS and after == "(" and i + 2 < len(tokens) \
                and tokens[i + 2].string == ")":
            reason = f"unseeded {token.string}()"
        elif token.string == "seed" and before[0] == "." and before[1] == "random":
            reason = "global numpy/random seed"
        if reason and "literal seed" not in lines[token.start[0] - 1]:
            found.append((token.start[0], reason))
    return found


def test_no_literal_seed_in_the_suite() -> None:
    offenders = [
        f"{path.name}:{line}: {reason}"
        for path in sorted(TESTS.glob("*.py"))
        if path.name not in {"_seeds.py", Path(__file__).name}
        for line, reason in literal_seeds(path.read_text())
    ]
    assert not offenders, "seeds that bypass _seeds.shifted:\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("fit(data, seed=3)\n", ["seed=3"]),
        ("m = RandomForestClassifier(random_state=0)\n", ["random_state=0"]),
        ("LAW_FIT_SEED = 1\n", ["LAW_FIT_SEED=1"]),
        ("def f(seed: int = 0):\n    pass\n", ["seed: ... = 0"]),
        ("rng = np.random.default_rng(5)\n", ["default_rng(5)"]),
        ("rng = np.random.default_rng()\n", ["unseeded default_rng()"]),
        ("np.random.seed(4)\n", ["global numpy/random seed"]),
        ("fit(data, seed=shifted(3))\n", []),
        ("rng = np.random.default_rng(shifted(5))\n", []),
        ("fit(data, seed=seed)\n", []),
        ("fit(data, seed=3)  # literal seed: the message quotes it\n", []),
        ('match = "seed=3 would be ignored"\n', []),
    ],
)
def test_the_check_finds_literal_seeds(source: str, expected: list[str]) -> None:
    assert [reason for _, reason in literal_seeds(source)] == expected
