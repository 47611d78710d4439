"""The row-keyed generator against an independent reference (tools/mutation.py, module rng).

A pure-Python splitmix64, written from the published constants, gives every bit
:class:`RowRandom` should draw; the distributions are checked against scipy's quantile
functions at the same uniforms; the argument checks are checked one by one.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from _seeds import shifted
from scipy import special, stats

from counterfair import rng
from counterfair.rng import RowRandom, label_key

MASK = (1 << 64) - 1


def splitmix64(x: int) -> int:
    """The splitmix64 finaliser (Steele, Lea and Flood 2014), in Python integers."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def reference_bits(seed: int, stream: int, call: int, position: int, element: int) -> int:
    key = splitmix64(splitmix64(splitmix64(seed & MASK) ^ stream) ^ call)
    row_key = splitmix64(key ^ ((position * 0x9E3779B97F4A7C15) & MASK))
    return splitmix64(((element * 0xD1B54A32D192ED03) & MASK) ^ row_key)


def reference_uniform(bits: int) -> float:
    return ((bits >> 11) + 0.5) * 2.0**-53


def test_mix_matches_the_reference_across_blocks() -> None:
    """The in-place finaliser on more values than one block (2**16) matches, value by value."""
    gen = np.random.default_rng(shifted(11))
    n = (1 << 16) + 37
    x = gen.integers(0, 2**63, size=n, dtype=np.uint64) * np.uint64(2)
    x[:3] = [0, 1, np.uint64(MASK)]
    mixed = rng._mix(x)
    assert mixed.dtype == np.uint64 and mixed.shape == x.shape
    for i in [0, 1, 2, 3, 1000, (1 << 16) - 1, 1 << 16, n - 1]:
        assert int(mixed[i]) == splitmix64(int(x[i])), i
    # _mix copies: the input is unchanged
    assert int(x[1]) == 1
    # a 2-D array is mixed in place, element by element
    y = x[:12].reshape(3, 4).copy()
    rng._mix_inplace(y)
    assert [int(v) for v in y.ravel()] == [splitmix64(int(v)) for v in x[:12]]
    assert rng._mix_int(-1) == splitmix64(MASK)
    assert rng._mix_int(5) == splitmix64(5)


def test_label_key_is_blake2b_of_the_repr() -> None:
    for label in [("u",), ("node", 3), (), "x", 7]:
        digest = hashlib.blake2b(repr(label).encode("utf-8"), digest_size=8).digest()
        assert label_key(label) == int.from_bytes(digest, "little")
    assert label_key(("a",)) != label_key(("b",))
    assert label_key("é") == int.from_bytes(
        hashlib.blake2b("'é'".encode(), digest_size=8).digest(), "little")


@pytest.mark.parametrize("row_axis", [None, 0, 1, -1, -2])
def test_bits_and_uniforms_match_the_reference(row_axis: int | None) -> None:
    seed = shifted(2024)
    positions = np.array([0, 5, 3, 1_000_003])
    rr = RowRandom(seed, positions)
    rr.random(4)  # call 0
    axis = 1 if row_axis in (None, 1, -1) else 0
    shape = (3, 4) if axis == 1 else (4, 3)
    u = rr.random(shape, row_axis=row_axis)  # call 1
    assert u.shape == shape and u.dtype == np.float64
    for r, position in enumerate(positions):
        for e in range(3):
            got = u[e, r] if axis == 1 else u[r, e]
            want = reference_uniform(reference_bits(seed, 0, 1, int(position), e))
            assert got == want


def test_three_axes_flatten_the_other_axes_in_c_order() -> None:
    seed = shifted(5)
    rr = RowRandom(seed, np.array([2, 9]))
    u = rr.random((3, 2, 2), row_axis=1)
    for a in range(3):
        for r, position in enumerate([2, 9]):
            for b in range(2):
                want = reference_uniform(reference_bits(seed, 0, 0, position, a * 2 + b))
                assert u[a, r, b] == want


