"""Clients the package builds are closed by it, on every SDK of the matrix: google-genai 3.x
no longer closes an ``AsyncClient`` when it is collected. A client the app passes in is the
app's to close; the testing kit's ``gemini_client`` fixture closes its own."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from google.genai import client as genai_client

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import Credential
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

MODEL = "gemini-live-2.5-flash-preview"


class Clients:
    """The ``AsyncClient``s made during a test, and which of them were closed (the real close
    runs). Clients of earlier tests that the 2.x SDK closes when they are collected are not
    counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made: list[genai_client.AsyncClient] = []
        self._closed: list[genai_client.AsyncClient] = []
        real_init = genai_client.AsyncClient.__init__
        real_close: Callable[[genai_client.AsyncClient], Coroutine[Any, Any, None]] = (
            genai_client.AsyncClient.aclose
        )

        def init(client: genai_client.AsyncClient, *args: Any, **kwargs: Any) -> None:
            real_init(client, *args, **kwargs)
            self.made.append(client)

        async def aclose(client: genai_client.AsyncClient) -> None:
            self._closed.append(client)
            await real_close(client)

        monkeypatch.setattr(genai_client.AsyncClient, "__init__", init)
        monkeypatch.setattr(genai_client.AsyncClient, "aclose", aclose)

    @property
    def closed(self) -> list[genai_client.AsyncClient]:
        return [c for c in self._closed if any(c is m for m in self.made)]


@pytest.fixture
def clients(monkeypatch: pytest.MonkeyPatch) -> Clients:
    return Clients(monkeypatch)


async def test_a_client_built_from_a_key_is_closed_at_disconnect(clients: Clients) -> None:
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        transport = GeminiLiveTransport(
            api_key="emulator-key", http_options=emu.http_options(), model=MODEL
        )
        await transport.connect()
        assert clients.closed == []
        await transport.disconnect()
    assert len(clients.made) == 1
    assert clients.closed == clients.made


async def test_each_dials_client_from_a_credential_provider_is_closed(clients: Clients) -> None:
    async def credential() -> Credential:
        return Credential("emulator-key")

    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        transport = GeminiLiveTransport(
            http_options=emu.http_options(), credential_provider=credential, model=MODEL
        )
        await transport.connect()
        await transport.disconnect()
    assert len(clients.made) == 1
    assert clients.closed == clients.made


async def test_a_client_the_app_passes_in_is_left_open(clients: Clients) -> None:
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        client = emu.client()
        transport = GeminiLiveTransport(client=client, model=MODEL)
        await transport.connect()
        await transport.disconnect()
        assert clients.closed == []
        await client.aio.aclose()
    assert clients.closed == [client.aio]


FIXTURE_USER = """
from google.genai import client as genai_client

closed = []
made = []
real_aclose = genai_client.AsyncClient.aclose


async def aclose(self):
    closed.append(self)
    await real_aclose(self)


genai_client.AsyncClient.aclose = aclose


async def test_uses_the_client(gemini_client):
    made.append(gemini_client.aio)


def test_the_client_was_closed_after_it():
    assert made and [c for c in closed if c in made] == made
"""


def test_the_pytest_plugins_client_is_closed_after_the_test(tmp_path: Path) -> None:
    """The testing kit's ``gemini_client`` fixture, in a pytest run of its own."""
    (tmp_path / "test_user.py").write_text(FIXTURE_USER)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--asyncio-mode=auto"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout
