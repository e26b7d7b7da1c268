"""The API version of the Live endpoint: google-genai 3.x dials the Gemini API's ``v1``, where
``-latest`` aliases do not exist (2.x dialled ``v1beta``). The package dials an alias on
``v1beta`` unless the app chose a version, and the emulator answers an alias on any other
version as the service answers a model it does not serve (close 1008, its text cut to 123
bytes). Run on every cell of the CI matrix: the same tests hold for each SDK's default."""

from __future__ import annotations

import json

import pytest
from google import genai
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.gemini.live_options import live_api_version
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig
from realtime_resumption.transport import ConnectError

from ..emulator.emu_helpers import NO_PROXY

ALIAS = "gemini-flash-live-latest"
MODEL = "gemini-live-2.5-flash-preview"
SDK_DEFAULT = "v1" if int(genai.__version__.split(".")[0]) >= 3 else "v1beta"
"""The Gemini API version this google-genai dials unless told otherwise."""


def gemini_path(version: str) -> str:
    return f"/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent"


def not_found(model: str, version: str) -> str:
    """The service's close reason for a model a version does not serve, cut to the 123 bytes
    a close frame carries (as in livekit/agents#4414 and google/adk-samples#23)."""
    text = (
        f"models/{model} is not found for API version {version}, or is not supported for "
        "bidiGenerateContent. Call ListModels to see the list of available models and their "
        "supported methods."
    )
    return text.encode()[:123].decode()


VERTEX_PATH = "/ws/google.cloud.aiplatform.v1beta1.LlmBidiService/BidiGenerateContent"


def emulator() -> Emulator:
    return Emulator(EmulatorConfig(time_scale=0.05))


async def _dialled_paths(model: str) -> list[str]:
    """The paths a transport for ``model``, on the SDK's options, dials to connect."""
    async with emulator() as emu:
        transport = GeminiLiveTransport(
            api_key="emulator-key", http_options=emu.http_options(), model=model
        )
        await transport.connect()
        await transport.disconnect()
        return [attempt.path for attempt in emu.ledger.attempts]


def test_only_aliases_need_a_version() -> None:
    assert live_api_version(ALIAS) == "v1beta"
    assert live_api_version(f"models/{ALIAS}") == "v1beta"
    assert live_api_version(MODEL) is None
    assert live_api_version("gemini-3.8-live") is None


async def test_an_alias_is_dialled_on_v1beta_whatever_the_sdks_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GOOGLE_GENAI_API_VERSION", raising=False)
    assert await _dialled_paths(ALIAS) == [gemini_path("v1beta")]


async def test_any_other_model_is_dialled_on_the_sdks_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GOOGLE_GENAI_API_VERSION", raising=False)
    assert await _dialled_paths(MODEL) == [gemini_path(SDK_DEFAULT)]


async def test_the_apps_own_version_is_kept_and_refused_as_the_service_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GOOGLE_GENAI_API_VERSION", raising=False)
    async with emulator() as emu:
        options = emu.http_options()
        options.api_version = "v1"
        transport = GeminiLiveTransport(api_key="emulator-key", http_options=options, model=ALIAS)
        with pytest.raises(ConnectError) as caught:
            await transport.connect()
        await transport.disconnect()
        paths = [attempt.path for attempt in emu.ledger.attempts]
    assert paths == [gemini_path("v1")]
    failure = caught.value.failure
    assert (failure.kind, failure.code) == ("closed", 1008)
    assert failure.provider_text == not_found(ALIAS, "v1")


async def test_a_version_from_the_environment_is_left_to_the_sdk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """google-genai 3.x reads ``GOOGLE_GENAI_API_VERSION`` (and then dials an alias where it is
    refused); 2.x does not read it and dials ``v1beta``."""
    monkeypatch.setenv("GOOGLE_GENAI_API_VERSION", "v1")
    async with emulator() as emu:
        transport = GeminiLiveTransport(
            api_key="emulator-key", http_options=emu.http_options(), model=ALIAS
        )
        try:
            await transport.connect()
            refused = None
        except ConnectError as error:
            refused = error.failure.code
        await transport.disconnect()
        paths = [attempt.path for attempt in emu.ledger.attempts]
    assert paths == [gemini_path(SDK_DEFAULT)]
    assert refused == (1008 if SDK_DEFAULT == "v1" else None)


async def _setup_answer(emu: Emulator, path: str, model: str) -> tuple[int | None, str]:
    """The emulator's answer to a setup naming ``model`` on ``path``: (None, the first
    message), or (the close code, its reason)."""
    async with connect(
        f"wss://127.0.0.1:{emu.port}{path}",
        ssl=emu.client_ssl_context(),
        additional_headers={"x-goog-api-key": "k"},
        **NO_PROXY,
    ) as ws:
        await ws.send(json.dumps({"setup": {"model": model}}))
        try:
            first = await ws.recv()
        except ConnectionClosed as closed:
            assert closed.rcvd is not None
            return closed.rcvd.code, closed.rcvd.reason
        return None, str(first)


@pytest.mark.parametrize("version", ["v1", "v1alpha"])
async def test_the_emulator_refuses_an_alias_off_v1beta(version: str) -> None:
    async with emulator() as emu:
        code, reason = await _setup_answer(emu, gemini_path(version), f"models/{ALIAS}")
    assert (code, reason) == (1008, not_found(ALIAS, version))


@pytest.mark.parametrize(
    ("path", "model"),
    [
        (gemini_path("v1beta"), f"models/{ALIAS}"),
        (gemini_path("v1"), f"models/{MODEL}"),
        (gemini_path("v1"), "models/gemini-3.8-live"),
        (VERTEX_PATH, f"projects/p/locations/l/publishers/google/models/{MODEL}"),
    ],
)
async def test_the_emulator_serves_every_other_model_and_version(path: str, model: str) -> None:
    async with emulator() as emu:
        code, first = await _setup_answer(emu, path, model)
    assert code is None
    assert "setupComplete" in first
