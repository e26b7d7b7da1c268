"""A frame the SDK cannot read is skipped and reported, never a dead receive loop: valid JSON
that is not an object, or nested too deep, from a scripted endpoint over real TLS."""

from __future__ import annotations

import base64

import pytest

from realtime_resumption.gemini import GeminiLiveTransport
from realtime_resumption.transport import TransportErrorEvent

from .transport_helpers import GRACE, MODEL, Recorder, ScriptedServer

AUDIO = {
    "serverContent": {
        "modelTurn": {
            "parts": [
                {
                    "inlineData": {
                        "mimeType": "audio/pcm;rate=24000",
                        "data": base64.b64encode(b"\1\0" * 240).decode(),
                    }
                }
            ]
        }
    }
}
TURN_COMPLETE = {"serverContent": {"turnComplete": True}}


@pytest.mark.parametrize(
    "raw",
    [
        "[1, 2]",
        '"str"',
        "42",
        "[" * 100_000 + "]" * 100_000,
        '{"serverContent": ' * 5_000 + "{}" + "}" * 5_000,
    ],
    ids=["list", "string", "number", "deep-list", "deep-object"],
)
async def test_a_frame_that_is_not_a_readable_object_is_skipped(
    scripted: ScriptedServer, raw: str
) -> None:
    transport = GeminiLiveTransport(
        api_key="k", model=MODEL, http_options=scripted.http_options(), tool_call_grace=GRACE
    )
    rec = Recorder(transport)
    await transport.connect()
    await scripted.send_raw(raw)
    await scripted.send(AUDIO, TURN_COMPLETE)
    await rec.wait_for("on_turn_complete")
    assert transport.is_connected
    await transport.disconnect()  # never raises
    errors: list[TransportErrorEvent] = [event for (event,) in rec.of("on_error")]
    assert len(errors) == 1 and errors[0].recoverable
    assert rec.count("on_audio_output") == 1
    assert rec.count("on_close") == 1
