"""Each reach into google-genai's and websockets' private members (``gemini.sdk_internals``)
has its public fallback: a member missing or changed is found by the reach's probe, said once
in the log, and its callers take the public path.

No installed version lacks a member (``test_sdk_reaches.py`` proves each is taken), so each
probe here meets a stand-in that lacks it: an ``AsyncSession`` constructor that keeps the socket
and client under other names, a ``websockets`` connection object with no send core, a
``google.genai.live`` without ``ws_connect``. What runs after the probe is the real SDK, the
real writer and reader, and a real connection to the emulator over TLS."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import live, types
from loguru import logger
from websockets.asyncio.client import ClientConnection

from realtime_resumption import reaches
from realtime_resumption.gemini import messages, preopen, sdk_internals, server_events
from realtime_resumption.gemini.messages import ClientMessage, Writer
from realtime_resumption.gemini.server_events import Reader
from realtime_resumption.reaches import DirectSend
from realtime_resumption.testing.emulator import Emulator, EmulatorConfig

from ..transport.transport_helpers import quiet_hooks, started_connection

PCM = b"\x01\x00" * 320
AUDIO_FRAME = json.dumps(
    {
        "serverContent": {
            "modelTurn": {
                "parts": [
                    {
                        "inlineData": {
                            "mimeType": "audio/pcm;rate=24000",
                            "data": base64.b64encode(b"\x02\x00" * 480).decode(),
                        }
                    }
                ]
            }
        }
    }
)


@pytest.fixture(autouse=True)
def _unprobed(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every probe runs afresh here, and what it rules is undone after the test.
    for reach in (sdk_internals.SESSION_MEMBERS, sdk_internals.WS_CONNECT):
        monkeypatch.setattr(reach, "verdict", None)
    monkeypatch.setattr(reaches, "_GUARDS", {})
    monkeypatch.setattr(messages, "_SPELLED_AS_SDK", {})
    monkeypatch.setattr(server_events, "_READ_AS_SDK", {})


@pytest.fixture
def logged() -> Iterator[list[str]]:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(m.record["message"]), level="INFO")
    yield lines
    logger.remove(sink)


class _Socket:
    """Takes what the SDK writes and hands it the frames to read."""

    def __init__(self, frames: list[str] = ()) -> None:  # type: ignore[assignment]
        self.sent: list[str] = []
        self._frames = list(frames)

    async def send(self, frame: str) -> None:
        self.sent.append(frame)

    async def recv(self, decode: bool | None = None) -> str:
        return self._frames.pop(0)


def _client() -> Any:
    return genai.Client(api_key="k")._api_client


def _renamed_members(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stand in for a google-genai whose ``AsyncSession`` keeps its socket and client under
    other names, for the probe alone (the sessions made after it are the real SDK's)."""
    original = live.AsyncSession.__init__

    def init(self: live.AsyncSession, api_client: Any, websocket: Any, **kwargs: Any) -> None:
        original(self, api_client, websocket, **kwargs)
        self.__dict__["_socket"] = self.__dict__.pop("_ws")
        self.__dict__["_client"] = self.__dict__.pop("_api_client")

    with monkeypatch.context() as patched:
        patched.setattr(live.AsyncSession, "__init__", init)
        assert not sdk_internals.SESSION_MEMBERS.taken()


async def test_without_the_sessions_socket_every_message_goes_through_the_sdk(
    monkeypatch: pytest.MonkeyPatch, logged: list[str]
) -> None:
    _renamed_members(monkeypatch)
    socket = _Socket([AUDIO_FRAME])
    session = live.AsyncSession(api_client=_client(), websocket=socket)  # type: ignore[arg-type]
    assert sdk_internals.session_socket(session) is None
    assert sdk_internals.session_client(session) is None

    writer = Writer(session)
    assert not writer.write_now(ClientMessage.audio(PCM))
    await writer.write(ClientMessage.audio(PCM))
    await session.send_realtime_input(audio=types.Blob(data=PCM, mime_type="audio/pcm;rate=16000"))
    ours, sdks = socket.sent
    assert json.loads(ours) == json.loads(sdks)
    assert messages._SPELLED_AS_SDK == {}, "written by the SDK, never checked for a direct path"

    message = await Reader(session).next()
    assert message.server_content is not None and message.server_content.model_turn is not None
    assert server_events._READ_AS_SDK == {}, "read by the SDK's receive"

    [line] = [text for text in logged if "_ws and _api_client" in text]
    assert "AsyncSession keeps no _ws nor _api_client" in line


async def test_a_connection_without_the_sessions_socket_still_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No socket to tune, no round trip nor endpoint to read: the call goes on without them.
    _renamed_members(monkeypatch)
    closed = asyncio.Event()
    written: list[ClientMessage] = []
    hooks = quiet_hooks(
        closed=lambda conn, code, reason: closed.set(),
        written=lambda conn, message: written.append(message),
    )
    async with Emulator(EmulatorConfig(time_scale=0.05)) as emu:
        conn = await started_connection(emu, hooks)
        try:
            assert conn.endpoint is None and conn.round_trip is None
            conn.enqueue(ClientMessage.audio(PCM))
            async with asyncio.timeout(5):
                while not written:  # noqa: ASYNC110 - the hook has no event
                    await asyncio.sleep(0.005)
        finally:
            await conn.close()
        [record] = emu.ledger.sessions.values()
        received = [m.kind for m in record.connections[0].client_messages]
    assert received == ["setup", "audio"]
    assert closed.is_set()


class _NoSendCore(ClientConnection):
    """Stands in for a websockets connection without the synchronous send core (made without
    its constructor, so it has no ``protocol``, ``paused`` nor ``transport``); ``send`` keeps
    what it is given."""

    sent: list[str]

    async def send(self, message: Any, text: bool | None = None) -> None:
        self.sent.append(message)


async def test_a_websocket_without_the_send_core_is_written_through_send(
    logged: list[str],
) -> None:
    ws = object.__new__(_NoSendCore)
    ws.sent = []
    assert DirectSend.of(ws) is None
    assert DirectSend.of(object.__new__(_NoSendCore)) is None  # probed once per class
    session = live.AsyncSession(api_client=_client(), websocket=ws)
    writer = Writer(session)
    await writer.write(ClientMessage.audio(PCM))  # checks the spelling, then awaits send
    assert not writer.write_now(ClientMessage.audio(PCM))
    await writer.write(ClientMessage.audio(PCM))
    assert len(ws.sent) == 2
    assert json.loads(ws.sent[0])["realtime_input"]["audio"]["data"] == (
        base64.urlsafe_b64encode(PCM).decode()
    )
    [line] = [text for text in logged if "send core" in text]
    assert "_NoSendCore" in line and "protocol, paused, transport" in line


def test_without_ws_connect_nothing_is_wrapped_and_moves_close_first(
    monkeypatch: pytest.MonkeyPatch, logged: list[str]
) -> None:
    # What a move does then (closes the old connection before it dials) is
    # tests/rotation/test_service_terms.py::test_without_a_way_to_hold_the_setup_...
    monkeypatch.delattr(live, "ws_connect")
    assert not preopen.install()
    assert not preopen.install()
    assert not hasattr(live, "ws_connect")
    [line] = [text for text in logged if "ws_connect" in text]
    assert "live has no ws_connect" in line