def test_child_streams_and_negative_seeds() -> None:
    seed = -shifted(3)
    parent = RowRandom(seed, np.arange(3))
    parent.random(3)
    child = parent.child("noise", 2)
    stream = splitmix64(0 ^ splitmix64(label_key(("noise", 2))))
    u = child.random(3)
    assert [float(v) for v in u] == [
        reference_uniform(reference_bits(seed, stream, 0, p, 0)) for p in range(3)]
    grandchild = child.child("x")
    stream2 = splitmix64(stream ^ splitmix64(label_key(("x",))))
    assert grandchild.random(3)[1] == reference_uniform(reference_bits(seed, stream2, 0, 1, 0))
    assert parent.child("noise", 2).random(3).tolist() == u.tolist()
    assert hex(stream) in repr(child) and "rows=3" in repr(child)
    assert repr(RowRandom(4, np.arange(2))) == "RowRandom(seed=4, rows=2, stream=0x0)"


def test_stream_is_masked_to_64_bits() -> None:
    rr = RowRandom(1, np.arange(2), _stream=-1)
    assert rr._stream == MASK
    assert rr.random(2)[0] == reference_uniform(reference_bits(1, MASK, 0, 0, 0))


def test_calls_count_and_take_keeps_the_counter() -> None:
    seed = shifted(8)
    rr = RowRandom.for_rows(seed, 6, start=10)
    assert rr.positions.tolist() == list(range(10, 16))
    assert rr.positions.dtype == np.int64 and len(rr) == 6
    first = rr.random()
    assert first.shape == (6,)
    assert first[0] == reference_uniform(reference_bits(seed, 0, 0, 10, 0))
    mask = np.array([True, False, True, False, False, True])
    sub = rr.take(mask)
    assert sub.positions.tolist() == [10, 12, 15]
    second_sub = sub.random(3)
    second = rr.random(6)
    assert second_sub.tolist() == second[mask].tolist()
    assert second[0] == reference_uniform(reference_bits(seed, 0, 1, 10, 0))
    third = rr.take(slice(1, 3)).random(2)
    assert third[0] == reference_uniform(reference_bits(seed, 0, 2, 11, 0))
    tail = rr.take([4, 5])
    assert tail._calls == rr._calls and tail._stream == rr._stream and tail.seed == seed


def test_seed_none_draws_a_full_64_bit_seed() -> None:
    seeds = {RowRandom(None, np.arange(1)).seed for _ in range(12)}
    assert len(seeds) == 12
    assert all(isinstance(s, int) and 0 <= s < 2**64 for s in seeds)
    assert max(seeds) >= 2**32  # both 32-bit words are used
    s = rng._random_seed()
    assert isinstance(s, int) and 0 <= s < 2**64


def test_argument_checks() -> None:
    with pytest.raises(TypeError, match="seed must be an integer or None"):
        RowRandom(True, np.arange(2))
    with pytest.raises(TypeError, match="seed must be an integer"):
        RowRandom(1.5, np.arange(2))  # type: ignore[arg-type]
    assert RowRandom(np.int64(3), np.arange(2)).seed == 3
    with pytest.raises(ValueError, match="1-D array of integer row positions"):
        RowRandom(1, np.arange(4).reshape(2, 2))
    with pytest.raises(ValueError, match="1-D array of integer row positions"):
        RowRandom(1, np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="must be non-negative"):
        RowRandom(1, np.array([0, -1]))
    assert len(RowRandom(1, np.array([], dtype=float))) == 0
    assert RowRandom(1, np.array([3], dtype=np.uint32)).positions.tolist() == [3]
    rr = RowRandom(1, np.arange(3))
    with pytest.raises(ValueError, match="need a shape with a row axis"):
        rr.random(())
    with pytest.raises(ValueError, match="row_axis 2 is out of range for shape"):
        rr.random((3, 3), row_axis=2)
    with pytest.raises(ValueError, match="row_axis -1 is out of range"):
        rr.random((3, 3), row_axis=-3)
    with pytest.raises(ValueError, match=r"shape \(2,\) has 2 rows on axis 0, but this "
                       r"RowRandom draws for 3 rows"):
        rr.random(2)
    with pytest.raises(ValueError, match="only draws Bernoulli"):
        rr.binomial(2, 0.5, size=3)
    with pytest.raises(ValueError, match="only draws with replacement"):
        rr.choice(3, size=3, replace=False)
    with pytest.raises(ValueError, match="cannot choose from an empty array"):
        rr.choice([], size=3)
    assert rr._calls == 0  # failed draws do not count


