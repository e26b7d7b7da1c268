"""``tests/unit`` mirrors the package, so each module's unit tests have one home: the tests of
``realtime_resumption/<path>/<name>.py`` are ``tests/unit/<path>/test_<name>.py`` or, when they
are several files, ``tests/unit/<path>/<name>/``. A package's ``test_exports.py`` tests its
``__init__.py``. A module renamed or moved without its tests fails here."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "tests" / "unit"
PACKAGE = ROOT / "plugins" / "realtime_resumption"


def _module_of(test_file: Path) -> Path | None:
    """The module a unit test file is the home of, or None when there is none."""
    folders = test_file.relative_to(UNIT).parts[:-1]
    name = test_file.stem.removeprefix("test_")
    here = PACKAGE.joinpath(*folders)
    candidates = [here / "__init__.py" if name == "exports" else here / f"{name}.py"]
    if folders:
        # A directory home: tests/unit/<path>/<name>/ holds the tests of <path>/<name>.py.
        candidates.append(here.with_suffix(".py"))
    return next((c for c in candidates if c.is_file()), None)


def test_every_unit_test_file_is_at_home_beside_its_module() -> None:
    test_files = sorted(UNIT.rglob("test_*.py"))
    assert test_files, f"no unit tests under {UNIT}"
    strays = [str(f.relative_to(ROOT)) for f in test_files if _module_of(f) is None]
    assert not strays, (
        "unit test files whose module is not where the test tree says (tests/unit mirrors "
        f"plugins/realtime_resumption): {strays}"
    )
