"""The plugin works in pytest-asyncio's auto and strict modes, changes nothing for a run that
does not use it, and closes the clients its fixtures make. Each case runs pytest in a
subprocess on a project of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

USER_TEST = """
import pytest

MODEL = "gemini-live-2.5-flash-preview"

{mark}
@pytest.mark.gemini_emulator(profile="vertex", time_scale=0.05)
async def test_agent(gemini_emulator, gemini_client, gemini_http_options):
    assert gemini_emulator.config.profile == "vertex" and gemini_client.vertexai
    assert gemini_http_options.base_url == gemini_emulator.base_url
    async with gemini_client.aio.live.connect(model=MODEL) as session:
        await session.send_realtime_input(text="hello")
        messages = [m async for m in session.receive()]
    assert messages[-1].server_content.turn_complete
"""

UNUSED = """
import sys

def test_nothing_of_the_emulator_is_loaded():
    assert "realtime_resumption.testing.emulator" not in sys.modules
    assert "google.genai" not in sys.modules
"""

OPENAI_CLIENT_USER = """
made = []


async def test_uses_the_client(openai_client):
    made.append(openai_client)


def test_the_client_was_closed_after_it():
    assert made and all(client.is_closed() for client in made)
"""


def _pytest(tmp_path: Path, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_user.py").write_text(source)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(("mode", "mark"), [("auto", ""), ("strict", "@pytest.mark.asyncio")])
def test_the_fixtures_work_in_both_asyncio_modes(tmp_path: Path, mode: str, mark: str) -> None:
    run = _pytest(
        tmp_path, USER_TEST.format(mark=mark), f"--asyncio-mode={mode}", "--strict-markers"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_a_run_that_does_not_use_the_fixtures_loads_nothing(tmp_path: Path) -> None:
    run = _pytest(tmp_path, UNUSED)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout


def test_a_bad_setting_is_a_usage_error(tmp_path: Path) -> None:
    source = USER_TEST.format(mark="").replace('profile="vertex"', 'profile="bard"')
    run = _pytest(tmp_path, source, "--asyncio-mode=auto")
    assert run.returncode != 0
    assert "profile must be one of" in run.stdout + run.stderr


def test_the_openai_client_is_closed_after_the_test(tmp_path: Path) -> None:
    run = _pytest(tmp_path, OPENAI_CLIENT_USER, "--asyncio-mode=auto")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