def _pair(seed: int, n: int = 5) -> tuple[RowRandom, RowRandom]:
    return RowRandom.for_rows(seed, n), RowRandom.for_rows(seed, n)


def test_distributions_are_quantiles_of_the_uniforms() -> None:
    seed = shifted(17)
    a, b = _pair(seed)
    assert a.standard_normal().tolist() == special.ndtri(b.random()).tolist()
    a, b = _pair(seed)
    assert np.allclose(a.gumbel(2.0, 3.0, size=5), 2.0 - 3.0 * np.log(-np.log(b.random(5))))
    a, b = _pair(seed)
    assert np.allclose(a.gumbel(size=5), -np.log(-np.log(b.random(5))))
    a, b = _pair(seed)
    p = np.array([0.0, 0.3, 0.5, 0.9, 1.0])
    got = a.binomial(1, p)
    assert got.dtype == np.int64
    assert got.tolist() == (b.random(5) < p).astype(int).tolist()
    a, b = _pair(seed)
    got = a.binomial(1, 0.5, size=(2, 5))
    assert got.tolist() == (b.random((2, 5)) < 0.5).astype(int).tolist()
    a, b = _pair(seed)
    shape_, scale = np.array([0.5, 1.0, 2.0, 7.5, 30.0]), np.array([1.0, 2.0, 0.5, 1.0, 3.0])
    assert np.allclose(a.gamma(shape_, scale),
                       stats.gamma.ppf(b.random(5), shape_, scale=scale), rtol=1e-9)
    a, b = _pair(seed)
    assert np.allclose(a.gamma(2.0, size=5), stats.gamma.ppf(b.random(5), 2.0), rtol=1e-9)
    a, b = _pair(seed)
    assert np.allclose(a.gamma(2.0, 3.0, size=(2, 5)),
                       stats.gamma.ppf(b.random((2, 5)), 2.0, scale=3.0), rtol=1e-9)


def test_poisson_is_the_exact_quantile() -> None:
    seed = shifted(23)
    lam = np.array([np.nan, 0.0, 0.01, 0.7, 3.0, 25.0, 400.0, -1.0])
    a, b = _pair(seed, 8)
    got = a.poisson(lam)
    u = b.random(8)
    want = stats.poisson.ppf(u, np.where(lam > 0, lam, 1.0))
    want[~(lam > 0)] = 0.0
    want[0] = np.nan
    assert np.isnan(got[0]) and np.array_equal(got[1:], want[1:])
    a, b = _pair(seed, 8)
    assert a.poisson(size=8).tolist() == stats.poisson.ppf(b.random(8), 1.0).tolist()
    a, b = _pair(seed, 8)
    assert a.poisson(2.0, size=(3, 8)).tolist() == stats.poisson.ppf(
        b.random((3, 8)), 2.0).tolist()


def test_poisson_quantile_on_a_grid() -> None:
    """Every (u, lam) on a grid, including u at the CDF's own steps, is stepped exactly."""
    lam_values = np.array([0.05, 0.5, 1.0, 2.5, 9.0, 60.0, 1000.0])
    u_values = np.array([1e-12, 1e-4, 0.01, 0.2, 0.5, 0.8, 0.99, 1 - 1e-9])
    lam, u = (g.ravel() for g in np.meshgrid(lam_values, u_values))
    got = rng._poisson_quantile(u.copy(), lam.copy())
    assert got.tolist() == stats.poisson.ppf(u, lam).tolist()
    # u exactly at a CDF value: the quantile is that k, not k + 1
    for lam1 in [0.5, 4.0, 30.0]:
        ks = np.arange(0.0, 3 * lam1 + 10)
        cdf = special.pdtr(ks, np.full_like(ks, lam1))
        keep = cdf < 1.0
        got = rng._poisson_quantile(cdf[keep].copy(), np.full(keep.sum(), lam1))
        assert got.tolist() == ks[keep].tolist()


