"""pytest fixtures for the bundled Gemini Live emulator (the ``realtime_resumption`` plugin).

Installed with the package; it loads nothing heavy until a test asks for a fixture, so test
runs that do not use it are unchanged. Fixtures (function scope, need pytest-asyncio)::

    gemini_emulator       a started Emulator, stopped after the test
    gemini_client         a google-genai Client pointed at it (Vertex mode on the vertex profile),
                          closed after the test
    gemini_http_options   HttpOptions for code that builds its own client

Configure the emulator with the ``gemini_emulator`` marker (any ``EmulatorConfig`` field), or
parametrize the fixture indirectly with a profile name, a dict of fields or an EmulatorConfig::

    @pytest.mark.gemini_emulator(profile="vertex", time_scale=0.1)
    async def test_my_agent_survives_a_go_away(gemini_emulator, gemini_client):
        ...
        await gemini_emulator.faults.go_away(5.0)

    @pytest.mark.parametrize("gemini_emulator", ["gemini", "vertex"], indirect=True)
    async def test_both_profiles(gemini_emulator): ...
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

import pytest

if TYPE_CHECKING:
    from google import genai
    from google.genai import types

    from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

MARKER = "gemini_emulator"


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (so ``--strict-markers`` runs accept it)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**settings): EmulatorConfig fields for the gemini_emulator fixture "
        "(profile, time_scale, setup_latency, rotate_every, ...)",
    )


def emulator_config(request: pytest.FixtureRequest) -> EmulatorConfig:
    """The configuration a test asked for: its markers (the closest wins), then an indirect
    parameter (a profile name, a dict of fields, or a whole EmulatorConfig)."""
    from realtime_resumption.testing.emulator import EmulatorConfig

    settings: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(MARKER))):
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only")
        settings.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, EmulatorConfig):
        return dataclasses.replace(param, **settings)
    if isinstance(param, str):
        settings["profile"] = param
    elif isinstance(param, Mapping):
        settings.update(param)
    elif param is not None:
        raise pytest.UsageError(
            f"{MARKER} parameters are a profile name, a dict or an EmulatorConfig, "
            f"not {type(param).__name__}"
        )
    try:
        return EmulatorConfig(**settings)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"{MARKER}: {exc}") from None


_F = TypeVar("_F", bound=Callable[..., Any])


def _async_fixture(function: _F) -> _F:
    """pytest-asyncio's fixture decorator, which both of its modes (auto, strict) accept."""
    try:
        import pytest_asyncio
    except ImportError:  # pytest itself then says that an async fixture needs a plugin
        return cast(_F, pytest.fixture(function))
    return cast(_F, pytest_asyncio.fixture(function))


@_async_fixture
async def gemini_emulator(request: pytest.FixtureRequest) -> AsyncIterator[Emulator]:
    """A started emulator on the test's event loop; stopped (every connection closed, the CA
    file removed) after the test."""
    from realtime_resumption.testing.emulator import Emulator

    async with Emulator(emulator_config(request)) as emu:
        yield emu


@_async_fixture
async def gemini_client(gemini_emulator: Emulator) -> AsyncIterator[genai.Client]:
    """A google-genai client for the emulator, in Vertex mode on the vertex profile; closed
    after the test (google-genai 3.x no longer closes a client when it is collected)."""
    client = gemini_emulator.client(vertex=gemini_emulator.config.profile == "vertex")
    try:
        yield client
    finally:
        await client.aio.aclose()
        client.close()


@pytest.fixture
def gemini_http_options(gemini_emulator: Emulator) -> types.HttpOptions:
    """HTTP options that point any google-genai client (or a framework's) at the emulator."""
    return gemini_emulator.http_options()
