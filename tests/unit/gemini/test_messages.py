"""Realtime input is written to the WebSocket directly, exactly as the SDK would write it.

The SDK sessions here are real (``live.AsyncSession`` with a real client of each API
flavour); their WebSocket is a recorder, so the frame each path writes can be compared (no
socket is needed for that; the transport and end-to-end tests send every message through the
same writer to the emulator over TLS). Each frame is compared as JSON after parsing, against
the SDK's public ``send_realtime_input`` called with the SDK's own types.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.auth.credentials import AnonymousCredentials
from google.genai import live, types

from realtime_resumption.gemini import messages
from realtime_resumption.gemini.messages import ClientMessage, Writer


class _Recorder:
    def __init__(self) -> None:
        self.frames: list[str] = []

    async def send(self, frame: str) -> None:
        self.frames.append(frame)


def _session(vertex: bool, recorder: _Recorder) -> live.AsyncSession:
    if vertex:
        client = genai.Client(
            vertexai=True, project="p", location="us-central1", credentials=AnonymousCredentials()
        )
    else:
        client = genai.Client(api_key="k")
    return live.AsyncSession(api_client=client._api_client, websocket=recorder)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fresh_check() -> Iterator[None]:
    messages._SPELLED_AS_SDK.clear()
    yield
    messages._SPELLED_AS_SDK.clear()


_EVERY_BYTE = bytes(range(256)) * 2 + b"\xfb\xff"  # both base64 alphabets differ on these
_TEXT = 'Is it "sunny"?\n\tCafé, 東京, \u2028 \U0001f324\x01'

CASES: list[tuple[str, ClientMessage, dict[str, Any]]] = [
    (
        "audio",
        ClientMessage.audio(_EVERY_BYTE),
        {"audio": types.Blob(data=_EVERY_BYTE, mime_type="audio/pcm;rate=16000")},
    ),
    (
        "audio at another rate",
        ClientMessage.media("audio", _EVERY_BYTE, "audio/pcm;rate=24000"),
        {"audio": types.Blob(data=_EVERY_BYTE, mime_type="audio/pcm;rate=24000")},
    ),
    (
        "video",
        ClientMessage.media("video", b"\xff\xd8" + _EVERY_BYTE, "image/jpeg"),
        {"video": types.Blob(data=b"\xff\xd8" + _EVERY_BYTE, mime_type="image/jpeg")},
    ),
    ("text", ClientMessage.text(_TEXT), {"text": _TEXT}),
    ("audio stream end", ClientMessage.audio_stream_end(), {"audio_stream_end": True}),
    ("activity start", ClientMessage.activity_start(), {"activity_start": types.ActivityStart()}),
    ("activity end", ClientMessage.activity_end(), {"activity_end": types.ActivityEnd()}),
]


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini", "vertex"])
@pytest.mark.parametrize(("name", "message", "sdk_args"), CASES, ids=[c[0] for c in CASES])
async def test_realtime_input_is_the_frame_the_sdk_writes(
    vertex: bool, name: str, message: ClientMessage, sdk_args: dict[str, Any]
) -> None:
    recorder = _Recorder()
    session = _session(vertex, recorder)
    await Writer(session).write(message)
    await session.send_realtime_input(**sdk_args)
    ours, sdks = recorder.frames
    assert json.loads(ours) == json.loads(sdks)
    assert messages._SPELLED_AS_SDK == {(vertex, message.kind): True}, "the direct path was taken"


async def test_every_kind_of_realtime_input_has_a_probe() -> None:
    recorder = _Recorder()
    writer = Writer(_session(False, recorder))
    kinds = {message.kind for _, message, _ in CASES}
    for _, message, _ in CASES:
        await writer.write(message)
    assert messages._SPELLED_AS_SDK == dict.fromkeys(((False, kind) for kind in kinds), True)


async def test_an_sdk_that_spells_a_kind_otherwise_keeps_its_own_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stand-in for a future SDK that writes audio in another form (no such SDK exists here).
    async def other_form(self: live.AsyncSession, **kwargs: Any) -> None:
        blob = kwargs["audio"]
        await self._ws.send(json.dumps({"realtimeInput": {"mediaChunks": [len(blob.data)]}}))

    monkeypatch.setattr(live.AsyncSession, "send_realtime_input", other_form)
    recorder = _Recorder()
    session = _session(False, recorder)
    await Writer(session).write(ClientMessage.audio(b"\x01\x02" * 320))
    await session.send_realtime_input(audio=types.Blob(data=b"\x01\x02" * 320))
    ours, sdks = recorder.frames
    assert ours == sdks == '{"realtimeInput": {"mediaChunks": [640]}}'
    assert messages._SPELLED_AS_SDK == {(False, "audio"): False}


async def test_content_and_empty_input_are_written_by_the_sdk() -> None:
    recorder = _Recorder()
    session = _session(False, recorder)
    writer = Writer(session)
    turn = types.Content(role="user", parts=[types.Part(text="hi")])
    await writer.write(ClientMessage.content((turn,), True))
    await session.send_client_content(turns=[turn], turn_complete=True)
    await writer.write(ClientMessage.text(""))
    await session.send_realtime_input(text="")
    first, first_sdk, empty, empty_sdk = recorder.frames
    assert json.loads(first) == json.loads(first_sdk)
    assert json.loads(empty) == json.loads(empty_sdk)
    assert messages._SPELLED_AS_SDK == {}, "never checked: the SDK wrote them"