def test_choice_indexes_the_pool_by_the_uniform() -> None:
    seed = shifted(31)
    a, b = _pair(seed, 6)
    pool = np.array([10, 20, 30])
    got = a.choice(pool, size=6)
    assert got.tolist() == pool[np.floor(b.random(6) * 3).astype(int)].tolist()
    a, b = _pair(seed, 6)
    assert a.choice(4, size=(2, 6)).tolist() == np.floor(b.random((2, 6)) * 4).astype(
        int).tolist()
    assert RowRandom.for_rows(seed, 6).choice([7], size=6).tolist() == [7] * 6


def test_uniform_extremes_are_inside_the_open_interval() -> None:
    """The all-zero and all-one bit patterns give 2**-54 and 1 - 2**-54."""
    assert reference_uniform(0) == 2.0**-54
    assert reference_uniform(MASK) == 1.0 - 2.0**-54
    u = RowRandom.for_rows(shifted(1), 1000).random(1000)
    assert (u > 0).all() and (u < 1).all()
    assert abs(u.mean() - 0.5) < 0.05


def test_every_distribution_passes_size_and_row_axis_on() -> None:
    """Rows on axis 0 of an (N, 2) draw: each method reads the uniforms laid out so."""
    seed, n = shifted(41), 4

    def pair() -> tuple[RowRandom, np.ndarray]:
        u = RowRandom.for_rows(seed, n).random((n, 2), row_axis=0)
        return RowRandom.for_rows(seed, n), u

    rr, u = pair()
    assert rr.standard_normal((n, 2), row_axis=0).tolist() == special.ndtri(u).tolist()
    rr, u = pair()
    np.testing.assert_allclose(rr.gumbel(1.0, 2.0, (n, 2), row_axis=0),
                               1.0 - 2.0 * np.log(-np.log(u)))
    rr, u = pair()
    p = np.full((n, 2), 0.5)
    assert rr.binomial(1, p, row_axis=0).tolist() == (u < 0.5).astype(int).tolist()
    rr, u = pair()
    assert rr.poisson(np.full((n, 2), 3.0), row_axis=0).tolist() == stats.poisson.ppf(
        u, 3.0).tolist()
    rr, u = pair()
    np.testing.assert_allclose(rr.gamma(np.full((n, 2), 2.0), 1.5, row_axis=0),
                               stats.gamma.ppf(u, 2.0, scale=1.5), rtol=1e-9)
    rr, u = pair()
    assert rr.choice(5, (n, 2), row_axis=0).tolist() == np.floor(u * 5).astype(int).tolist()
    rr, u = pair()
    assert rr.random((n, 2), row_axis=0).tolist() == u.tolist()


def test_error_messages_are_exact() -> None:
    rr = RowRandom(1, np.arange(3))
    for call, message in [
        (lambda: rr.binomial(2, 0.5, size=3),
         "RowRandom.binomial only draws Bernoulli variables (n=1)"),
        (lambda: rr.choice(3, size=3, replace=False),
         "RowRandom.choice only draws with replacement"),
        (lambda: rr.choice([], size=3), "cannot choose from an empty array"),
        (lambda: rr.random(()), "RowRandom draws need a shape with a row axis"),
        (lambda: rr.random((3, 3), row_axis=5),
         "row_axis 5 is out of range for shape (3, 3)"),
        (lambda: RowRandom(1, np.array([0, -1])), "row positions must be non-negative"),
        (lambda: RowRandom(1, np.zeros((1, 1), dtype=int)),
         "positions must be a 1-D array of integer row positions"),
    ]:
        with pytest.raises(ValueError) as info:
            call()
        assert str(info.value) == message
    with pytest.raises(TypeError) as type_info:
        RowRandom("1", np.arange(2))  # type: ignore[arg-type]
    assert str(type_info.value) == "seed must be an integer or None, got '1'"


def test_take_of_a_child_keeps_its_stream() -> None:
    seed = shifted(44)
    child = RowRandom.for_rows(seed, 5).child("x")
    sub = child.take(np.array([1, 3]))
    assert sub._stream == child._stream
    assert sub.random(2).tolist() == child.random(5)[[1, 3]].tolist()
