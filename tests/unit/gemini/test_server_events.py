"""Server frames of model audio are read without the SDK's validation, into exactly the message
the SDK would make; every other frame, and every error, is the SDK's own reading.

The SDK sessions here are real (``live.AsyncSession`` with a real client of each API flavour);
their WebSocket is a list of frames, so each frame can be read both ways and the messages
compared (the transport and end-to-end tests receive every answer through the same reader from
the emulator over TLS).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.auth.credentials import AnonymousCredentials
from google.genai import errors, live, types
from pydantic import BaseModel
from websockets.exceptions import ConnectionClosedOK
from websockets.frames import Close

from realtime_resumption.gemini import server_events
from realtime_resumption.gemini.server_events import Reader, audio_message


class _Frames:
    """A WebSocket that returns these frames, then closes with 1000."""

    def __init__(self, frames: list[str]) -> None:
        self._frames = list(frames)

    async def recv(self, decode: bool | None = None) -> bytes:
        if not self._frames:
            raise ConnectionClosedOK(Close(1000, "bye"), Close(1000, "bye"), rcvd_then_sent=True)
        return self._frames.pop(0).encode()


def _session(vertex: bool, frames: list[str]) -> live.AsyncSession:
    if vertex:
        client = genai.Client(
            vertexai=True, project="p", location="us-central1", credentials=AnonymousCredentials()
        )
    else:
        client = genai.Client(api_key="k")
    return live.AsyncSession(api_client=client._api_client, websocket=_Frames(frames))  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _fresh_check() -> Iterator[None]:
    server_events._READ_AS_SDK.clear()
    yield
    server_events._READ_AS_SDK.clear()


def _audio(*chunks: bytes, encode: Any = base64.b64encode, role: str | None = None) -> str:
    parts = [
        {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": encode(c).decode()}}
        for c in chunks
    ]
    turn: dict[str, Any] = {"parts": parts}
    if role is not None:
        turn["role"] = role
    return json.dumps({"serverContent": {"modelTurn": turn}})


_BAD_BASE64 = _audio(b"\x01", encode=lambda b: b"A")
_PCM = bytes(range(256)) * 4 + b"\xfb\xff\x10"
AUDIO = {
    "one chunk": _audio(_PCM),
    "with its role": _audio(_PCM, role="model"),
    "two parts": _audio(_PCM, b"\x01\x02\x03\x04"),
    "URL-safe base64": _audio(_PCM, encode=base64.urlsafe_b64encode),
    "unpadded base64": _audio(_PCM, encode=lambda b: base64.b64encode(b).rstrip(b"=")),
    "an odd byte count": _audio(b"\x01\x02\x03"),
    "another rate": json.dumps(
        {
            "serverContent": {
                "modelTurn": {
                    "parts": [{"inlineData": {"mimeType": "audio/pcm;rate=16000", "data": "AQI="}}]
                }
            }
        }
    ),
}
OTHERS = {
    "audio and turnComplete": json.dumps(
        {
            "serverContent": {
                "modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm", "data": "AQI="}}]},
                "turnComplete": True,
            }
        }
    ),
    "audio and usage": json.dumps(
        {
            "serverContent": {
                "modelTurn": {"parts": [{"inlineData": {"mimeType": "audio/pcm", "data": "AQI="}}]}
            },
            "usageMetadata": {"totalTokenCount": 3},
        }
    ),
    "text": json.dumps({"serverContent": {"modelTurn": {"parts": [{"text": "hi"}]}}}),
    "a transcription": json.dumps({"serverContent": {"outputTranscription": {"text": "hi"}}}),
    "turnComplete": json.dumps({"serverContent": {"turnComplete": True}}),
    "goAway": json.dumps({"goAway": {"timeLeft": "5s"}}),
    "a handle": json.dumps({"sessionResumptionUpdate": {"newHandle": "h", "resumable": True}}),
    "base64 the SDK refuses": _BAD_BASE64,
    "an unknown part key": json.dumps(
        {
            "serverContent": {
                "modelTurn": {
                    "parts": [{"inlineData": {"mimeType": "audio/pcm", "data": "AQI=", "extra": 1}}]
                }
            }
        }
    ),
    "empty parts": json.dumps({"serverContent": {"modelTurn": {"parts": []}}}),
    "not an object": "[1, 2]",
    "not JSON": "{",
}


async def _sdk_reading(vertex: bool, frame: str) -> types.LiveServerMessage:
    return await anext(_session(vertex, [frame]).receive())


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini", "vertex"])
@pytest.mark.parametrize("frame", AUDIO.values(), ids=AUDIO.keys())
async def test_an_audio_frame_reads_as_the_sdk_reads_it(vertex: bool, frame: str) -> None:
    ours = audio_message(frame)
    assert ours is not None, "read directly"
    assert ours == await _sdk_reading(vertex, frame)
    assert ours.server_content is not None and ours.server_content.model_turn is not None
    for part in ours.server_content.model_turn.parts or ():
        assert part.inline_data is not None and isinstance(part.inline_data.data, bytes)


@pytest.mark.parametrize("frame", OTHERS.values(), ids=OTHERS.keys())
def test_any_other_frame_is_left_to_the_sdk(frame: str) -> None:
    assert audio_message(frame) is None


@pytest.mark.parametrize("vertex", [False, True], ids=["gemini", "vertex"])
async def test_the_reader_gives_what_the_sdk_gives_and_raises_what_it_raises(vertex: bool) -> None:
    unreadable = ("{", "[1, 2]", _BAD_BASE64)
    frames = [*AUDIO.values(), *(f for f in OTHERS.values() if f not in unreadable)]
    ours: list[types.LiveServerMessage] = []
    reader = Reader(_session(vertex, frames))
    with pytest.raises(errors.APIError) as our_close:
        while True:
            ours.append(await reader.next())
    sdks: list[types.LiveServerMessage] = []
    session = _session(vertex, frames)
    with pytest.raises(errors.APIError) as sdk_close:
        while True:
            async for message in session.receive():
                sdks.append(message)
    assert ours == sdks
    assert len(ours) == len(frames)
    assert (our_close.value.code, our_close.value.details) == (1000, "bye")
    assert (sdk_close.value.code, sdk_close.value.details) == (1000, "bye")
    assert server_events._READ_AS_SDK == {vertex: True}, "audio was read directly"


@pytest.mark.parametrize(
    "frame", ["{", "[1, 2]", _BAD_BASE64], ids=["not JSON", "not an object", "bad base64"]
)
async def test_a_frame_the_sdk_cannot_read_raises_as_it_does(frame: str) -> None:
    with pytest.raises(Exception) as sdks:
        await _sdk_reading(False, frame)
    with pytest.raises(Exception) as ours:
        await Reader(_session(False, [frame])).next()
    assert type(ours.value) is type(sdks.value)
    assert str(ours.value) == str(sdks.value)


async def test_an_sdk_that_reads_audio_otherwise_reads_every_frame(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A stand-in for a future SDK that reads audio frames into another message (no such SDK
    # exists here): the reader must not build its own.
    original = live.AsyncSession.receive

    async def other_reading(self: live.AsyncSession) -> Any:
        async for message in original(self):
            yield message.model_copy(update={"usage_metadata": types.UsageMetadata()})

    monkeypatch.setattr(live.AsyncSession, "receive", other_reading)
    frame = AUDIO["one chunk"]
    message = await Reader(_session(False, [frame])).next()
    assert message.usage_metadata == types.UsageMetadata()
    assert server_events._READ_AS_SDK == {False: False}


@pytest.mark.parametrize(
    "model",
    [types.Blob, types.Part, types.Content, types.LiveServerContent, types.LiveServerMessage],
)
def test_the_quick_constructor_makes_what_model_construct_makes(model: type[Any]) -> None:
    construct = server_events._constructor(model)
    assert construct.__name__ == "construct", "the quick path, not model_construct"
    name = next(iter(model.model_fields))
    ours, theirs = construct(**{name: None}), model.model_construct(**{name: None})
    assert ours == theirs
    assert ours.model_fields_set == theirs.model_fields_set == {name}
    assert ours.model_dump() == theirs.model_dump()


def test_a_model_with_another_default_gets_model_construct() -> None:
    class Defaulted(BaseModel):
        a: int | None = None
        b: int = 3

    construct = server_events._constructor(Defaulted)
    assert construct == Defaulted.model_construct
    assert construct(a=1) == Defaulted(a=1, b=3)
