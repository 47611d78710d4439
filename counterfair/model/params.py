"""Sets of structural parameter values: posterior draws, their mean, or user values."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from counterfair import errors
from counterfair.model.equation import ObservedTerm

if TYPE_CHECKING:
    from counterfair.model.scm import SCM


@dataclass(frozen=True)
class ParamDraws(Mapping[str, np.ndarray]):
    """``S`` sets of values of every structural parameter.

    Each value is an array whose first axis has length ``S``: shape ``(S,)`` for
    a scalar parameter, ``(S, k)`` for a vector one (a protected parent's level
    effects).

    Attributes
    ----------
    arrays : dict of str to numpy.ndarray
        The arrays, by parameter name.
    """

    arrays: Mapping[str, np.ndarray]

    def __post_init__(self) -> None:
        sizes = {v.shape[0] for v in self.arrays.values()}
        if len(sizes) > 1:
            raise ValueError(f"parameter arrays disagree on the number of sets: {sorted(sizes)}")

    @property
    def n(self) -> int:
        """Number of parameter sets ``S``."""
        return next(iter(self.arrays.values())).shape[0] if self.arrays else 1

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.arrays)

    def __len__(self) -> int:
        return len(self.arrays)

    def mean(self) -> ParamDraws:
        """One set: the mean of every parameter over the sets."""
        return ParamDraws({k: v.mean(axis=0, keepdims=True) for k, v in self.arrays.items()})

    def take(self, indices: np.ndarray) -> ParamDraws:
        """The sets at ``indices`` (with repetition allowed)."""
        idx = np.asarray(indices, dtype=np.int64)
        return ParamDraws({k: v[idx] for k, v in self.arrays.items()})

    @classmethod
    def from_posterior(cls, posterior: Any, names: list[str]) -> ParamDraws:
        """Stack chains and draws of an arviz posterior group into ``S`` sets.

        The arrays are C-contiguous whatever the memory layout of the posterior
        (a back end's output or a netCDF file), so that the same draws give the
        same numbers to the last bit (a strided matrix product sums in another order).
        """
        out: dict[str, np.ndarray] = {}
        for name in names:
            array = np.asarray(posterior[name].values, dtype=float)
            stacked = array.reshape(array.shape[0] * array.shape[1], *array.shape[2:])
            out[name] = np.ascontiguousarray(stacked)
        return cls(out)

    @classmethod
    def from_values(
        cls, scm: SCM, values: Mapping[str, Any], n_levels: Mapping[str, int]
    ) -> ParamDraws:
        """One set of user-given values, checked against the SCM's parameters.

        Parameters
        ----------
        scm : SCM
            The model whose parameters are given.
        values : mapping
            Value of every parameter by name (extra names are an error).
        n_levels : mapping
            Number of levels of each protected node (sizes of level-effect vectors).
        """
        expected = scm.parameter_names()
        missing = [name for name in expected if name not in values]
        if missing:
            raise errors.SCMError(f"parameter value(s) missing: {missing}; expected {expected}")
        extra = [name for name in values if name not in expected]
        if extra:
            raise errors.SCMError(f"unknown parameter name(s) {extra}; expected {expected}")
        out: dict[str, np.ndarray] = {}
        drop = 1 if scm.coding == "reference" else 0
        for eq in scm.equations.values():
            if eq.family.declares_coefficients:  # shapes come from the family below
                continue
            for term in eq.protected:
                if term.continuous:
                    continue
                array = np.atleast_1d(np.asarray(values[term.param], dtype=float))
                size = n_levels[term.parent] - drop
                if array.shape != (size,):
                    raise errors.SCMError(
                        f"parameter {term.param!r} needs {size} value(s) (levels of "
                        f"{term.parent!r}{' other than the reference' if drop else ''}), "
                        f"got shape {array.shape}"
                    )
                out[term.param] = array[None, :]
        for oterm in _level_terms(scm):
            array = np.atleast_1d(np.asarray(values[oterm.param], dtype=float))
            size = int(oterm.levels or 0) - 1
            if array.shape != (size,):
                raise errors.SCMError(
                    f"parameter {oterm.param!r} needs {size} value(s) (levels of "
                    f"{oterm.parent!r} above the lowest), got shape {array.shape}"
                )
            out[oterm.param] = array[None, :]
        counts = dict(n_levels)
        for eq in scm.equations.values():
            levels = eq.family.n_levels(eq.spec)
            if levels is not None:
                counts[eq.node] = levels
        for eq in scm.equations.values():
            sizes = {t.param: t.n_columns(counts) for t in eq.bending}
            for t in eq.bending:
                for name in t.numpy_names():  # a group effect's sds
                    sizes[name] = 1 + len(getattr(t.term, "slopes", ()))
            if eq.loading_by is not None:
                sizes.update(
                    {t.by_param: counts[eq.loading_by.name] - 1 for t in eq.latent if t.by_param}
                )
            per_level = eq.family.declares_coefficients and eq.node in counts
            for name, size in sizes.items():
                array = np.atleast_1d(np.asarray(values[name], dtype=float))
                weights = {t.param for t in eq.bending} | {t.by_param for t in eq.latent}
                shape: tuple[int, ...] = (
                    (size, counts[eq.node] - 1) if per_level and name in weights else (size,)
                )
                if array.shape != shape:
                    raise errors.SCMError(
                        f"parameter {name!r} needs {size} value(s), got shape {array.shape}"
                    )
                out[name] = array[None, ...]
        for eq in scm.equations.values():
            widths = {node: count - drop for node, count in n_levels.items()}
            for name, shape in eq.family.parameter_shapes(eq, widths).items():
                if shape == ():
                    continue
                array = np.atleast_1d(np.asarray(values[name], dtype=float))
                if array.shape != shape:
                    count = shape[0] if len(shape) == 1 else f"{shape} array of"
                    raise errors.SCMError(
                        f"parameter {name!r} needs {count} value(s), got shape {array.shape}"
                    )
                out[name] = array[None, ...]
        for name in expected:
            if name in out:
                continue
            array = np.asarray(values[name], dtype=float)
            if array.size != 1:
                raise errors.SCMError(
                    f"parameter {name!r} needs one value, got shape {array.shape}"
                )
            out[name] = array.reshape(1)
        for name, array in out.items():
            if not np.all(np.isfinite(array)):
                raise errors.SCMError(f"parameter {name!r} must be finite, got {array[0]}")
            if name.startswith("sigma_") and not np.all(array > 0):
                raise errors.SCMError(f"parameter {name!r} must be positive, got {array[0]}")
        for eq in scm.equations.values():
            for _, name in eq.extra:
                problem = eq.family.check_parameter(eq, name, out[name])
                if problem is not None:
                    raise errors.SCMError(f"parameter {name!r} {problem}, got {out[name][0]}")
        return cls(out)


def _level_terms(scm: SCM) -> list[ObservedTerm]:
    """Observed-parent terms whose parameter is a vector of level effects."""
    return [
        t
        for eq in scm.equations.values()
        if not eq.family.declares_coefficients
        for t in eq.observed
        if t.levels is not None
    ]
