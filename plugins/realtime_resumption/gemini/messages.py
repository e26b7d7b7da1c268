"""The client messages a transport sends: one small typed value per message.

Every message goes through one send path as a ``ClientMessage``, so the transport can count,
record, hold or replay it without knowing how the SDK spells it. A :class:`Writer` is the only
place that writes one.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from google.genai import live, types

from realtime_resumption.gemini import sdk_internals
from realtime_resumption.reaches import DirectSend
from realtime_resumption.transport import ReplayItem, SendKind, ToolResult

_SCHEDULING: Final = {
    "interrupt": types.FunctionResponseScheduling.INTERRUPT,
    "when_idle": types.FunctionResponseScheduling.WHEN_IDLE,
    "silent": types.FunctionResponseScheduling.SILENT,
}

INPUT_AUDIO_MIME: Final = "audio/pcm;rate=16000"

MAX_MESSAGE_BYTES: Final = 15 * 2**20
"""The largest client message the transport sends, as JSON on the wire (media in base64).
Google documents no limit for Live client messages; the live service closed connections with
1009 (message too big) on 17-20 MB tool results, and the bundled emulator refuses frames over
16 MiB as websockets does. A larger message is refused at the call (``MessageTooLargeError``,
a ``ValueError``); one the service refuses anyway is dropped, not replayed."""


@dataclass(frozen=True, slots=True)
class Content:
    """Conversation turns (``client_content``)."""

    turns: tuple[types.Content, ...]
    turn_complete: bool


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """Function responses (``tool_response``)."""

    responses: tuple[types.FunctionResponse, ...]


@dataclass(frozen=True, slots=True)
class ContextUpdate:
    """A new system instruction and/or tool list for the session in progress
    (``contextUpdate``): None leaves that part as it is, ``()`` clears the tools."""

    system_instruction: str | None
    tools: tuple[types.Tool, ...] | None


Payload = bytes | Content | ToolResponse | ContextUpdate | str | None
"""What a message carries: media bytes (their MIME type is the message's), text, content,
tool responses, a context update, or nothing (a signal)."""


@dataclass(frozen=True, slots=True)
class ClientMessage:
    """One client message: its kind (what the counters call it) and its payload.

    Media is its bytes and ``mime_type`` rather than an object of its own: a session holds
    seconds of audio chunks for replay, and every object per chunk is one more for the
    garbage collector to walk."""

    kind: SendKind
    payload: Payload
    size: int
    """Payload bytes, for the counters: media raw, text as UTF-8, tool results as JSON."""
    seconds: float = 0.0
    """Seconds of PCM16 mono audio it carries, for the input bounds: 0 when it is not audio
    or its rate is not known."""
    mime_type: str = ""
    """The MIME type of media (audio, image or video frame); empty for anything else."""

    @staticmethod
    def audio(pcm: bytes) -> ClientMessage:
        """User audio, PCM16 mono at 16 kHz."""
        n = len(pcm)
        return ClientMessage("audio", pcm, n, n / _INPUT_BYTES_PER_SECOND, INPUT_AUDIO_MIME)

    @staticmethod
    def media(kind: SendKind, data: bytes, mime_type: str) -> ClientMessage:
        """Realtime media: ``audio`` or ``video`` (images are single video frames)."""
        rate = _pcm_rate(mime_type) if kind == "audio" else 0
        seconds = len(data) / 2 / rate if rate else 0.0
        return ClientMessage(kind, data, len(data), seconds, mime_type)

    @staticmethod
    def text(text: str) -> ClientMessage:
        """Realtime text: a user turn that elicits an answer."""
        return ClientMessage("text", text, len(text.encode()))

    @staticmethod
    def content(turns: tuple[types.Content, ...], turn_complete: bool) -> ClientMessage:
        """Conversation content, completing the user's turn or not."""
        size = sum(
            len(part.text.encode())
            if part.text
            else len(part.inline_data.data or b"")
            if part.inline_data
            else 0
            for turn in turns
            for part in turn.parts or ()
        )
        return ClientMessage("content", Content(turns, turn_complete), size)

    @staticmethod
    def tool_response(
        responses: tuple[types.FunctionResponse, ...], size: int = 0
    ) -> ClientMessage:
        """Answers to tool calls; ``size``: their JSON bytes."""
        return ClientMessage("tool_response", ToolResponse(responses), size)

    @staticmethod
    def tool_result(result: ToolResult, size: int, *, with_id: bool = True) -> ClientMessage:
        """The answer to one tool call (``result.response`` already the wire's JSON, of
        ``size`` bytes); ``with_id=False`` for a call the provider issued without an id."""
        scheduling = _SCHEDULING[result.scheduling] if result.scheduling else None
        response = types.FunctionResponse(
            id=result.id if with_id else None,
            name=result.name,
            response=dict(result.response),
            scheduling=scheduling,
        )
        return ClientMessage.tool_response((response,), size)

    @property
    def wire_size(self) -> int:
        """About how many bytes the message takes as JSON on the wire: media in base64, text
        escaped as the SDK's ``json.dumps`` escapes it (the envelope not counted)."""
        payload = self.payload
        if isinstance(payload, bytes):
            return _base64_size(len(payload))
        if isinstance(payload, str):
            return len(json.dumps(payload))
        if isinstance(payload, Content):
            return sum(
                len(json.dumps(part.text))
                if part.text
                else _base64_size(len(part.inline_data.data or b""))
                if part.inline_data
                else 0
                for turn in payload.turns
                for part in turn.parts or ()
            )
        return self.size

    @staticmethod
    def context_update(
        system_instruction: str | None, tools: tuple[types.Tool, ...] | None
    ) -> ClientMessage:
        """A setup change the model takes in the session; ``size``: the instruction's bytes."""
        size = len(system_instruction.encode()) if system_instruction else 0
        return ClientMessage("context_update", ContextUpdate(system_instruction, tools), size)

    @staticmethod
    def audio_stream_end() -> ClientMessage:
        """The user's audio stream paused."""
        return ClientMessage("audio_stream_end", None, 0)

    @staticmethod
    def activity_start() -> ClientMessage:
        """The user began speaking (automatic activity detection off)."""
        return ClientMessage("activity_start", None, 0)

    @staticmethod
    def activity_end() -> ClientMessage:
        """The user stopped speaking (automatic activity detection off)."""
        return ClientMessage("activity_end", None, 0)

    @staticmethod
    def history(items: Sequence[ReplayItem]) -> ClientMessage | None:
        """Prior turns as quiet context (content that does not complete the turn), tool calls
        and results as text; None when there are none. Raises ValueError for an item with
        nothing in it."""
        contents = tuple(_replay_content(item) for item in items)
        return ClientMessage.content(contents, False) if contents else None


_INPUT_BYTES_PER_SECOND: Final = 2 * 16_000


def _pcm_rate(mime_type: str) -> int:
    """The ``rate`` parameter of an audio MIME type; 0 when it has none."""
    for param in mime_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key == "rate" and value.isdigit() and int(value) > 0:
            return int(value)
    return 0


def _replay_content(item: ReplayItem) -> types.Content:
    # Gemini Live closes a connection whose seeded history holds native functionCall or
    # functionResponse parts (1007): tool traffic is written into history as text.
    if item.tool_call is not None:
        call = item.tool_call
        text = f"[called {call.name} (call {call.id}) with {_json(call.args)}]"
        return types.Content(role="model", parts=[types.Part(text=text)])
    if item.tool_result is not None:
        result = item.tool_result
        text = f"[{result.name} (call {result.id}) returned {_json(result.response)}]"
        return types.Content(role="user", parts=[types.Part(text=text)])
    if item.text is None:
        raise ValueError("a replay item needs text, a tool call or a tool result")
    return types.Content(role=item.role, parts=[types.Part(text=item.text)])


def _base64_size(n: int) -> int:
    return (n + 2) // 3 * 4


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


_SIGNALS: Final[dict[str, dict[str, object]]] = {
    "audio_stream_end": {"audioStreamEnd": True},
    "activity_start": {"activityStart": {}},
    "activity_end": {"activityEnd": {}},
}
"""The ``realtime_input`` body of each message that carries no payload, as the SDK spells it."""


def context_updates_supported() -> bool:
    """Whether this google-genai sends a setup change in the session
    (``AsyncSession.send_context_update``: 2.34 and 3.x; 2.30 lacks it)."""
    return callable(getattr(live.AsyncSession, "send_context_update", None))


def realtime_input_text(message: ClientMessage) -> str | None:
    """The ``realtime_input`` frame of ``message`` as JSON text, as the SDK's
    ``send_realtime_input`` spells it on the wire (media in URL-safe base64; its keys as it
    spells them, some camelCase); None for content and tool responses, and for empty media or
    text, which only the SDK writes. Media, 50 chunks a second, is spelled without building
    and encoding a dict: its base64 needs no escaping, and its MIME type is encoded as JSON
    like any string."""
    payload = message.payload
    if isinstance(payload, bytes):
        if not payload:
            return None
        data = base64.urlsafe_b64encode(payload).decode("ascii")
        return (
            f'{{"realtime_input": {{"{message.kind}": {{"data": "{data}", '
            f'"mime_type": {_json_string(message.mime_type)}}}}}}}'
        )
    if isinstance(payload, str):
        body: dict[str, object] | None = {"text": payload} if payload else None
    else:
        body = _SIGNALS.get(message.kind)
    return None if body is None else json.dumps({"realtime_input": body})


@functools.lru_cache(maxsize=16)
def _json_string(text: str) -> str:
    return json.dumps(text)


class _Recorder:
    """A WebSocket that keeps what is sent on it: the SDK writes a probe frame into it."""

    def __init__(self) -> None:
        self.frames: list[str] = []

    async def send(self, frame: str) -> None:
        self.frames.append(frame)


_PROBES: Final[dict[SendKind, ClientMessage]] = {
    # Bytes whose base64 differs between the standard and URL-safe alphabets; text with a
    # quote, a control character and non-ASCII, which JSON escapes.
    "audio": ClientMessage.audio(b"\x00\xfb\xff\x10"),
    "video": ClientMessage.media("video", b"\xff\xd8\xfb\xff", "image/jpeg"),
    "text": ClientMessage.text('a "quoted"\tword, d\u00e9j\u00e0 \u2028 \U0001f600'),
    "audio_stream_end": ClientMessage.audio_stream_end(),
    "activity_start": ClientMessage.activity_start(),
    "activity_end": ClientMessage.activity_end(),
}

_SPELLED_AS_SDK: dict[tuple[bool, SendKind], bool] = {}
"""(Vertex or not, kind) -> whether :func:`realtime_input_text` writes what this SDK writes."""


async def _spelled_as_sdk(client: Any, vertex: bool, kind: SendKind) -> bool:
    """Whether this SDK writes ``kind`` as :func:`realtime_input_text` does, for this API flavour:
    checked once per process by having the SDK write a probe message into a recorder, so an
    SDK that changes its wire form gets its own path back, never a wrong frame."""
    key = (vertex, kind)
    same = _SPELLED_AS_SDK.get(key)
    if same is None:
        probe = _PROBES[kind]
        recorder = _Recorder()
        try:
            sdk_session = live.AsyncSession(api_client=client, websocket=recorder)  # type: ignore[arg-type]
            await _sdk_write(sdk_session, probe)
            [frame] = recorder.frames
            ours = realtime_input_text(probe)
            same = ours is not None and json.loads(frame) == json.loads(ours)
        except Exception:
            same = False
        _SPELLED_AS_SDK[key] = same
    return same


class Writer:
    """Writes client messages on one SDK session.

    Realtime input, every 20 ms of the call, goes straight to the session's WebSocket as
    :func:`realtime_input_text` spells it: the SDK validates and converts three pydantic
    models per chunk (about 130 us), a cost the transport does not need (its public entry
    points validated the message). Each kind is checked once against the SDK's own writing
    (:func:`_spelled_as_sdk`); content, tool responses and anything the check refuses go
    through the SDK. Once checked, a frame the socket takes without waiting is written by
    :meth:`write_now`, with no coroutine (``DirectSend``).
    """

    __slots__ = ("_client", "_direct", "_session", "_vertex", "_ws")

    def __init__(self, session: live.AsyncSession) -> None:
        self._session = session
        # The SDK keeps its WebSocket and client private (``sdk_internals``): without them,
        # every message goes through the SDK.
        ws = sdk_internals.session_socket(session)
        client = self._client = sdk_internals.session_client(session)
        self._ws = ws if client is not None and callable(getattr(ws, "send", None)) else None
        self._direct = DirectSend.of(self._ws)
        # The SDK's own test: None and False both mean the Gemini API.
        self._vertex = bool(getattr(client, "vertexai", False))

    def write_now(self, message: ClientMessage) -> bool:
        """Write ``message`` at once if it is realtime input whose spelling was checked and
        the socket takes it without waiting (``DirectSend``); False, having written nothing,
        when only :meth:`write` may send it. Raises ``OSError`` when the socket broke."""
        direct = self._direct
        if direct is None or not _SPELLED_AS_SDK.get((self._vertex, message.kind)):
            return False
        text = realtime_input_text(message)
        return text is not None and direct.send_text(text)

    async def write(self, message: ClientMessage) -> None:
        """Send ``message`` on the session."""
        ws = self._ws
        if ws is not None:
            text = realtime_input_text(message)
            if text is not None:
                same = _SPELLED_AS_SDK.get((self._vertex, message.kind))
                if same is None:
                    same = await _spelled_as_sdk(self._client, self._vertex, message.kind)
                if same:
                    await ws.send(text)
                    return
        await _sdk_write(self._session, message)


async def _sdk_write(session: live.AsyncSession, message: ClientMessage) -> None:
    """Send ``message`` on ``session`` through the SDK's own methods."""
    payload = message.payload
    if isinstance(payload, bytes):
        # Both fields are known to be valid: skip a second validation on the audio path.
        blob = types.Blob.model_construct(data=payload, mime_type=message.mime_type)
        if message.kind == "audio":
            await session.send_realtime_input(audio=blob)
        else:
            await session.send_realtime_input(video=blob)
    elif isinstance(payload, str):
        await session.send_realtime_input(text=payload)
    elif isinstance(payload, Content):
        await session.send_client_content(
            turns=list(payload.turns), turn_complete=payload.turn_complete
        )
    elif isinstance(payload, ToolResponse):
        await session.send_tool_response(function_responses=list(payload.responses))
    elif isinstance(payload, ContextUpdate):
        # Only sent where the SDK has the method (``context_updates_supported``).
        await session.send_context_update(
            system_instruction=payload.system_instruction,
            tools=list(payload.tools) if payload.tools is not None else None,
        )
    elif message.kind == "activity_start":
        await session.send_realtime_input(activity_start=types.ActivityStart())
    elif message.kind == "activity_end":
        await session.send_realtime_input(activity_end=types.ActivityEnd())
    else:
        await session.send_realtime_input(audio_stream_end=True)
