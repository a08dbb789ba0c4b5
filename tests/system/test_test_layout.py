"""The tests mirror the packages: a module's tests are found at its mirrored path.

`tests/<package>/test_<module>.py` holds the tests of `<package>/<module>.py` (or of the SQL file
`<module>.sql`, or of the subpackage `<module>/`), and `test_<module>_<aspect>.py` those of one
aspect of it. The tests of the whole live in tests/system, the browser's in tests/browser, the
docs' own in tests/docs, the deployment files' (compose, Kubernetes, Patroni) in tests/deploy.
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

OUTSIDE_THE_MIRROR = {"system", "browser", "docs", "deploy"}


def mirrors_a_module(test: Path) -> bool:
    package = test.parent.relative_to(ROOT / "tests")
    if not package.parts:
        return False
    words = test.stem.removeprefix("test_").split("_")
    for end in range(1, len(words) + 1):
        module = ROOT / package / "_".join(words[:end])
        if module.with_suffix(".py").is_file() or module.with_suffix(".sql").is_file():
            return True
        if (module / "__init__.py").is_file():
            return True
    return False


def test_every_test_module_mirrors_a_module() -> None:
    tests = [
        path
        for path in (ROOT / "tests").rglob("test_*.py")
        if path.relative_to(ROOT / "tests").parts[0] not in OUTSIDE_THE_MIRROR
    ]
    assert len(tests) > 50  # the walk found the suite
    strays = [str(path.relative_to(ROOT)) for path in tests if not mirrors_a_module(path)]
    assert strays == []


def test_a_module_that_is_not_there_is_a_stray() -> None:
    assert mirrors_a_module(ROOT / "tests/tasks/transitions/test_claim_misfire.py")
    assert mirrors_a_module(ROOT / "tests/tasks/sql/test_run_summary.py")
    assert not mirrors_a_module(ROOT / "tests/tasks/test_reliability.py")
    assert not mirrors_a_module(ROOT / "tests/test_migrations.py")
