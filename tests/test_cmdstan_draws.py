"""cmdstanpy draws -> InferenceData: the lean conversion equals arviz's own, copy for copy."""

from __future__ import annotations

from typing import Any

import arviz as az
import numpy as np
import pytest
from _models import law_level3_scm, law_train
from _seeds import shifted

from counterfair.stan import cmdstan_adapter
from counterfair.stan.backend import available_backends

# the draws CmdStan writes (skipped where it is not under test)
pytestmark = pytest.mark.every_backend


@pytest.mark.stan
@pytest.mark.skipif("cmdstanpy" not in available_backends(), reason="needs CmdStan")
@pytest.mark.filterwarnings("ignore::counterfair.errors.ConvergenceWarning")
def test_lean_conversion_equals_arviz_from_cmdstanpy(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    lean = cmdstan_adapter.draws_to_idata

    def both(fit: Any, **kwargs: Any) -> az.InferenceData:
        seen["arviz"] = az.from_cmdstanpy(
            posterior=fit, coords=dict(kwargs["coords"] or {}), dims=dict(kwargs["dims"] or {})
        )
        seen["lean"] = lean(fit, **kwargs)
        seen["raw"] = kwargs["raw"]
        np.testing.assert_array_equal(kwargs["raw"], fit.draws())  # block reader = cmdstanpy's
        return seen["lean"]

    monkeypatch.setattr(cmdstan_adapter, "draws_to_idata", both)
    monkeypatch.setattr(cmdstan_adapter, "_BLOCK_BYTES", 4096)  # several blocks per chain
    data = law_train().drop(columns=["K", "ZFYA"]).iloc[:60]
    law_level3_scm().fit(
        data, backend="cmdstanpy", chains=2, warmup=100, draws=50, seed=shifted(5), progress=False
    )
    ref, new = seen["arviz"], seen["lean"]
    assert set(new.groups()) == set(ref.groups()) == {"posterior", "sample_stats"}
    for group in ("posterior", "sample_stats"):
        a, b = ref[group], new[group]
        assert list(b.data_vars) == list(a.data_vars)
        assert dict(b.sizes) == dict(a.sizes)
        for name in a.data_vars:
            assert b[name].dims == a[name].dims, name
            assert b[name].dtype == a[name].dtype, name
            np.testing.assert_array_equal(b[name].values, a[name].values)
        for coord in a.coords:
            np.testing.assert_array_equal(b[coord].values, a[coord].values)
    # one array per variable, sharing no memory with cmdstanpy's draws (freed after)
    for group in ("posterior", "sample_stats"):
        for name in new[group].data_vars:
            assert not np.shares_memory(new[group][name].values, seen["raw"]), name
