"""Old module paths of the flat layout still import, for one release, and say where to go.

Each old path (``counterfair.posterior``, ``counterfair.learning``, ...) returns the
new module itself, so classes, ``isinstance`` checks and monkeypatching are those of
the new module, and warns once with a DeprecationWarning naming the new path.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from counterfair._moved import MOVED, moved_to


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_path_is_the_new_module_and_warns(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__spec__ is not None and module.__spec__.name == MOVED[old]  # its own


def test_submodules_of_a_moved_package_follow_it() -> None:
    assert moved_to("counterfair.families.base") == "counterfair.model.families.base"
    assert moved_to("counterfair.stan.codegen") is None  # not moved: Python finds it
    sys.modules.pop("counterfair.families.base", None)
    with pytest.warns(DeprecationWarning, match="counterfair.model.families.base"):
        base = importlib.import_module("counterfair.families.base")
    new = importlib.import_module("counterfair.model.families.base")
    assert base is new
    assert new.__spec__ is not None and new.__spec__.name == "counterfair.model.families.base"


def test_old_from_imports_of_names_work_in_a_fresh_process() -> None:
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n"
        "    from counterfair.posterior import Fit\n"
        "except DeprecationWarning as w:\n"
        "    print('warned:', w)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from counterfair.posterior import Fit\n"
        "import counterfair as cf\n"
        "assert Fit is cf.Fit\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "counterfair.posterior moved to counterfair.inference.fit" in done.stdout


def test_an_old_module_path_never_hides_the_public_function_of_the_same_name() -> None:
    import counterfair as cf

    for old in ("counterfair.sensitivity", "counterfair.subsample_check"):
        with pytest.warns(DeprecationWarning):
            sys.modules.pop(old, None)
            importlib.import_module(old)
    assert callable(cf.sensitivity) and cf.sensitivity.__name__ == "sensitivity"
    assert callable(cf.subsample_check) and cf.subsample_check.__name__ == "subsample_check"
