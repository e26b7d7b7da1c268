"""Realtime input written, and model audio read, without the SDK's models: over real TLS to a
scripted endpoint, what reaches the server is what the SDK's ``send_realtime_input`` writes,
and the audio the server sends reaches the app byte for byte. (``tests/unit/gemini``'s
``test_messages`` and ``test_server_events`` compare every kind against the SDK.)"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator

import pytest

from realtime_resumption.gemini import GeminiLiveTransport, messages, server_events
from realtime_resumption.transport import ContentTurn

from .transport_helpers import GRACE, MODEL, Recorder, ScriptedServer


@pytest.fixture(autouse=True)
def _fresh_checks() -> Iterator[None]:
    messages._SPELLED_AS_SDK.clear()
    server_events._READ_AS_SDK.clear()
    yield
    messages._SPELLED_AS_SDK.clear()
    server_events._READ_AS_SDK.clear()


async def _received(scripted: ScriptedServer, count: int) -> list[dict[str, object]]:
    async with asyncio.timeout(5):
        while len(scripted.received) < count:  # noqa: ASYNC110 - the server has no event for it
            await asyncio.sleep(0.005)
    return scripted.received


async def test_what_the_server_gets_and_what_the_app_hears(scripted: ScriptedServer) -> None:
    transport = GeminiLiveTransport(
        model=MODEL, api_key="k", http_options=scripted.http_options(), tool_call_grace=GRACE
    )
    rec = Recorder(transport)
    await transport.connect()
    pcm = bytes(range(256)) * 2 + b"\xfb\xff"
    transport.send_audio(pcm)
    transport.commit_audio()
    transport.send_activity_start()
    transport.send_activity_end()
    transport.send_live_text([ContentTurn("user", "Café?")])
    received = await _received(scripted, 5)
    assert received == [
        {
            "realtime_input": {
                "audio": {
                    "data": base64.urlsafe_b64encode(pcm).decode(),
                    "mime_type": "audio/pcm;rate=16000",
                }
            }
        },
        {"realtime_input": {"audioStreamEnd": True}},
        {"realtime_input": {"activityStart": {}}},
        {"realtime_input": {"activityEnd": {}}},
        {"realtime_input": {"text": "Café?"}},
    ]
    assert set(messages._SPELLED_AS_SDK.values()) == {True}, "written directly"
    assert len(messages._SPELLED_AS_SDK) == 5

    answer = b"\x01\x00\xff\x7f" * 120 + b"\xfb\xff"
    part = {
        "inlineData": {
            "mimeType": "audio/pcm;rate=24000",
            "data": base64.b64encode(answer).decode(),
        }
    }
    await scripted.send({"serverContent": {"modelTurn": {"parts": [part]}}})
    await rec.wait_for("on_audio_output")
    assert rec.of("on_audio_output") == [(answer,)]
    assert server_events._READ_AS_SDK == {False: True}, "read directly"
    await transport.disconnect()
