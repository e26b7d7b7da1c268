"""pytest fixtures for the bundled emulators (the ``realtime_resumption`` plugin).

Installed with the package; it loads nothing heavy until a test asks for a fixture, so test
runs that do not use it are unchanged. Fixtures (function scope, need pytest-asyncio)::

    gemini_emulator       a started Emulator, stopped after the test
    gemini_client         a google-genai Client pointed at it (Vertex mode on the vertex profile),
                          closed after the test
    gemini_http_options   HttpOptions for code that builds its own client

    openai_emulator       a started OpenAIEmulator (OpenAI Realtime), stopped after the test
    openai_client         an openai AsyncOpenAI pointed at it (pass
                          ``openai_emulator.websocket_options()`` to ``realtime.connect``),
                          closed after the test
    openai_emulator_trusted  the emulator, its CA trusted through SSL_CERT_FILE for the test,
                          for clients that take no SSL option (Pipecat's service)

The OpenAI fixtures take the ``openai_emulator`` marker (any ``OpenAIEmulatorConfig`` field) or
an indirect parameter the same way (a profile name: ``openai`` or ``azure``).

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
    import openai
    from google import genai
    from google.genai import types

    from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
    from realtime_resumption.testing.openai_emulator import OpenAIEmulator, OpenAIEmulatorConfig

MARKER = "gemini_emulator"
OPENAI_MARKER = "openai_emulator"


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker (so ``--strict-markers`` runs accept it)."""
    config.addinivalue_line(
        "markers",
        f"{MARKER}(**settings): EmulatorConfig fields for the gemini_emulator fixture "
        "(profile, time_scale, setup_latency, rotate_every, ...)",
    )
    config.addinivalue_line(
        "markers",
        f"{OPENAI_MARKER}(**settings): OpenAIEmulatorConfig fields for the openai_emulator "
        "fixture (profile, time_scale, session_cap, answer_chunks, ...)",
    )


_C = TypeVar("_C")


def _requested(request: pytest.FixtureRequest, marker_name: str, cls: type[_C]) -> _C:
    """The configuration (a ``cls``) a test asked for: its ``marker_name`` markers (the closest
    wins), then an indirect parameter (a profile name, a dict of fields, or a whole ``cls``)."""
    settings: dict[str, Any] = {}
    for marker in reversed(list(request.node.iter_markers(marker_name))):
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{marker_name} takes keyword arguments only")
        settings.update(marker.kwargs)
    param = getattr(request, "param", None)
    if isinstance(param, cls):
        # Both configurations are dataclasses; mypy cannot bound a TypeVar by that.
        return dataclasses.replace(param, **settings)  # type: ignore[type-var]
    if isinstance(param, str):
        settings["profile"] = param
    elif isinstance(param, Mapping):
        settings.update(param)
    elif param is not None:
        raise pytest.UsageError(
            f"{marker_name} parameters are a profile name, a dict or an {cls.__name__}, "
            f"not {type(param).__name__}"
        )
    try:
        return cls(**settings)
    except (TypeError, ValueError) as exc:
        raise pytest.UsageError(f"{marker_name}: {exc}") from None


def emulator_config(request: pytest.FixtureRequest) -> EmulatorConfig:
    """The Gemini emulator's configuration a test asked for (see :func:`_requested`)."""
    from realtime_resumption.testing.emulator import EmulatorConfig

    return _requested(request, MARKER, EmulatorConfig)


def openai_emulator_config(request: pytest.FixtureRequest) -> OpenAIEmulatorConfig:
    """The OpenAI Realtime emulator's configuration a test asked for (its
    ``openai_emulator`` markers, then an indirect parameter)."""
    from realtime_resumption.testing.openai_emulator import OpenAIEmulatorConfig

    return _requested(request, OPENAI_MARKER, OpenAIEmulatorConfig)


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


@_async_fixture
async def openai_emulator(request: pytest.FixtureRequest) -> AsyncIterator[OpenAIEmulator]:
    """A started OpenAI Realtime emulator on the test's event loop; stopped (every session
    closed, the CA file removed) after the test."""
    from realtime_resumption.testing.openai_emulator import OpenAIEmulator

    async with OpenAIEmulator(openai_emulator_config(request)) as emu:
        yield emu


@_async_fixture
async def openai_client(openai_emulator: OpenAIEmulator) -> AsyncIterator[openai.AsyncOpenAI]:
    """An ``openai.AsyncOpenAI`` for the emulator (``base_url`` and ``websocket_base_url``);
    closed after the test."""
    client = openai_emulator.client()
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def openai_emulator_trusted(
    openai_emulator: OpenAIEmulator, monkeypatch: pytest.MonkeyPatch
) -> OpenAIEmulator:
    """The emulator, with ``SSL_CERT_FILE`` set to its CA for the test: clients that build
    their own default SSL context (Pipecat's ``OpenAIRealtimeLLMService`` dials with
    websockets' default) trust it."""
    monkeypatch.setenv("SSL_CERT_FILE", openai_emulator.ca_file)
    return openai_emulator
