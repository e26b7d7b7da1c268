"""The package's reaches into google-genai's and websockets' private members
(``gemini.sdk_internals``) take on the versions installed (each cell of the CI matrix runs this
file on its own pins): the gated ``ws_connect`` (``gemini.preopen``), the session's socket and
client (``_ws``, ``_api_client``: the direct writer and the quick audio reader), and websockets'
synchronous send core (``DirectSend``). Each has a public fallback, tested in
``tests/gemini_unit/test_sdk_internals.py``; here a reach that silently fell back on some
version fails, with the versions in its message."""

from __future__ import annotations

import asyncio
import importlib.metadata

import pytest
from google.genai import live, types

from realtime_resumption import reaches
from realtime_resumption.gemini import messages, preopen, sdk_internals, server_events
from realtime_resumption.gemini.messages import ClientMessage, Writer
from realtime_resumption.gemini.server_events import Reader
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..transport.transport_helpers import measured_round_trip, quiet_hooks, started_connection

MODEL = "gemini-live-2.5-flash-preview"
VERSIONS = ", ".join(
    f"{name} {importlib.metadata.version(name)}" for name in ("google-genai", "websockets")
)
PCM = b"\x01\x00" * 320
"""20 ms of 16 kHz audio."""


def _config() -> types.LiveConnectConfig:
    return types.LiveConnectConfig(
        response_modalities=[types.Modality.AUDIO],
        session_resumption=types.SessionResumptionConfig(),
    )


@pytest.fixture(autouse=True)
def _fresh_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Each test probes this process's SDK afresh, not an earlier test's ruling.
    messages._SPELLED_AS_SDK.clear()
    server_events._READ_AS_SDK.clear()
    for reach in (sdk_internals.SESSION_MEMBERS, sdk_internals.WS_CONNECT):
        monkeypatch.setattr(reach, "verdict", None)
    monkeypatch.setattr(reaches, "_GUARDS", {})


def test_the_gated_ws_connect_is_installed() -> None:
    assert preopen.install(), f"google.genai.live has no ws_connect ({VERSIONS})"
    assert sdk_internals.WS_CONNECT.verdict, VERSIONS
    assert getattr(live.ws_connect, "_wrapped_by", None) is preopen._gated


def test_the_sdk_session_keeps_its_socket_and_client_where_they_are_read() -> None:
    assert sdk_internals.SESSION_MEMBERS.taken(), VERSIONS


@pytest.mark.parametrize("vertex", [False, True])
async def test_audio_is_written_directly_and_read_quickly(
    vertex: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick_reads: list[bool] = []
    audio_message = server_events.audio_message

    def counted(frame: str | bytes) -> types.LiveServerMessage | None:
        message = audio_message(frame)
        quick_reads.append(message is not None)
        return message

    monkeypatch.setattr(server_events, "audio_message", counted)
    profile = "vertex" if vertex else "gemini"
    async with Emulator(EmulatorConfig(profile=profile, time_scale=0.05)) as emu:  # type: ignore[arg-type]
        client = emu.client(vertex=vertex)
        async with client.aio.live.connect(model=MODEL, config=_config()) as session:
            writer, reader = Writer(session), Reader(session)
            guard = reaches._GUARDS.get(type(sdk_internals.session_socket(session)))
            assert guard in ("send_in_progress", "fragmented_send_waiter"), VERSIONS
            # The first chunk checks the spelling against the SDK's own; the next is written
            # with no coroutine.
            await writer.write(ClientMessage.audio(PCM))
            assert writer.write_now(ClientMessage.audio(PCM)), f"no direct write ({VERSIONS})"
            await writer.write(ClientMessage.text("hello"))
            async with asyncio.timeout(10):
                while True:
                    message = await reader.next()
                    if message.server_content and message.server_content.turn_complete:
                        break
        await client.aio.aclose()
        [record] = emu.ledger.sessions.values()
        received = [m.kind for m in record.connections[0].client_messages]
    assert received.count("audio") == 2, received
    assert any(quick_reads), f"no audio frame read by audio_message ({VERSIONS})"


async def test_the_connection_reaches_the_sessions_socket() -> None:
    """Through the session's ``_ws``: the endpoint key (the upgrade's ``Host``) and the
    kernel's round trip (the socket under the WebSocket's transport)."""
    closed = asyncio.Event()
    hooks = quiet_hooks(closed=lambda conn, code, reason: closed.set())
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        conn = await started_connection(emu, hooks, _config())
        expected = f"gemini:127.0.0.1:{emu.port}"
        try:
            endpoint = conn.endpoint
            measured = await measured_round_trip(conn)
        finally:
            await conn.close()
    assert endpoint == expected, VERSIONS
    assert measured >= 0, VERSIONS
    assert closed.is_set()
