"""Fixtures for the transport tests: the emulator in both profiles, and a scripted endpoint."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from realtime_resumption.testing.emulator import Emulator

from .transport_helpers import ScriptedServer, emulator_config


@pytest.fixture(params=["gemini", "vertex"])
def profile(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.fixture
async def emu(profile: str) -> AsyncIterator[Emulator]:
    async with Emulator(emulator_config(profile)) as emulator:
        yield emulator


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer()
    await server.start()
    try:
        yield server
    finally:
        await server.stop()
