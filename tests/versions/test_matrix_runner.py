"""The version matrix's runner (`.ci/matrix.py`): a cell that outlasts its time is a failed
cell in the table, not a traceback that hides the other cells' results."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

RUNNER = Path(__file__).resolve().parents[2] / ".ci" / "matrix.py"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_matrix", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_a_cell_that_outlasts_its_time_is_reported_failed_with_its_log(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = _runner()
    (matrix.ROOT / "build").mkdir(exist_ok=True)
    build = Path(tempfile.mkdtemp(dir=matrix.ROOT / "build"))  # its logs are shown from ROOT
    monkeypatch.setattr(matrix, "BUILD", build)
    try:
        result = matrix.run(
            matrix.Cell("slow", {}, ("tests/layout",)), 0.01
        )  # no pytest starts that fast
        assert not result.ok
        assert result.summary == "timed out after 0 s"
        assert "--- slow failed" in capsys.readouterr().out
        assert (build / "slow.log").exists()
    finally:
        shutil.rmtree(build)
