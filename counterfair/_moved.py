"""Old module paths of counterfair, kept for one release as aliases that warn.

counterfair 0.1 laid its modules flat (``counterfair.posterior``,
``counterfair.learning``, ...). They now live in one subpackage per stage
(``ARCHITECTURE.md``). Importing an old path still works: it returns the new module
itself (the same object, so ``isinstance`` checks and monkeypatching hold) and warns
once with a :class:`DeprecationWarning` that names the new path. Saved folders name
no module paths, so they load unchanged.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

MOVED: dict[str, str] = {
    "counterfair.abduction": "counterfair.inference.abduction",
    "counterfair.approximate": "counterfair.inference.pathfinder",
    "counterfair.baselines": "counterfair.learn.baselines",
    "counterfair.baselines_order": "counterfair.learn.noncausal",
    "counterfair.chunking": "counterfair.rows.chunking",
    "counterfair.cli_run": "counterfair.cli.run",
    "counterfair.dask_groups": "counterfair.dask.groups",
    "counterfair.dask_parquet": "counterfair.dask.parquet",
    "counterfair.dask_rows": "counterfair.dask.rows",
    "counterfair.dask_run": "counterfair.dask.run",
    "counterfair.dask_summary": "counterfair.dask.summary",
    "counterfair.datasets_tabular": "counterfair.datasets",
    "counterfair.diagnostics": "counterfair.inference.diagnostics",
    "counterfair.discrete": "counterfair.model.discrete",
    "counterfair.dispatch": "counterfair.rows.dispatch",
    "counterfair.encoding": "counterfair.model.encoding",
    "counterfair.enumeration": "counterfair.model.enumeration",
    "counterfair.equations": "counterfair.model.evaluate",
    "counterfair.exact_abduction": "counterfair.inference.exact_abduction",
    "counterfair.families": "counterfair.model.families",
    "counterfair.fit_store": "counterfair.io.fit_folder",
    "counterfair.fitting": "counterfair.inference.fitting",
    "counterfair.identification": "counterfair.model.identification",
    "counterfair.layout": "counterfair.model.equation",
    "counterfair.learner_store": "counterfair.io.learner_folder",
    "counterfair.learning": "counterfair.learn.fair",
    "counterfair.loo": "counterfair.inference.loo",
    "counterfair.mcmc_stats": "counterfair.inference.mcmc_stats",
    "counterfair.models": "counterfair.datasets.law_school_models",
    "counterfair.multiworld": "counterfair.learn.multiworld",
    "counterfair.node_specs": "counterfair.model.nodes",
    "counterfair.params": "counterfair.model.params",
    "counterfair.path_features": "counterfair.counterfactual.path_features",
    "counterfair.paths": "counterfair.counterfactual.paths",
    "counterfair.posterior": "counterfair.inference.fit",
    "counterfair.ppc": "counterfair.inference.ppc",
    "counterfair.ppc_results": "counterfair.inference.ppc_result",
    "counterfair.prediction": "counterfair.counterfactual.prediction",
    "counterfair.rowrandom": "counterfair.rng",
    "counterfair.saving": "counterfair.io.load",
    "counterfair.scales": "counterfair.inference.scales",
    "counterfair.scm": "counterfair.model.scm",
    "counterfair.scm_document": "counterfair.io.scm_document",
    "counterfair.scm_file": "counterfair.io.scm_file",
    "counterfair.sensitivity": "counterfair.counterfactual.sensitivity",
    "counterfair.simulate": "counterfair.model.simulate",
    "counterfair.specs": "counterfair.model.specs",
    "counterfair.subsample": "counterfair.rows.subsample",
    "counterfair.subsample_check": "counterfair.inference.subsample_check",
    "counterfair.validation": "counterfair.model.checks",
    "counterfair.world": "counterfair.counterfactual.world",
    "counterfair.audit.counterfactual": "counterfair.audit.causal",
}
"""Old module path -> where it lives now."""


def moved_to(old: str) -> str | None:
    """The new path of an old module path, ``counterfair.families.base`` included."""
    if old in MOVED:
        return MOVED[old]
    head = old.rpartition(".")[0]
    while head:
        if head in MOVED:
            return MOVED[head] + "." + old[len(head) + 1 :]
        head = head.rpartition(".")[0]
    return None


class _Alias(importlib.abc.Loader):
    """Hands the new module over in place of the old path, with a warning."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self.spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{self.old} moved to {self.new}; the old path goes in the next release",
            DeprecationWarning,
            stacklevel=8,
        )
        module = importlib.import_module(self.new)
        self.spec = module.__spec__  # Python sets the alias's spec on it; put it back below
        return module

    def exec_module(self, module: ModuleType) -> None:
        """The new module is already executed: only its own spec is restored."""
        module.__spec__ = self.spec


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Finds old counterfair module paths; every other name is left to Python."""

    def find_spec(
        self, fullname: str, path: object = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("counterfair."):
            return None
        new = moved_to(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(fullname, new))


if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())
